// The cooperative-matrix flash attention backward (flash_bwd_dq_cm, flash_bwd_dkdv_cm) run by the
// kernel interpreter against float64 attention gradients: lavapipe has no cooperative matrices,
// so this is where their tiling, causal masks (skipped fragments, diagonal triangles in both
// orientations), broadcast lse / Di matrices, both P/dS conversions and the block order are
// checked, in both tensor layouts ([BH, T, D] and the rows layout: q, k, v packed in one [B*T,
// 3*H*D] tensor or three, dO [B*T, H*D], di [B*T, H]). Every description also goes through the
// native validator and assembler when the addon is built (InterpRuntime.compileKernel).
import { test } from "node:test";
import assert from "node:assert/strict";
import { InterpRuntime } from "./support/interp-runtime.js";
import { Rng, randTensor } from "./harness.js";
import * as N from "./ref/nn.js";
import {
  FLASH_BWD_CM_ROWS, flashBwdCmApplies, flashBwdDkDvCmKernel, flashBwdDqCmKernel, type FlashBwdCmVariant,
} from "../ts/kernels/attention-cm-bwd.js";
import { fromF16Array } from "../ts/f16.js";
import { packedAttention } from "./support/attn-layout.js";
import { bwdSetup, gradError, type BwdCase } from "./support/attn-bwd-case.js";
import { HeliosBackend } from "../ts/backend.js";
import { CoopMockRuntime } from "./support/coop-mock-runtime.js";

type Case = BwdCase;

function check(c: Case): void {
  const { bh, T, D } = c;
  const { rt, ins, ref, out, push, cap } = bwdSetup(313, c);
  const [dq, dk, dv] = c.rows?.packed ? Array(3).fill(out()) : [out(), out(), out()];
  const variant: FlashBwdCmVariant = { D, pShared: c.pShared, softCap: cap > 0, ...(c.rows ? { layout: "rows" } : {}) };
  const groups: [number, number, number] = [T / FLASH_BWD_CM_ROWS, bh, 1];
  rt.beginBatch();
  rt.recordDispatch(rt.compileKernel(JSON.stringify(flashBwdDqCmKernel(variant))), [...ins, dq], groups, push);
  rt.recordDispatch(rt.compileKernel(JSON.stringify(flashBwdDkDvCmKernel(variant))), [...ins, dk, dv], groups, push);
  rt.submitBatch(); // the interpreter runs dispatches as they are recorded
  const tag = `bh=${bh} T=${T} D=${D}${c.pShared ? " pShared" : ""}${cap ? ` cap=${cap}` : ""}${c.rows ? ` rows H=${c.rows.H}${c.rows.packed ? " packed" : ""}` : ""}`;
  for (const [p, name, h, want] of [[0, "dQ", dq, ref.dQ], [1, "dK", dk, ref.dK], [2, "dV", dv, ref.dV]] as const) {
    const { got, worst, scaleRef } = gradError(rt, h, want, c, p);
    // f16 operands (P, dS rounded as FlashAttention rounds them) and an f16 result
    assert.ok(worst <= 4e-3 * Math.max(1, scaleRef), `${tag} ${name}: max abs error ${worst} (largest |ref| ${scaleRef})`);
    assert.ok(got.some((x) => x !== 0), `${tag} ${name}: all zeros`);
    if (process.env.HELIOS_TEST_VERBOSE) console.log(`${tag} ${name}: max abs error ${worst}, largest |ref| ${scaleRef}`);
  }
}

for (const c of <Case[]>[
  { bh: 2, T: 128, D: 64 },
  { bh: 3, T: 64, D: 32 },
  { bh: 1, T: 192, D: 16 },
  { bh: 1, T: 192, D: 32 },
  { bh: 1, T: 128, D: 48, pShared: true },
  // soft-capped scores (Alpha's default attention): a cap the scores reach, both P/dS paths
  { bh: 2, T: 128, D: 64, cap: 0.7 },
  { bh: 1, T: 64, D: 32, pShared: true, cap: 0.5 },
  // the rows layout (_rows kernels): packed q, k, v or three tensors, several heads per row
  { bh: 6, T: 64, D: 32, rows: { H: 3, packed: true } },
  { bh: 2, T: 128, D: 64, rows: { H: 2, packed: true } },
  { bh: 4, T: 64, D: 16, cap: 0.7, rows: { H: 2, packed: false } },
  { bh: 2, T: 64, D: 48, pShared: true, rows: { H: 1, packed: true } },
]) {
  test(`flash backward on cooperative matrices ${JSON.stringify(c)} matches float64 gradients (interpreter)`, () => check(c));
}

test("flash backward on cooperative matrices applies to f16, T % 64 == 0, D % 16 == 0 (<= 64), 32-wide subgroups, with or without softCap", () => {
  const dev = { coopMatSupported: true, subgroupSize: 32, maxSharedMemoryBytes: 48 * 1024 };
  const s1 = {} as const;
  assert.equal(flashBwdCmApplies(dev, s1, "f16", 1024, 64, false), true);
  assert.equal(flashBwdCmApplies(dev, s1, "f32", 1024, 64, false), false);
  assert.equal(flashBwdCmApplies(dev, s1, "f16", 1000, 64, false), false);
  assert.equal(flashBwdCmApplies(dev, s1, "f16", 1024, 72, false), false);
  assert.equal(flashBwdCmApplies(dev, s1, "f16", 1024, 80, false), false);
  assert.equal(flashBwdCmApplies(dev, s1, "f16", 1024, 64, true), true);
  assert.equal(flashBwdCmApplies({ ...dev, subgroupSize: 64 }, s1, "f16", 1024, 64, false), false);
  assert.equal(flashBwdCmApplies({ ...dev, coopMatSupported: false }, s1, "f16", 1024, 64, false), false);
  // one stage of 64-row Q and dO tiles and the lse / Di columns at D = 64: 32 KiB
  assert.equal(flashBwdCmApplies({ ...dev, maxSharedMemoryBytes: 32 * 1024 }, s1, "f16", 1024, 64, false), true);
  assert.equal(flashBwdCmApplies({ ...dev, maxSharedMemoryBytes: 24 * 1024 }, s1, "f16", 1024, 64, false), false);
});

test("flashAttentionBackward runs the tensor-core flash kernels on a cooperative-matrix device and matches float64 (HELIOS_ATTN_BWD=auto)", () => {
  const [bh, T, D] = [2, 64, 32];
  const rng = new Rng(977);
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
  assert.deepEqual(ran, ["attn_rowdot_f16_l8", "flash_bwd_dq_cm_f16_d32_s1", "flash_bwd_dkdv_cm_f16_d32_s1"]);
});

test("flashAttention in the packed rows layout runs the _rows tensor-core kernels on the qkv tensor itself: no copies, no split", () => {
  const [B, H, T, D] = [2, 2, 64, 32];
  const C = H * D;
  const rng = new Rng(979);
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
    "flash_fwd_cmacc_f16_d32_w4_s1_r1_k64_v128_skip_lpt_rows",
    "attn_rowdot_f16_l8", "flash_bwd_dq_cm_f16_d32_s1_rows", "flash_bwd_dkdv_cm_f16_d32_s1_rows",
  ]);
});
