// The split (x3) tensor-core flash attention, f32 at f32 accuracy: forward (flash_fwd_cmacc_x3_*)
// and backward (flash_bwd_*_cm_x3_*) run by the kernel interpreter on f32 inputs split into bf16
// hi/lo halves, against float64 attention, in both tensor layouts ([BH, T, D] and the rows layout,
// whose split tensors are [hi | lo] of the whole packed or per-part tensor). The gates are f32-grade
// (1e-4 of the largest value): a kernel that dropped a cross product or a low part (bf16 accuracy,
// ~4e-3) fails them.
import { test } from "node:test";
import assert from "node:assert/strict";
import { InterpRuntime } from "./support/interp-runtime.js";
import { CoopMockRuntime } from "./support/coop-mock-runtime.js";
import { Rng, randTensor, sampleOf, type Sample } from "./harness.js";
import * as N from "./ref/nn.js";
import { flashCmAccApplies, flashCmAccRows, flashFwdCmAccKernel, type FlashCmAccVariant } from "../ts/kernels/attention-cm-acc.js";
import { FLASH_BWD_CM_ROWS, flashBwdDqCmApplies, flashBwdDqCmKernel } from "../ts/kernels/attention-cm-bwd.js";
import { flashBwdDkDvCmKernel, flashBwdDkDvRows, pickFlashBwdDkDv } from "../ts/kernels/attention-cm-bwd-kv.js";
import { pickFlashFwd } from "../ts/kernels/attention-variants.js";
import { FA_PUSH, FA_ROWS_PUSH } from "../ts/kernels/attention.js";
import { headsOut, oIn, packedAttention, qkvIn, rowStatIn, type RowsLayout } from "./support/attn-layout.js";
import { packPush } from "../ts/kernels/common.js";
import { f32ToBf16Bits, bf16BitsToF32 } from "../ts/kernels/matmul/reference.js";
import { HeliosBackend } from "../ts/backend.js";

/** [hi of every element | lo of every element] as bf16 bits, as ts/ops/attention.ts splits. */
function splitHost(x: ArrayLike<number>): Uint16Array {
  const out = new Uint16Array(2 * x.length);
  Float32Array.from(x).forEach((v, i) => {
    out[i] = f32ToBf16Bits(v);
    out[x.length + i] = f32ToBf16Bits(v - bf16BitsToF32(out[i]));
  });
  return out;
}

function upload(rt: InterpRuntime, data: ArrayBufferView): number {
  const h = rt.createBuffer(data.byteLength);
  rt.uploadBuffer(h, data);
  return h;
}

/** Largest |got - want| and largest |want|. */
function errors(got: ArrayLike<number>, want: ArrayLike<number>): { worst: number; scale: number } {
  let worst = 0, scale = 0;
  for (let i = 0; i < want.length; i++) {
    worst = Math.max(worst, Number.isFinite(got[i]) ? Math.abs(got[i] - want[i]) : Infinity);
    scale = Math.max(scale, Math.abs(want[i]));
  }
  return { worst, scale };
}

function gate(label: string, got: ArrayLike<number>, want: ArrayLike<number>, tol = 1e-4): void {
  const { worst, scale } = errors(got, want);
  if (process.env.HELIOS_TEST_VERBOSE) console.log(`${label}: max abs error ${worst.toExponential(2)} (largest |ref| ${scale.toFixed(3)})`);
  assert.ok(worst <= tol * Math.max(1, scale), `${label}: max abs error ${worst} (largest |ref| ${scale})`);
  assert.ok(Array.from(got).some((x) => x !== 0), `${label}: all zeros`);
}

interface Case { bh: number; T: number; D: number; cap: number; growing?: boolean; rows?: RowsLayout }

function inputs(c: Case, seed: number): Sample[] {
  const rng = new Rng(seed);
  const [q, v, dO] = [0, 1, 2].map(() => randTensor(rng, [c.bh, c.T, c.D], "f32"));
  let k = randTensor(rng, [c.bh, c.T, c.D], "f32");
  if (c.growing) k = sampleOf([c.bh, c.T, c.D], Array.from(k.ref.data, (x, i) => x * (1 + Math.floor(i / c.D) % c.T / 16)), "f32");
  return [q, k, v, dO];
}

