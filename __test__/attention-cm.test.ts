// The cooperative-matrix flash attention forward for f16 (flash_fwd_cmacc_f16_*_w4_s1_sl) run by
// the kernel interpreter against float64 attention: lavapipe has no cooperative matrices, so this
// is where its tiling, the straight-line tiles before each block's diagonal, causal masks, the lazy
// softmax across tiles (keys that keep raising the row maxima rescale inside the straight-line
// loop), both P conversions and the lane reductions are checked, in both tensor layouts
// ([BH, T, D] and the rows layout: heads side by side in [B*T, ...] rows, q, k, v packed in one
// tensor or three). T = 64 and 128 run only the diagonal tile in some or all blocks, 192 is not a
// multiple of 128. Every description also goes through the native validator and assembler when
// the addon is built (InterpRuntime.compileKernel). The split (x3) form for f32:
// attention-cm-x3.test.ts.
import { test } from "node:test";
import assert from "node:assert/strict";
import {
  FLASH_CM_SL_ROWS, flashCmAccApplies, flashCmAccSharedBytes, flashCmSlApplies, flashFwdCmAccKernel, flashFwdCmSlKernel, type FlashCmSlVariant,
} from "../ts/kernels/attention-cm-acc.js";
import { FLASH_FWD, pickFlashFwd } from "../ts/kernels/attention-variants.js";
import type { KernelDesc } from "../ts/ir/index.js";
import type { RefTensor } from "./ref/tensor.js";
import { HeliosBackend } from "../ts/backend.js";
import { fromF16Array } from "../ts/f16.js";
import { Rng, randTensor } from "./harness.js";
import * as N from "./ref/nn.js";
import { CoopMockRuntime } from "./support/coop-mock-runtime.js";
import { headsOut } from "./support/attn-layout.js";
import { check, type Case } from "./support/attn-fwd-case.js";

const CASES: (Case & { pShared?: boolean })[] = [
  { bh: 2, T: 128, D: 64, cap: 0 },
  { bh: 2, T: 192, D: 64, cap: 0, growing: true },
  { bh: 3, T: 128, D: 64, cap: 0, growing: true },
  { bh: 1, T: 256, D: 64, cap: 0, growing: true },
  { bh: 1, T: 192, D: 32, cap: 2.5 },
  { bh: 1, T: 128, D: 32, cap: 0, scale: 1.5 },
  { bh: 2, T: 128, D: 48, cap: 0 },
  { bh: 2, T: 256, D: 16, cap: 1.5 },
  { bh: 1, T: 64, D: 16, cap: 0 },
  // the shared-memory P path (the fallback where the accumulator and A layouts differ)
  { bh: 1, T: 192, D: 32, cap: 0, growing: true, pShared: true },
  { bh: 1, T: 128, D: 48, cap: 0, growing: true, pShared: true },
  { bh: 1, T: 256, D: 16, cap: 1.5, pShared: true },
  // the rows layout (names end _rows): q, k, v packed or three tensors, several heads per batch row
  { bh: 6, T: 64, D: 32, cap: 0, rows: { H: 3, packed: true } },
  { bh: 2, T: 64, D: 32, cap: 2.5, rows: { H: 2, packed: true } },
  { bh: 2, T: 192, D: 64, cap: 0, growing: true, rows: { H: 2, packed: true } },
  { bh: 4, T: 128, D: 16, cap: 2.5, rows: { H: 2, packed: false } },
  { bh: 4, T: 192, D: 16, cap: 0, rows: { H: 2, packed: false } },
  { bh: 2, T: 256, D: 32, cap: 0, growing: true, rows: { H: 1, packed: false } },
  { bh: 3, T: 64, D: 32, cap: 0, pShared: true, rows: { H: 3, packed: true } },
  { bh: 2, T: 128, D: 64, cap: 0, growing: true, pShared: true, rows: { H: 2, packed: true } },
];

const optsOf = (c: Case & { pShared?: boolean }): FlashCmSlVariant =>
  ({ D: c.D, softCap: c.cap > 0, pShared: c.pShared, ...(c.rows ? { layout: "rows" as const } : {}) });

for (const c of CASES) {
  const desc = flashFwdCmSlKernel(optsOf(c));
  const tag = `${desc.name} bh=${c.bh} T=${c.T}${c.rows ? ` H=${c.rows.H}${c.rows.packed ? " packed" : ""}` : ""} softCap=${c.cap}${c.scale ? ` scale=${c.scale}` : ""}${c.growing ? " growing keys" : ""}`;
  test(`${tag} matches float64 attention (interpreter)`, () => {
    check(tag, desc, FLASH_CM_SL_ROWS, c);
  });
}

