// The cooperative-matrix flash attention forward (flash_fwd_cmacc) run by the kernel interpreter
// against naive attention: lavapipe has no cooperative matrices, so this is
// where their tiling, causal masks, online / lazy softmax across tiles, the slow rescale path,
// both P conversions and the lane reductions are checked, in both tensor layouts ([BH, T, D] and the
// rows layout: heads side by side in [B*T, ...] rows, q, k, v packed in one tensor or three). Every
// description also goes through the native validator and assembler when the addon is built
// (InterpRuntime.compileKernel).
import { test } from "node:test";
import assert from "node:assert/strict";
import { InterpRuntime } from "./support/interp-runtime.js";
import { Rng, randTensor, sampleOf } from "./harness.js";
import * as N from "./ref/nn.js";
import { flashCmAccApplies, flashCmAccRows, flashFwdCmAccKernel, type FlashCmAccVariant } from "../ts/kernels/attention-cm-acc.js";
import { packPush } from "../ts/kernels/common.js";
import { FLASH_FWD, pickFlashFwd } from "../ts/kernels/attention-variants.js";
import { FA_PUSH, FA_ROWS_PUSH } from "../ts/kernels/attention.js";
import { fromF16Array, toF16Array } from "../ts/f16.js";
import type { KernelDesc } from "../ts/ir/index.js";
import { headsOut, qkvIn, type RowsLayout } from "./support/attn-layout.js";

/** `rows`: the tensors in the rows layout with H heads (bh = B H), q, k, v packed in one tensor or three. */
interface Case { bh: number; T: number; D: number; cap: number; scale?: number; growing?: boolean; rows?: RowsLayout }

/**
 * Runs one dispatch and compares with float64 attention on the same f16 inputs. `growing` scales
 * key j by 1 + j/16 so row maxima keep rising across tiles (the lazy softmax must rescale late).
 */
function check(label: string, desc: KernelDesc, rows: number, c: Case): void {
  const { bh, T, D, cap } = c;
  const rng = new Rng(71 + T + D + (c.growing ? 5 : 0));
  const q = randTensor(rng, [bh, T, D], "f16"), v = randTensor(rng, [bh, T, D], "f16");
  let k = randTensor(rng, [bh, T, D], "f16");
  if (c.growing) k = sampleOf([bh, T, D], Array.from(k.ref.data, (x, i) => x * (1 + Math.floor(i / D) % T / 16)), "f16");
  const rt = new InterpRuntime();
  const inL = qkvIn([q.ref, k.ref, v.ref], T, c.rows);
  const uploaded = inL.datas.map((d) => {
    const h = rt.createBuffer(d.length * 2);
    rt.uploadBuffer(h, toF16Array(d));
    return h;
  });
  const bufs = inL.bind.map((b) => uploaded[b]);
  const o = rt.createBuffer(bh * T * D * 2), lse = rt.createBuffer(bh * T * 4);
  const scale = c.scale ?? 1 / Math.sqrt(D);
  const pipe = rt.compileKernel(JSON.stringify(desc));
  rt.beginBatch();
  rt.recordDispatch(pipe, [...bufs, o, lse], [T / rows, bh, 1], packPush(c.rows ? FA_ROWS_PUSH : FA_PUSH, { T, scale, cap: cap > 0 ? cap : 1, ...inL.push }));
  rt.submitBatch(); // the interpreter runs dispatches as they are recorded
  const ref = N.attention(q.ref, k.ref, v.ref, scale, cap);
  // rows: o is [B*T, H*D]; compared head by head
  const got = headsOut(fromF16Array(new Uint16Array(rt.readBuffer(o))), bh, T, D, c.rows, (c.rows?.H ?? 1) * D);
  const gotLse = new Float32Array(rt.readBuffer(lse));
  let worst = 0;
  for (let i = 0; i < got.length; i++) worst = Math.max(worst, Math.abs(got[i] - ref.output.data[i]));
  assert.ok(worst < 1.5e-2 && got.some((x) => x !== 0), `${label}: output max abs error ${worst}`);
  let worstL = 0;
  for (let i = 0; i < gotLse.length; i++) worstL = Math.max(worstL, Math.abs(gotLse[i] - ref.lse.data[i]) / Math.max(1, Math.abs(ref.lse.data[i])));
  assert.ok(worstL < 2e-3, `${label}: lse max error ${worstL}`);
  if (process.env.HELIOS_TEST_VERBOSE) console.log(`${label} errors: output ${worst}, lse ${worstL}`);
}