const fwdCases: [Omit<FlashCmAccVariant, "D" | "softCap" | "split">, Case][] = [
  [{ nsg: 4 }, { bh: 2, T: 128, D: 64, cap: 0, growing: true }],
  [{ nsg: 4, bc: 32 }, { bh: 2, T: 128, D: 32, cap: 0 }],
  [{ nsg: 4, bc: 32 }, { bh: 1, T: 192, D: 64, cap: 2.5 }],
  [{ nsg: 8, bc: 32 }, { bh: 1, T: 256, D: 16, cap: 0, growing: true }],
  [{ nsg: 4, bc: 32, pShared: true }, { bh: 1, T: 128, D: 48, cap: 0, growing: true }],
  // the rows layout (_rows kernels): packed q, k, v or three tensors
  [{ nsg: 8, bc: 32 }, { bh: 4, T: 128, D: 32, cap: 0, growing: true, rows: { H: 2, packed: true } }],
  [{ nsg: 4, bc: 32 }, { bh: 3, T: 64, D: 16, cap: 2.5, rows: { H: 3, packed: false } }],
  [{ nsg: 4, bc: 32, pShared: true }, { bh: 2, T: 64, D: 48, cap: 0, rows: { H: 1, packed: true } }],
];
for (const [w, c] of fwdCases) {
  const v: FlashCmAccVariant = { ...w, D: c.D, softCap: c.cap > 0, split: true, ...(c.rows ? { layout: "rows" } : {}) };
  const tag = `${flashFwdCmAccKernel(v).name} bh=${c.bh} T=${c.T} cap=${c.cap}${c.growing ? " growing keys" : ""}${c.rows ? ` H=${c.rows.H}${c.rows.packed ? " packed" : ""}` : ""}`;
  test(`${tag} matches float64 attention to f32 accuracy (interpreter)`, () => {
    const [q, k, vv] = inputs(c, 501 + c.T + c.D);
    const rt = new InterpRuntime();
    const inL = qkvIn([q.ref, k.ref, vv.ref], c.T, c.rows);
    const split = inL.datas.map((d) => upload(rt, splitHost(d)));
    const bufs = inL.bind.map((b) => split[b]);
    const o = rt.createBuffer(c.bh * c.T * c.D * 4), lse = rt.createBuffer(c.bh * c.T * 4);
    const scale = 1 / Math.sqrt(c.D);
    rt.beginBatch();
    rt.recordDispatch(rt.compileKernel(JSON.stringify(flashFwdCmAccKernel(v))), [...bufs, o, lse], [c.T / flashCmAccRows(v), c.bh, 1],
      packPush(c.rows ? FA_ROWS_PUSH : FA_PUSH, { T: c.T, scale, cap: c.cap > 0 ? c.cap : 1, ...inL.push }));
    rt.submitBatch(); // the interpreter runs dispatches as they are recorded
    const ref = N.attention(q.ref, k.ref, vv.ref, scale, c.cap);
    const width = (c.rows?.H ?? 1) * c.D;
    gate(`${tag} output`, headsOut(new Float32Array(rt.readBuffer(o)), c.bh, c.T, c.D, c.rows, width), ref.output.data);
    gate(`${tag} lse`, new Float32Array(rt.readBuffer(lse)), ref.lse.data);
  });
}