const ELEM_BYTES: Record<string, number> = { f32: 4, f16: 2, bf16: 2, u32x4: 16 };
const declared = (d: KernelDesc) => (d.shared ?? []).reduce((a, s) => a + s.len * ELEM_BYTES[s.elem], 0);

test("the f16 kernel declares the shared bytes its applies() counts; one name per option set", () => {
  const seen = new Set<string>();
  for (const D of [16, 32, 48, 64]) for (const pShared of [false, true]) for (const softCap of [false, true]) for (const layout of ["bhtd", "rows"] as const) {
    const desc = flashFwdCmSlKernel({ D, pShared, softCap, ...(layout === "rows" ? { layout } : {}) });
    assert.equal(declared(desc), flashCmAccSharedBytes({ D, nsg: 4 }), desc.name);
    assert.ok(!seen.has(desc.name), `${desc.name} named twice`);
    seen.add(desc.name);
  }
  assert.equal(flashCmAccSharedBytes({ D: 64, nsg: 4 }), 24576);
  assert.equal(FLASH_CM_SL_ROWS, 64);
  assert.throws(() => flashFwdCmAccKernel({ D: 64, nsg: 4, softCap: false }), /split \(x3\) form; f16 runs flashFwdCmSlKernel/);
});

test("the f16 kernel applies to f16, T % 64 == 0, D % 16 == 0 (<= 64), coopmat, 32-wide subgroups, 24 KiB at D=64", () => {
  const dev = { coopMatSupported: true, subgroupSize: 32, maxSharedMemoryBytes: 49152 };
  assert.ok(flashCmSlApplies(dev, "f16", 1024, 64));
  assert.ok(flashCmSlApplies(dev, "f16", 192, 64), "T=192: a multiple of 64 rows");
  assert.ok(!flashCmSlApplies(dev, "f16", 1000, 64));
  assert.ok(flashCmSlApplies({ ...dev, maxSharedMemoryBytes: 24576 }, "f16", 1024, 64), "exactly 24 KiB at D=64");
  assert.ok(!flashCmSlApplies({ ...dev, maxSharedMemoryBytes: 24575 }, "f16", 1024, 64));
  assert.ok(!flashCmSlApplies(dev, "f16", 1024, 80));
  assert.ok(!flashCmSlApplies(dev, "f16", 1024, 72));
  assert.ok(!flashCmSlApplies(dev, "f32", 1024, 64));
  assert.ok(!flashCmSlApplies({ ...dev, coopMatSupported: false }, "f16", 1024, 64));
  assert.ok(!flashCmSlApplies({ ...dev, subgroupSize: 64 }, "f16", 1024, 64));
  for (const T of [64, 128, 192, 1024]) for (const D of [16, 32, 48, 64, 80]) {
    assert.equal(flashCmSlApplies(dev, "f16", T, D), flashCmAccApplies(dev, { D, nsg: 4 }, "f16", T), `T=${T} D=${D}: the rule of the per-tile kernel it replaced`);
  }
});

