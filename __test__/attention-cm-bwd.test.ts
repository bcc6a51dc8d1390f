// The cooperative-matrix flash attention backward run by the kernel interpreter against float64
// attention gradients: lavapipe has no cooperative matrices, so this is where the f16 dQ kernel's
// (`_w4_s1_sl`: straight-line key tiles, the diagonal tile last) tiling, causal masks (skipped
// fragments, diagonal triangles), broadcast lse / Di matrices, both P/dS conversions and the block
// order are checked on every BWD_CASES problem (T 64..256, 64 and 192 not multiples of 128; D 16,
// 32, 48, 64; softCap; the shared P/dS path), in both tensor layouts ([BH, T, D] and the rows
// layout: q, k, v packed in one [B*T, 3*H*D] tensor or three, dO [B*T, H*D], di [B*T, H]); then
// HeliosBackend's backward on a cooperative-matrix device, which runs that dQ kernel and the dK/dV
// form pickFlashBwdDkDv chooses (the dK/dV forms themselves: attention-cm-bwd-kv.test.ts; the
// split f32 dQ kernel: attention-cm-x3.test.ts). Every description also goes through the native
// validator and assembler when the addon is built (InterpRuntime.compileKernel).
import { test } from "node:test";
import assert from "node:assert/strict";
import { InterpRuntime } from "./support/interp-runtime.js";
import { Rng, randTensor } from "./harness.js";
import * as N from "./ref/nn.js";
import { FLASH_BWD_CM_ROWS, flashBwdDqCmApplies, flashBwdDqCmKernel, type FlashBwdCmVariant } from "../ts/kernels/attention-cm-bwd.js";
import { fromF16Array } from "../ts/f16.js";
import { packedAttention } from "./support/attn-layout.js";
import { BWD_CASES, bwdSetup, gradError, type BwdCase } from "./support/attn-bwd-case.js";
import { HeliosBackend } from "../ts/backend.js";
import { CoopMockRuntime } from "./support/coop-mock-runtime.js";

function check(c: BwdCase): void {
  const { bh, T, D } = c;
  const { rt, ins, ref, out, push, cap } = bwdSetup(313, c);
  const dq = out();
  const variant: FlashBwdCmVariant = { D, pShared: c.pShared, softCap: cap > 0, ...(c.rows ? { layout: "rows" } : {}) };
  rt.beginBatch();
  rt.recordDispatch(rt.compileKernel(JSON.stringify(flashBwdDqCmKernel(variant))), [...ins, dq], [T / FLASH_BWD_CM_ROWS, bh, 1], push);
  rt.submitBatch(); // the interpreter runs dispatches as they are recorded
  const tag = `bh=${bh} T=${T} D=${D}${c.pShared ? " pShared" : ""}${cap ? ` cap=${cap}` : ""}${c.rows ? ` rows H=${c.rows.H}${c.rows.packed ? " packed" : ""}` : ""}`;
  const { got, worst, scaleRef } = gradError(rt, dq, ref.dQ, c, 0);
  // f16 operands (P, dS rounded as FlashAttention rounds them) and an f16 result
  assert.ok(worst <= 4e-3 * Math.max(1, scaleRef), `${tag} dQ: max abs error ${worst} (largest |ref| ${scaleRef})`);
  assert.ok(got.some((x) => x !== 0), `${tag} dQ: all zeros`);
  if (process.env.HELIOS_TEST_VERBOSE) console.log(`${tag} dQ: max abs error ${worst}, largest |ref| ${scaleRef}`);
}

for (const c of BWD_CASES) {
  test(`flash backward dQ on cooperative matrices ${JSON.stringify(c)} matches float64 gradients (interpreter)`, () => check(c));
}

test("the dQ kernel is named by its form: sl for f16, x3 (split) for f32", () => {
  assert.equal(flashBwdDqCmKernel({ D: 64 }).name, "flash_bwd_dq_cm_f16_d64_w4_s1_sl");
  assert.equal(flashBwdDqCmKernel({ D: 16, pShared: true, softCap: true, layout: "rows" }).name, "flash_bwd_dq_cm_f16_d16_w4_s1_sl_psh_cap_rows");
  assert.equal(flashBwdDqCmKernel({ D: 64, split: true, layout: "rows" }).name, "flash_bwd_dq_cm_x3_d64_s1_rows");
});

