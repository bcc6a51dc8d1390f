// The lab dQ candidates of the tensor-core flash attention backward (lab/flash-bwd-dq.ts) run by the
// kernel interpreter against float64 gradients on every problem of BWD_CASES (support/attn-bwd-case.ts:
// T = 64 … 256, D = 16 … 64, both layouts, packed and not, softCap, the shared-memory P/dS path):
// each candidate that serves the problem's T (the 8-subgroup ones where T % 128 == 0) must match
// float64 and the shipped dQ kernel ("current") bit for bit (same products in the same order).
// Then which candidates serve which problems, and the shared memory they declare. Each
// description also goes through the native validator and assembler when the addon is built
// (InterpRuntime.compileKernel).
import { test } from "node:test";
import assert from "node:assert/strict";
import { DQ_CANDIDATES, DQ_CURRENT, dqApplies, dqKernel, dqRows, dqSharedBytes, type DqCandidate } from "../lab/flash-bwd-dq.js";
import { flashBwdDqCmSharedBytes } from "../ts/kernels/attention-cm-bwd.js";
import type { KernelDesc } from "../ts/ir/index.js";
import { BWD_CASES, bwdSetup, gradError, type BwdCase } from "./support/attn-bwd-case.js";

const DEV = { coopMatSupported: true, subgroupSize: 32, maxSharedMemoryBytes: 48 * 1024 };

/** dQ (f16 bits) of candidate `cand` on case `c`, checked against float64. */
function run(cand: DqCandidate, c: BwdCase): Uint16Array {
  const { bh, T, D } = c;
  const { rt, ins, ref, out, push, cap } = bwdSetup(313, c);
  const dq = out();
  const desc = dqKernel(cand, { D, pShared: c.pShared, softCap: cap > 0, ...(c.rows ? { layout: "rows" } : {}) });
  rt.beginBatch();
  rt.recordDispatch(rt.compileKernel(JSON.stringify(desc)), [...ins, dq], [T / dqRows(cand), bh, 1], push);
  rt.submitBatch(); // the interpreter runs dispatches as they are recorded
  const { got, worst, scaleRef } = gradError(rt, dq, ref.dQ, c, 0);
  // f16 operands (dS rounded as FlashAttention rounds it) and an f16 result
  assert.ok(worst <= 4e-3 * Math.max(1, scaleRef), `${desc.name} ${JSON.stringify(c)} dQ: max abs error ${worst} (largest |ref| ${scaleRef})`);
  assert.ok(got.some((x) => x !== 0), `${desc.name} dQ: all zeros`);
  return new Uint16Array(rt.readBuffer(dq));
}

for (const c of BWD_CASES) {
  const cands = DQ_CANDIDATES.filter((x) => dqApplies(x, DEV, c.D, c.T));
  test(`dQ candidates ${cands.map((x) => x.name).join(", ")} ${JSON.stringify(c)} match float64 and the shipped kernel bit for bit (interpreter)`, () => {
    assert.equal(cands[0].name, DQ_CURRENT);
    assert.equal(cands.length, c.T % 128 === 0 ? DQ_CANDIDATES.length : 3, "the 8-subgroup candidates serve T % 128 == 0 only");
    const want = run(cands[0], c);
    for (const cand of cands.slice(1)) {
      const got = run(cand, c);
      const diff = got.findIndex((bits, i) => bits !== want[i]);
      assert.equal(diff, -1, `${cand.name} differs from ${DQ_CURRENT} at half ${diff}`);
    }
  });
}

test("dqApplies: the 8-subgroup candidates need T % 128 == 0; all need the shipped kernel's conditions and their shared memory", () => {
  const byName = (n: string) => DQ_CANDIDATES.find((x) => x.name === n)!;
  for (const D of [16, 32, 48, 64]) {
    for (const c of DQ_CANDIDATES) {
      assert.equal(dqApplies(c, DEV, D, 1024), true, `${c.name} D=${D}`);
      assert.equal(dqApplies(c, DEV, D, 960), !c.shape || c.shape.nsg === 4, `${c.name} D=${D} T=960`);
      assert.equal(dqApplies(c, DEV, D, 1000), false, `${c.name} T=1000`);
      assert.equal(dqApplies(c, { ...DEV, subgroupSize: 64 }, D, 1024), false, `${c.name} subgroups of 64`);
      assert.equal(dqApplies(c, { ...DEV, coopMatSupported: false }, D, 1024), false, `${c.name} no coopmat`);
    }
  }
  for (const c of DQ_CANDIDATES) assert.equal(dqApplies(c, DEV, 80, 1024), false, `${c.name} D=80`);
  // D = 64: one stage 24 KiB (4 subgroups, the shipped figure) or 21 KiB (8 subgroups, stride-0 row values);
  // two stages 42 KiB (4) or 41 KiB (8)
  assert.deepEqual(DQ_CANDIDATES.map((c) => (c.shape ? dqSharedBytes(c.shape, 64) : flashBwdDqCmSharedBytes({ D: 64 }))), [24576, 24576, 43008, 23552, 41984]);
  assert.equal(dqApplies(byName("sl-s2-w8"), { ...DEV, maxSharedMemoryBytes: 41984 }, 64, 1024), true);
  assert.equal(dqApplies(byName("sl-s2-w8"), { ...DEV, maxSharedMemoryBytes: 41983 }, 64, 1024), false);
  assert.equal(dqApplies(byName("sl-s2"), { ...DEV, maxSharedMemoryBytes: 41984 }, 64, 1024), false);
  assert.equal(dqApplies(byName("sl"), { ...DEV, maxSharedMemoryBytes: 24576 }, 64, 1024), true);
  assert.deepEqual(DQ_CANDIDATES.map(dqRows), [64, 64, 64, 128, 128]);
});

const ELEM_BYTES: Record<string, number> = { f32: 4, f16: 2, bf16: 2, u32x4: 16 };
const declared = (d: KernelDesc) => (d.shared ?? []).reduce((a, s) => a + s.len * ELEM_BYTES[s.elem], 0);

test("the candidates declare the shared memory dqApplies checks, every D and option, and distinct names", () => {
  const seen = new Set<string>();
  for (const D of [16, 32, 48, 64]) for (const pShared of [false, true]) for (const softCap of [false, true]) for (const layout of ["bhtd", "rows"] as const) {
    for (const c of DQ_CANDIDATES) {
      const desc = dqKernel(c, { D, pShared, softCap, ...(layout === "rows" ? { layout } : {}) });
      assert.equal(declared(desc), c.shape ? dqSharedBytes(c.shape, D) : flashBwdDqCmSharedBytes({ D }), desc.name);
      assert.ok(!seen.has(desc.name), `${desc.name} named twice`);
      seen.add(desc.name);
    }
  }
  assert.deepEqual(
    DQ_CANDIDATES.map((c) => dqKernel(c, { D: 64, layout: "rows" }).name),
    ["flash_bwd_dq_cm_f16_d64_s1_rows", "flash_bwd_dq_cm_f16_d64_w4_s1_sl_rows", "flash_bwd_dq_cm_f16_d64_w4_s2_sl_rows",
      "flash_bwd_dq_cm_f16_d64_w8_s1_rv0_sl_rows", "flash_bwd_dq_cm_f16_d64_w8_s2_rv0_sl_rows"],
  );
});
