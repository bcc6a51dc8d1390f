// The dK/dV candidates of the tensor-core flash attention backward (lab/flash-bwd-kv.ts,
// listed in lab/flash-bwd-variants.ts) run by the kernel interpreter against float64 gradients, as
// attention-cm-bwd.test.ts checks the shipped kernel: causal, T a multiple of 64 (and of 128 for the
// 8-subgroup candidate; T = 256 so its straight-line loop runs tiles through both stages too),
// D = 16, 32, 64, both layouts (q, k, v packed or not, several heads per row), soft-capped scores
// and the shared-memory P/dS path. Each description also goes through the native validator and
// assembler when the addon is built (InterpRuntime.compileKernel).
import { test } from "node:test";
import assert from "node:assert/strict";
import { flashBwdDkDvApplies, flashBwdDkDvSharedBytes } from "../lab/flash-bwd-kv.js";
import { DKDV_CANDIDATES, dkdvApplies, dkdvKernel, dkdvRows, type DkDvCandidate } from "../lab/flash-bwd-variants.js";
import { bwdSetup, gradError, type BwdCase } from "./support/attn-bwd-case.js";

type Case = BwdCase;

const DEV = { coopMatSupported: true, subgroupSize: 32, maxSharedMemoryBytes: 48 * 1024 };
const CANDIDATES = DKDV_CANDIDATES.filter((c) => c.shape);

function check(cand: DkDvCandidate, c: Case): void {
  const { bh, T, D } = c;
  const { rt, ins, ref, out, push, cap } = bwdSetup(419, c);
  const [dk, dv] = c.rows?.packed ? Array(2).fill(out()) : [out(), out()];
  const desc = dkdvKernel(cand, { D, pShared: c.pShared, softCap: cap > 0, ...(c.rows ? { layout: "rows" } : {}) });
  rt.beginBatch();
  rt.recordDispatch(rt.compileKernel(JSON.stringify(desc)), [...ins, dk, dv], [T / dkdvRows(cand), bh, 1], push);
  rt.submitBatch();
  for (const [p, name, h, want] of [[1, "dK", dk, ref.dK], [2, "dV", dv, ref.dV]] as const) {
    const { got, worst, scaleRef } = gradError(rt, h, want, c, p);
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