test("the dQ kernel applies to f16 and (split) f32, T % 64 == 0, D % 16 == 0 (<= 64), 32-wide subgroups", () => {
  const dev = { coopMatSupported: true, subgroupSize: 32, maxSharedMemoryBytes: 48 * 1024 };
  assert.equal(flashBwdDqCmApplies(dev, "f16", 1024, 64), true);
  assert.equal(flashBwdDqCmApplies(dev, "f32", 1024, 64), true);
  assert.equal(flashBwdDqCmApplies(dev, "bf16", 1024, 64), false);
  assert.equal(flashBwdDqCmApplies(dev, "f16", 1000, 64), false);
  assert.equal(flashBwdDqCmApplies(dev, "f16", 1024, 72), false);
  assert.equal(flashBwdDqCmApplies(dev, "f16", 1024, 80), false);
  assert.equal(flashBwdDqCmApplies({ ...dev, subgroupSize: 64 }, "f16", 1024, 64), false);
  assert.equal(flashBwdDqCmApplies({ ...dev, coopMatSupported: false }, "f16", 1024, 64), false);
  // one stage of 64-row K and V tiles (32-row hi/lo tiles when split) and the scratch tiles at D = 64: 24 KiB
  for (const dtype of ["f16", "f32"]) {
    assert.equal(flashBwdDqCmApplies({ ...dev, maxSharedMemoryBytes: 24 * 1024 }, dtype, 1024, 64), true, dtype);
    assert.equal(flashBwdDqCmApplies({ ...dev, maxSharedMemoryBytes: 23 * 1024 }, dtype, 1024, 64), false, dtype);
  }
});

// T = 64: the dK/dV form for T % 128 != 0 (sl); T = 128: the 8-subgroup form (w8)
const DKDV_TAG: [number, string][] = [[64, "w4_s1_sl"], [128, "w8_s2_rv0_sl"]];

for (const [T, tag] of DKDV_TAG) {
  test(`flashAttentionBackward runs the tensor-core flash kernels on a cooperative-matrix device and matches float64 (HELIOS_ATTN_BWD=auto, T=${T}: dQ sl, dK/dV ${tag})`, () => {
    const [bh, D] = [2, 32];
    const rng = new Rng(977 + T);
    const [q, k, v, dO] = [0, 1, 2, 3].map(() => randTensor(rng, [bh, T, D], "f16"));
    const rt = new CoopMockRuntime();
    const B = new HeliosBackend({ runtime: rt, config: { attnBackward: "auto" } });
    const scale = 1 / Math.sqrt(D);
    const fwd = B.flashAttention(q.td, k.td, v.td, T, scale, 0);
    const g = B.flashAttentionBackward(q.td, k.td, v.td, fwd.output, dO.td, fwd.lse, T, scale, 0);
    const ref = N.attentionBackward(q.ref, k.ref, v.ref, dO.ref, scale, 0);
    for (const [name, got, want] of [["dQ", g.dQ, ref.dQ], ["dK", g.dK, ref.dK], ["dV", g.dV, ref.dV]] as const) {
      const vals = fromF16Array(got.data as Uint16Array);
      let worst = 0;
      for (let i = 0; i < vals.length; i++) worst = Math.max(worst, Math.abs(vals[i] - want.data[i]));
      assert.ok(worst < 1.5e-2, `${name}: max abs error ${worst}`);
    }
    const ran = rt.labels.filter((l) => l.startsWith("flash_bwd") || l.startsWith("attn_") || l.startsWith("mm_"));
    assert.deepEqual(ran, ["attn_rowdot_f16_l8", "flash_bwd_dq_cm_f16_d32_w4_s1_sl", `flash_bwd_dkdv_cm_f16_d32_${tag}`]);
  });
}

for (const [T, tag] of DKDV_TAG) {
  test(`flashAttention in the packed rows layout (the trainer's) runs the _rows tensor-core kernels on the qkv tensor itself: no copies, no split (T=${T}: dK/dV ${tag})`, () => {
    const [B, H, D] = [2, 2, 32];
    const C = H * D;
    const rng = new Rng(979 + T);
    const qkv = randTensor(rng, [B * T, 3 * C], "f16"), dO = randTensor(rng, [B * T, C], "f16");
    const rt = new CoopMockRuntime();
    const Bk = new HeliosBackend({ runtime: rt, config: { attnBackward: "auto" } });
    const { fwd, g, output, dQKV } = packedAttention(Bk, qkv, dO, T, H, D);
    const worst = (got: ArrayLike<number>, want: ArrayLike<number>) => Array.from(want).reduce((m, w, i) => Math.max(m, Math.abs(got[i] - w)), 0);
    assert.ok(worst(fromF16Array(fwd.output.data as Uint16Array), output) < 1.5e-2, "output");
    assert.ok(g.dQ === g.dK && g.dK === g.dV);
    const e = worst(fromF16Array(g.dQ.data as Uint16Array), dQKV);
    assert.ok(e < 1.5e-2, `dQKV: max abs error ${e}`);
    assert.deepEqual(rt.labels, [
      "flash_fwd_cmacc_f16_d32_w4_s1_sl_rows",
      "attn_rowdot_f16_l8", "flash_bwd_dq_cm_f16_d32_w4_s1_sl_rows", `flash_bwd_dkdv_cm_f16_d32_${tag}_rows`,
    ]);
  });
}