test("HELIOS_FLASH_VARIANT picks the forward kernel; one that cannot serve falls back in auto order", async () => {
  const { readConfig } = await import("../ts/config.js");
  assert.equal(readConfig({}).flashVariant, "auto");
  assert.equal(readConfig({ HELIOS_FLASH_VARIANT: "simt" }).flashVariant, "simt");
  assert.equal(readConfig({ HELIOS_FLASH_VARIANT: "acc-w4s1-sl" }).flashVariant, "acc-w4s1-sl");
  assert.throws(() => readConfig({ HELIOS_FLASH_VARIANT: "fast" }), /HELIOS_FLASH_VARIANT=fast: expected one of auto/);
  // the kernels that lost to the shipped ones are gone (bench/FLASH_NOTES.md)
  assert.throws(() => readConfig({ HELIOS_FLASH_VARIANT: "cm" }), /HELIOS_FLASH_VARIANT=cm: expected one of auto/);
  assert.throws(() => readConfig({ HELIOS_FLASH_VARIANT: "acc-w4s1-x" }), /HELIOS_FLASH_VARIANT=acc-w4s1-x: expected one of auto/);
  const dev = { coopMatSupported: true, subgroupSize: 32, maxSharedMemoryBytes: 49152 };
  assert.equal(pickFlashFwd("auto", dev, "f16", 1024, 64).name, "acc-w4s1-sl");
  assert.equal(pickFlashFwd("auto", dev, "f16", 192, 16).name, "acc-w4s1-sl");
  assert.equal(pickFlashFwd("simt", dev, "f16", 1024, 64).name, "simt");
  assert.equal(pickFlashFwd("x3-w4s1-k32x", dev, "f32", 1024, 64).name, "x3-w4s1-k32x");
  assert.equal(pickFlashFwd("x3-w8s1-k32x", dev, "f32", 64, 64).name, "x3-w4s1-k32x", "T=64 is not a multiple of 128 rows");
  assert.equal(pickFlashFwd("acc-w4s1-sl", dev, "f32", 1024, 64).name, "x3-w8s1-k32x", "f32 takes the split (x3) kernels");
  assert.equal(pickFlashFwd("acc-w4s1-sl", { ...dev, maxSharedMemoryBytes: 16384 }, "f16", 1024, 64).name, "simt", "no tensor-core kernel fits 16 KiB at D=64");
  assert.equal(pickFlashFwd("auto", dev, "f16", 1000, 64).name, "simt");
  assert.equal(pickFlashFwd("auto", dev, "f32", 1024, 64).name, "x3-w8s1-k32x");
  assert.equal(pickFlashFwd("auto", { ...dev, coopMatSupported: false }, "f16", 1024, 64).name, "simt");
  for (const c of Object.values(FLASH_FWD)) assert.ok(c.build(c.name.startsWith("x3-") ? "f32" : "f16", 64, false).name.startsWith("flash_fwd"));
  assert.equal(FLASH_FWD["acc-w4s1-sl"].build("f16", 64, true, "rows").name, "flash_fwd_cmacc_f16_d64_w4_s1_sl_cap_rows");
});

// HeliosBackend.flashAttention on a cooperative-matrix device (the interpreter behind the mock
// runtime): the f16 kernel it dispatches, by name, in both layouts, and its output against float64.
for (const rows of [undefined, { H: 2, packed: true }, { H: 2, packed: false }]) {
  test(`HeliosBackend.flashAttention runs the straight-line f16 kernel (${rows ? `rows layout${rows.packed ? ", packed qkv" : ""}` : "[BH, T, D]"}, T=192)`, () => {
    const [B, H, T, D] = [2, rows?.H ?? 1, 192, 32];
    const bh = B * H, C = H * D, scale = 1 / Math.sqrt(D);
    const rng = new Rng(4301 + (rows ? 1 : 0) + (rows?.packed ? 1 : 0));
    const rt = new CoopMockRuntime();
    const Bk = new HeliosBackend({ runtime: rt });
    const run = (): { fwd: ReturnType<HeliosBackend["flashAttention"]>; qkv: RefTensor[] } => {
      if (!rows) {
        const ins = [0, 1, 2].map(() => randTensor(rng, [bh, T, D], "f16"));
        return { fwd: Bk.flashAttention(ins[0].td, ins[1].td, ins[2].td, T, scale, 0), qkv: ins.map((x) => x.ref) };
      }
      if (rows.packed) {
        const qkv = randTensor(rng, [B * T, 3 * C], "f16");
        return { fwd: Bk.flashAttention(qkv.td, qkv.td, qkv.td, T, scale, 0, { heads: H, packed: true }), qkv: [0, 1, 2].map((p) => N.rowsToHeads(qkv.ref, T, H, D, p)) };
      }
      const ins = [0, 1, 2].map(() => randTensor(rng, [B * T, C], "f16"));
      return { fwd: Bk.flashAttention(ins[0].td, ins[1].td, ins[2].td, T, scale, 0, { heads: H }), qkv: ins.map((x) => N.rowsToHeads(x.ref, T, H, D, 0)) };
    };
    const { fwd, qkv: [q, k, v] } = run();
    const ref = N.attention(q, k, v, scale, 0);
    const got = headsOut(fromF16Array(fwd.output.data as Uint16Array), bh, T, D, rows, C);
    const worst = Array.from(ref.output.data).reduce((m, w, i) => Math.max(m, Math.abs(got[i] - w)), 0);
    assert.ok(worst < 1.5e-2, `output: max abs error ${worst}`);
    const lse = fwd.lse.data as Float32Array;
    const worstL = Array.from(ref.lse.data).reduce((m, w, i) => Math.max(m, Math.abs(lse[i] - w) / Math.max(1, Math.abs(w))), 0);
    assert.ok(worstL < 2e-3, `lse: max error ${worstL}`);
    assert.deepEqual(rt.labels, [`flash_fwd_cmacc_f16_d${D}_w4_s1_sl${rows ? "_rows" : ""}`]);
  });
}