// The shipped kernels (one stage, 128-bit copies, masked fragments skipped, longest blocks first)
// with 4 or 8 subgroups and 64- or 32-key tiles; the shared-memory P path (pShared: the fallback
// where the accumulator and A layouts differ) and two row blocks per subgroup (rb) on top.
const accCases: [Omit<FlashCmAccVariant, "D" | "softCap">, Case][] = [
  [{ nsg: 4 }, { bh: 2, T: 128, D: 64, cap: 0 }],
  [{ nsg: 4 }, { bh: 1, T: 192, D: 32, cap: 2.5 }],
  [{ nsg: 4 }, { bh: 1, T: 192, D: 32, cap: 0, growing: true }],
  [{ nsg: 4 }, { bh: 1, T: 128, D: 32, cap: 0, scale: 1.5 }],
  [{ nsg: 4 }, { bh: 2, T: 128, D: 48, cap: 0 }],
  [{ nsg: 4 }, { bh: 3, T: 128, D: 64, cap: 0, growing: true }],
  [{ nsg: 8 }, { bh: 1, T: 256, D: 16, cap: 0, growing: true }],
  [{ nsg: 8 }, { bh: 2, T: 256, D: 16, cap: 1.5 }],
  [{ nsg: 8 }, { bh: 1, T: 128, D: 64, cap: 0, growing: true }],
  [{ nsg: 4, bc: 32 }, { bh: 1, T: 192, D: 32, cap: 0, growing: true }],
  [{ nsg: 8, bc: 32 }, { bh: 1, T: 256, D: 16, cap: 1.5 }],
  [{ nsg: 4, pShared: true }, { bh: 1, T: 128, D: 48, cap: 0, growing: true }],
  [{ nsg: 4, bc: 32, pShared: true }, { bh: 1, T: 128, D: 32, cap: 0, scale: 1.5 }],
  [{ nsg: 4, rb: 2 }, { bh: 1, T: 256, D: 16, cap: 0, growing: true }],
  [{ nsg: 4, rb: 2, bc: 32 }, { bh: 2, T: 128, D: 32, cap: 2.5 }],
];
for (const [w, c] of accCases) {
  const v: FlashCmAccVariant = { ...w, D: c.D, softCap: c.cap > 0 };
  const tag = `w${v.nsg} r${v.rb ?? 1} k${v.bc ?? 64}${v.pShared ? " P via shared" : ""} bh=${c.bh} T=${c.T} D=${c.D} softCap=${c.cap}${c.scale ? ` scale=${c.scale}` : ""}${c.growing ? " growing keys" : ""}`;
  test(`flash_fwd_cmacc ${tag} matches naive attention (interpreter)`, () => {
    check(`flash_fwd_cmacc ${tag}`, flashFwdCmAccKernel(v), flashCmAccRows(v), c);
  });
}

// The rows layout (names end _rows): the shipped tile (acc-w4s1-x), 8 subgroups, 32-key tiles and
// the shared-memory P path, q, k, v packed or three tensors, several heads per batch row.
const rowsCases: [Omit<FlashCmAccVariant, "D" | "softCap">, Case][] = [
  [{ nsg: 4 }, { bh: 6, T: 64, D: 32, cap: 0, rows: { H: 3, packed: true } }],
  [{ nsg: 4 }, { bh: 2, T: 192, D: 64, cap: 0, growing: true, rows: { H: 2, packed: true } }],
  [{ nsg: 4 }, { bh: 4, T: 128, D: 16, cap: 2.5, rows: { H: 2, packed: false } }],
  [{ nsg: 8, bc: 32 }, { bh: 2, T: 128, D: 48, cap: 0, rows: { H: 1, packed: true } }],
  [{ nsg: 4, pShared: true }, { bh: 3, T: 64, D: 32, cap: 0, rows: { H: 3, packed: true } }],
];
for (const [w, c] of rowsCases) {
  const v: FlashCmAccVariant = { ...w, D: c.D, softCap: c.cap > 0, layout: "rows" };
  const tag = `${flashFwdCmAccKernel(v).name} B=${c.bh / c.rows!.H} H=${c.rows!.H}${c.rows!.packed ? " packed" : ""} T=${c.T} softCap=${c.cap}${c.growing ? " growing keys" : ""}`;
  test(`${tag} matches naive attention (interpreter)`, () => check(tag, flashFwdCmAccKernel(v), flashCmAccRows(v), c));
}