// bits: also run x3sl where x3w8 serves and compare their bits (once: the interpreter is slow)
for (const c of <{ bh: number; T: number; D: number; pShared: boolean; cap?: number; rows?: RowsLayout; bits?: boolean }[]>[
  { bh: 1, T: 128, D: 64, pShared: false },
  { bh: 1, T: 192, D: 32, pShared: false },
  { bh: 1, T: 128, D: 16, pShared: true, bits: true },
  { bh: 1, T: 128, D: 64, pShared: false, cap: 0.7 },
  { bh: 1, T: 64, D: 32, pShared: true, cap: 1.5 },
  { bh: 2, T: 128, D: 16, pShared: false, rows: { H: 2, packed: true } },
  { bh: 3, T: 64, D: 16, pShared: true, cap: 0.7, rows: { H: 3, packed: false } },
]) {
  test(`flash backward x3 (split bf16 hi/lo) ${JSON.stringify(c)} matches float64 gradients to f32 accuracy${c.bits ? ", x3w8 and x3sl bit for bit" : ""} (interpreter)`, () => {
    const cap = c.cap ?? 0;
    const cs: Case = { bh: c.bh, T: c.T, D: c.D, cap };
    const [q, k, v, dO] = inputs(cs, 77 + c.T + c.D);
    const scale = 1 / Math.sqrt(c.D);
    const fwd = N.attention(q.ref, k.ref, v.ref, scale, cap);
    const ref = N.attentionBackward(q.ref, k.ref, v.ref, dO.ref, scale, cap);
    const di = new Float32Array(c.bh * c.T);
    for (let r = 0; r < di.length; r++) {
      let acc = 0;
      for (let e = 0; e < c.D; e++) acc += dO.ref.data[r * c.D + e] * fwd.output.data[r * c.D + e];
      di[r] = acc;
    }
    const rt = new InterpRuntime();
    const inL = qkvIn([q.ref, k.ref, v.ref], c.T, c.rows);
    const split = inL.datas.map((d) => upload(rt, splitHost(d)));
    const ins = [...inL.bind.map((b) => split[b]), upload(rt, splitHost(oIn(dO.ref, c.T, c.rows)))];
    ins.push(upload(rt, Float32Array.from(fwd.lse.data)), upload(rt, rowStatIn(di, c.bh, c.T, c.rows)));
    const packed = !!c.rows?.packed;
    const out = () => rt.createBuffer(c.bh * c.T * c.D * 4 * (packed ? 3 : 1));
    const [dq, dk, dv] = packed ? Array(3).fill(out()) : [out(), out(), out()];
    const variant = { D: c.D, pShared: c.pShared, split: true, softCap: cap > 0, ...(c.rows ? { layout: "rows" as const } : {}) };
    const push = packPush(c.rows ? FA_ROWS_PUSH : FA_PUSH, { T: c.T, scale, cap: cap > 0 ? cap : 1, ...inL.push });
    // the form HeliosBackend runs: x3w8 where T % 128 == 0, else x3sl
    const form = pickFlashBwdDkDv({ coopMatSupported: true, subgroupSize: 32 }, "f32", c.T, c.D);
    assert.equal(form, c.T % 128 === 0 ? "x3w8" : "x3sl");
    const kv = (f: "x3w8" | "x3sl") => ({ D: c.D, pShared: c.pShared, softCap: cap > 0, form: f, ...(c.rows ? { layout: "rows" as const } : {}) });
    rt.beginBatch();
    rt.recordDispatch(rt.compileKernel(JSON.stringify(flashBwdDqCmKernel(variant))), [...ins, dq], [c.T / FLASH_BWD_CM_ROWS, c.bh, 1], push);
    rt.recordDispatch(rt.compileKernel(JSON.stringify(flashBwdDkDvCmKernel(kv(form!)))), [...ins, dk, dv], [c.T / flashBwdDkDvRows(form!), c.bh, 1], push);
    rt.submitBatch();
    const width = (c.rows?.H ?? 1) * c.D * (packed ? 3 : 1);
    for (const [p, name, h, want] of [[0, "dQ", dq, ref.dQ], [1, "dK", dk, ref.dK], [2, "dV", dv, ref.dV]] as const) {
      gate(`x3 backward ${JSON.stringify(c)} ${name}`, headsOut(new Float32Array(rt.readBuffer(h)), c.bh, c.T, c.D, c.rows, width, packed ? p : 0), want.data);
    }
    // x3sl runs the same products in the same order (4 subgroups: 64 keys a workgroup): the same bits
    if (!c.bits) return;
    assert.equal(form, "x3w8");
    const [dk4, dv4] = packed ? Array(2).fill(out()) : [out(), out()];
    rt.beginBatch();
    rt.recordDispatch(rt.compileKernel(JSON.stringify(flashBwdDkDvCmKernel(kv("x3sl")))), [...ins, dk4, dv4], [c.T / flashBwdDkDvRows("x3sl"), c.bh, 1], push);
    rt.submitBatch();
    for (const [p, got, want] of [[1, dk4, dk], [2, dv4, dv]] as const) {
      const [a, b] = [got, want].map((h) => headsOut(new Float32Array(rt.readBuffer(h)), c.bh, c.T, c.D, c.rows, width, packed ? p : 0));
      assert.ok(a.every((x, i) => Object.is(x, b[i])), `x3sl ${p === 1 ? "dK" : "dV"} differs from x3w8`);
    }
  });
}

test("the x3 kernels apply to f32 only, within 48 KiB; auto picks them for f32 on cooperative-matrix devices", () => {
  const dev = { coopMatSupported: true, subgroupSize: 32, maxSharedMemoryBytes: 48 * 1024 };
  const fw = { D: 64, nsg: 4, bc: 32, split: true } as const;
  assert.ok(flashCmAccApplies(dev, fw, "f32", 1024));
  assert.ok(!flashCmAccApplies(dev, fw, "f16", 1024));
  assert.ok(flashCmAccApplies(dev, { ...fw, bc: 64 }, "f32", 1024), "64-key hi/lo tiles fit one stage at D=64");
  assert.ok(!flashCmAccApplies({ ...dev, maxSharedMemoryBytes: 32 * 1024 }, { ...fw, bc: 64 }, "f32", 1024), "64-key hi/lo tiles exceed 32 KiB");
  assert.equal(pickFlashFwd("auto", dev, "f32", 1024, 64).name, "x3-w8s1-k32x");
  assert.equal(pickFlashFwd("auto", dev, "f32", 64, 64).name, "x3-w4s1-k32x", "T=64 is not a multiple of 8 subgroups' 128 rows");
  assert.equal(pickFlashFwd("auto", dev, "f16", 1024, 64).name, "acc-w4s1-sl");
  assert.equal(pickFlashFwd("auto", { ...dev, coopMatSupported: false }, "f32", 1024, 64).name, "simt");
  assert.equal(pickFlashFwd("x3-w4s1-k32x", dev, "f16", 1024, 64).name, "acc-w4s1-sl", "an x3 kernel named for f16 falls back in auto order");
  assert.ok(flashBwdDqCmApplies(dev, "f32", 1024, 64));
  assert.equal(pickFlashBwdDkDv(dev, "f32", 1024, 64), "x3w8");
  assert.equal(pickFlashBwdDkDv(dev, "f32", 64, 16), "x3sl", "T=64 is not a multiple of 8 subgroups' 128 keys");
  assert.ok(!["x3", "x3sl", "x3w8"].includes(pickFlashBwdDkDv(dev, "f16", 1024, 64) ?? ""));
  assert.equal(pickFlashBwdDkDv({ ...dev, maxSharedMemoryBytes: 24 * 1024 }, "f32", 1024, 64), null, "four hi/lo tiles and the row values exceed 24 KiB");
});

