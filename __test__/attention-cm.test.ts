// The cooperative-matrix flash attention forward (flash_fwd_cmacc) run by the kernel interpreter
// against naive attention: lavapipe has no cooperative matrices, so this is
// where their tiling, causal masks, online / lazy softmax across tiles, the slow rescale path,
// both P conversions and the lane reductions are checked, in both tensor layouts ([BH, T, D] and the
// rows layout: heads side by side in [B*T, ...] rows, q, k, v packed in one tensor or three). Every
// description also goes through the native validator and assembler when the addon is built
// (InterpRuntime.compileKernel).
import { test } from "node:test";
import assert from "node:assert/strict";
import { flashCmAccApplies, flashCmAccRows, flashFwdCmAccKernel, type FlashCmAccVariant } from "../ts/kernels/attention-cm-acc.js";
import { FLASH_FWD, pickFlashFwd } from "../ts/kernels/attention-variants.js";
import { check, type Case } from "./support/attn-fwd-case.js";

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
  test(`${tag} matches naive attention (interpreter)`, () => {
    check(tag, flashFwdCmAccKernel(v), flashCmAccRows(v), c);
  });
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
