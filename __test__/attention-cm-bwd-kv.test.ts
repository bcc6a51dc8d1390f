// The dK/dV candidates of the tensor-core flash attention backward (lab/flash-bwd-kv.ts,
// listed in lab/flash-bwd-variants.ts) run by the kernel interpreter against float64 gradients, as
// attention-cm-bwd.test.ts checks the shipped kernel: causal, T a multiple of 64 (and of 128 for the
// 8-subgroup candidate; T = 256 so its straight-line loop runs tiles through both stages too),
// D = 16, 32, 64, both layouts (q, k, v packed or not, several heads per row), soft-capped scores
// and the shared-memory P/dS path. Each description also goes through the native validator and
// assembler when the addon is built (InterpRuntime.compileKernel).
import { test } from "node:test";
import assert from "node:assert/strict";
import { InterpRuntime } from "./support/interp-runtime.js";
import { Rng, randTensor } from "./harness.js";
import * as N from "./ref/nn.js";
import { packPush } from "../ts/kernels/common.js";
import { FA_PUSH, FA_ROWS_PUSH } from "../ts/kernels/attention.js";
import { fromF16Array, toF16Array } from "../ts/f16.js";
import { flashBwdDkDvApplies, flashBwdDkDvSharedBytes } from "../lab/flash-bwd-kv.js";
import { DKDV_CANDIDATES, dkdvApplies, dkdvKernel, dkdvRows, type DkDvCandidate } from "../lab/flash-bwd-variants.js";
import { headsOut, oIn, qkvIn, rowStatIn, type RowsLayout } from "./support/attn-layout.js";

interface Case { bh: number; T: number; D: number; pShared?: boolean; cap?: number; rows?: RowsLayout }

const DEV = { coopMatSupported: true, subgroupSize: 32, maxSharedMemoryBytes: 48 * 1024 };
const CANDIDATES = DKDV_CANDIDATES.filter((c) => c.shape);

function upload(rt: InterpRuntime, data: ArrayBufferView): number {
  const h = rt.createBuffer(data.byteLength);
  rt.uploadBuffer(h, data);
  return h;
}

function check(cand: DkDvCandidate, c: Case): void {
  const { bh, T, D } = c;
  const rng = new Rng(419 + T + D + bh);
  const [q, k, v, dO] = [0, 1, 2, 3].map(() => randTensor(rng, [bh, T, D], "f16"));
  const scale = 1 / Math.sqrt(D);
  const cap = c.cap ?? 0;
  const fwd = N.attention(q.ref, k.ref, v.ref, scale, cap);
  const ref = N.attentionBackward(q.ref, k.ref, v.ref, dO.ref, scale, cap);
  const di = new Float32Array(bh * T);
  for (let r = 0; r < bh * T; r++) {
    let acc = 0;
    for (let e = 0; e < D; e++) acc += dO.ref.data[r * D + e] * fwd.output.data[r * D + e];
    di[r] = acc;
  }
  const rt = new InterpRuntime();
  const inL = qkvIn([q.ref, k.ref, v.ref], T, c.rows);
  const qkvBufs = inL.datas.map((d) => upload(rt, toF16Array(d)));
  const ins = [...inL.bind.map((b) => qkvBufs[b]), upload(rt, toF16Array(oIn(dO.ref, T, c.rows)))];
  ins.push(upload(rt, Float32Array.from(fwd.lse.data)), upload(rt, rowStatIn(di, bh, T, c.rows)));
  const out = () => rt.createBuffer(bh * T * D * 2 * (c.rows?.packed ? 3 : 1));
  const [dk, dv] = c.rows?.packed ? Array(2).fill(out()) : [out(), out()];
  const desc = dkdvKernel(cand, { D, pShared: c.pShared, softCap: cap > 0, ...(c.rows ? { layout: "rows" } : {}) });
  const push = packPush(c.rows ? FA_ROWS_PUSH : FA_PUSH, { T, scale, cap: cap > 0 ? cap : 1, ...inL.push });
  rt.beginBatch();
  rt.recordDispatch(rt.compileKernel(JSON.stringify(desc)), [...ins, dk, dv], [T / dkdvRows(cand), bh, 1], push);
  rt.submitBatch();
  const width = (c.rows?.H ?? 1) * D * (c.rows?.packed ? 3 : 1);
  for (const [p, name, h, want] of [[1, "dK", dk, ref.dK], [2, "dV", dv, ref.dV]] as const) {
    const got = headsOut(fromF16Array(new Uint16Array(rt.readBuffer(h))), bh, T, D, c.rows, width, c.rows?.packed ? p : 0);
    let worst = 0, scaleRef = 0;
    for (let i = 0; i < got.length; i++) {
      worst = Math.max(worst, Math.abs(got[i] - want.data[i]));
      scaleRef = Math.max(scaleRef, Math.abs(want.data[i]));
    }
    // the shipped kernel's bound (f16 P and dS operands, f16 results)
    assert.ok(worst <= 4e-3 * Math.max(1, scaleRef), `${desc.name} ${JSON.stringify(c)} ${name}: max abs error ${worst} (largest |ref| ${scaleRef})`);
    assert.ok(got.some((x) => x !== 0), `${desc.name} ${name}: all zeros`);
  }
}

for (const c of <Case[]>[
  { bh: 2, T: 128, D: 64 },
  { bh: 1, T: 256, D: 16, rows: { H: 1, packed: true } },
  { bh: 2, T: 128, D: 32, cap: 0.7, rows: { H: 2, packed: false } },
  { bh: 1, T: 128, D: 16, pShared: true },
  { bh: 3, T: 64, D: 32, rows: { H: 3, packed: true } },
]) {
  for (const cand of CANDIDATES) {
    // a candidate whose key block does not divide T has no case here (its applies() test covers it)
    if (!dkdvApplies(cand, DEV, c.D, c.T)) continue;
    test(`dK/dV candidate ${cand.name} ${JSON.stringify(c)} matches float64 gradients (interpreter)`, () => check(cand, c));
  }
}

test("the dK/dV candidates fit 48 KiB at D = 64, need T % (16 nsg) == 0, f16 and cooperative matrices", () => {
  for (const cand of CANDIDATES) {
    const shape = cand.shape!;
    assert.ok(flashBwdDkDvSharedBytes({ D: 64, shape }) <= 48 * 1024, cand.name);
    assert.equal(flashBwdDkDvApplies(DEV, { D: 64, shape }, "f16", 1024), true, cand.name);
    assert.equal(flashBwdDkDvApplies(DEV, { D: 64, shape }, "f32", 1024), false);
    assert.equal(flashBwdDkDvApplies(DEV, { D: 64, shape }, "f16", 1000), false);
    assert.equal(flashBwdDkDvApplies(DEV, { D: 80, shape }, "f16", 1024), false);
    assert.equal(flashBwdDkDvApplies({ ...DEV, coopMatSupported: false }, { D: 64, shape }, "f16", 1024), false);
    assert.equal(flashBwdDkDvApplies(DEV, { D: 64, shape }, "f16", 64 * 3), shape.nsg === 4);
  }
  assert.deepEqual(new Set(DKDV_CANDIDATES.map((c) => c.name)).size, DKDV_CANDIDATES.length);
  // every candidate is a different kernel, and none of them is the shipped one
  const names = DKDV_CANDIDATES.map((c) => dkdvKernel(c, { D: 64, layout: "rows" }).name);
  assert.equal(new Set(names).size, names.length);
  assert.equal(names[0], "flash_bwd_dkdv_cm_f16_d64_s1_rows");
});