test("HeliosBackend runs f32 flash attention forward and backward on the x3 kernels of a cooperative-matrix device, to f32 accuracy", () => {
  const [bh, T, D] = [2, 64, 32];
  const [q, k, v, dO] = inputs({ bh, T, D, cap: 0 }, 4242);
  const rt = new CoopMockRuntime();
  const B = new HeliosBackend({ runtime: rt });
  const scale = 1 / Math.sqrt(D);
  const fwd = B.flashAttention(q.td, k.td, v.td, T, scale, 0);
  const g = B.flashAttentionBackward(q.td, k.td, v.td, fwd.output, dO.td, fwd.lse, T, scale, 0);
  const ref = N.attention(q.ref, k.ref, v.ref, scale, 0);
  const refG = N.attentionBackward(q.ref, k.ref, v.ref, dO.ref, scale, 0);
  assert.equal(fwd.output.dtype, "f32");
  gate("backend output", fwd.output.data as Float32Array, ref.output.data);
  for (const [name, got, want] of [["dQ", g.dQ, refG.dQ], ["dK", g.dK, refG.dK], ["dV", g.dV, refG.dV]] as const) {
    assert.equal(got.dtype, "f32");
    gate(`backend ${name}`, got.data as Float32Array, want.data);
  }
  const ran = rt.labels.filter((l) => l.startsWith("flash") || l.startsWith("attn_") || l.startsWith("mm_presplit"));
  assert.deepEqual(ran, [
    "mm_presplit_f32_bf16x4_lo1_b2", "mm_presplit_f32_bf16x4_lo1_b2", "mm_presplit_f32_bf16x4_lo1_b2",
    "flash_fwd_cmacc_x3_d32_w4_s1_r1_k32_v128_skip_lpt",
    "attn_rowdot_f32_l8",
    "mm_presplit_f32_bf16x4_lo1_b2", "mm_presplit_f32_bf16x4_lo1_b2", "mm_presplit_f32_bf16x4_lo1_b2", "mm_presplit_f32_bf16x4_lo1_b2",
    "flash_bwd_dq_cm_x3_d32_s1", "flash_bwd_dkdv_cm_x3_d32_w4_s1_sl",
  ]);
});

test("HeliosBackend runs f32 attention in the packed rows layout on the x3 _rows kernels, splitting qkv once, to f32 accuracy", () => {
  const [B, H, T, D] = [2, 2, 64, 32];
  const C = H * D;
  const rng = new Rng(4243);
  const qkv = randTensor(rng, [B * T, 3 * C], "f32"), dO = randTensor(rng, [B * T, C], "f32");
  const rt = new CoopMockRuntime();
  const Bk = new HeliosBackend({ runtime: rt });
  const { fwd, g, output, dQKV } = packedAttention(Bk, qkv, dO, T, H, D);
  gate("rows output", fwd.output.data as Float32Array, output);
  gate("rows dQKV", g.dQ.data as Float32Array, dQKV);
  const ran = rt.labels.filter((l) => l.startsWith("flash") || l.startsWith("attn_") || l.startsWith("mm_presplit") || l.startsWith("copy"));
  assert.deepEqual(ran, [
    "mm_presplit_f32_bf16x4_lo1_b2", "flash_fwd_cmacc_x3_d32_w4_s1_r1_k32_v128_skip_lpt_rows",
    "attn_rowdot_f32_l8", "mm_presplit_f32_bf16x4_lo1_b2", "mm_presplit_f32_bf16x4_lo1_b2",
    "flash_bwd_dq_cm_x3_d32_s1_rows", "flash_bwd_dkdv_cm_x3_d32_w4_s1_sl_rows",
  ]);
});