test("flash_fwd_cmacc applies to f16, T % rows == 0, D % 16 == 0 (<= 64), within shared memory", () => {
  const dev = { coopMatSupported: true, subgroupSize: 32, maxSharedMemoryBytes: 49152 };
  const w4 = { D: 64, nsg: 4 } as const, w8 = { D: 64, nsg: 8 } as const;
  assert.ok(flashCmAccApplies(dev, w4, "f16", 1024));
  assert.ok(!flashCmAccApplies(dev, w4, "f16", 1000));
  assert.ok(!flashCmAccApplies(dev, w8, "f16", 192));
  assert.ok(flashCmAccApplies(dev, w8, "f16", 1024));
  assert.ok(flashCmAccApplies({ ...dev, maxSharedMemoryBytes: 24576 }, w4, "f16", 1024), "4 subgroups at D=64 take exactly 24 KiB");
  assert.ok(!flashCmAccApplies({ ...dev, maxSharedMemoryBytes: 24576 }, w8, "f16", 1024));
  assert.ok(!flashCmAccApplies(dev, { ...w4, D: 80 }, "f16", 1024));
  assert.ok(!flashCmAccApplies(dev, w4, "f32", 1024));
  assert.ok(!flashCmAccApplies({ ...dev, subgroupSize: 64 }, w4, "f16", 1024));
});

test("HELIOS_FLASH_VARIANT picks the forward kernel; one that cannot serve falls back in auto order", async () => {
  const { readConfig } = await import("../ts/config.js");
  assert.equal(readConfig({}).flashVariant, "auto");
  assert.equal(readConfig({ HELIOS_FLASH_VARIANT: "simt" }).flashVariant, "simt");
  assert.throws(() => readConfig({ HELIOS_FLASH_VARIANT: "fast" }), /HELIOS_FLASH_VARIANT=fast: expected one of auto/);
  // the kernels that lost to the shipped ones are gone (bench/FLASH_NOTES.md)
  assert.throws(() => readConfig({ HELIOS_FLASH_VARIANT: "cm" }), /HELIOS_FLASH_VARIANT=cm: expected one of auto/);
  const dev = { coopMatSupported: true, subgroupSize: 32, maxSharedMemoryBytes: 49152 };
  assert.equal(pickFlashFwd("auto", dev, "f16", 1024, 64).name, "acc-w4s1-x");
  assert.equal(pickFlashFwd("simt", dev, "f16", 1024, 64).name, "simt");
  assert.equal(pickFlashFwd("x3-w4s1-k32x", dev, "f32", 1024, 64).name, "x3-w4s1-k32x");
  assert.equal(pickFlashFwd("x3-w8s1-k32x", dev, "f32", 64, 64).name, "x3-w4s1-k32x", "T=64 is not a multiple of 128 rows");
  assert.equal(pickFlashFwd("acc-w4s1-x", dev, "f32", 1024, 64).name, "x3-w8s1-k32x", "f32 takes the split (x3) kernels");
  assert.equal(pickFlashFwd("acc-w4s1-x", { ...dev, maxSharedMemoryBytes: 16384 }, "f16", 1024, 64).name, "simt", "no tensor-core kernel fits 16 KiB at D=64");
  assert.equal(pickFlashFwd("auto", dev, "f16", 1000, 64).name, "simt");
  assert.equal(pickFlashFwd("auto", dev, "f32", 1024, 64).name, "x3-w8s1-k32x");
  assert.equal(pickFlashFwd("auto", { ...dev, coopMatSupported: false }, "f16", 1024, 64).name, "simt");
  for (const c of Object.values(FLASH_FWD)) assert.ok(c.build("f16", 64, false).name.startsWith("flash_fwd"));
});
