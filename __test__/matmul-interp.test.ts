// Every matmul kernel family executed by the IR interpreter against the fp64 reference: small odd
// shapes, edge tiles, batches, transposes, epilogues, split-K. (On devices, bench/matmul-gpu.ts
// runs the same sweep; lavapipe runs the SIMT variants in matmul-lavapipe.test.ts.)
import assert from "node:assert/strict";
import { test } from "node:test";
import { checkVariants, type CheckCase, type DtypeMode } from "../bench/matmul-check.js";
import { candidateVariants, planMatmul, unsupported } from "../ts/kernels/matmul/plan.js";
import { normalize } from "../ts/kernels/matmul/problem.js";
import type { MatmulProblem } from "../ts/kernels/matmul/problem.js";
import { readMatmulConfig } from "../ts/kernels/matmul/config.js";
import { variantByName } from "../ts/kernels/matmul/variants.js";
import { InterpRuntime } from "./support/interp-runtime.js";
// the 128×128 two-stage twins (_a2, _b2) the interpreter can afford
import "../lab/matmul-variants.js";

const CASES: CheckCase[] = [
  { name: "1x1x1", problem: { m: 1, n: 1, k: 1 }, full: true },
  { name: "17x33x65", problem: { m: 17, n: 33, k: 65 }, full: true },
  { name: "batched_NT", problem: { m: 20, n: 36, k: 24, batch: 2, transB: true }, full: true },
  { name: "TN_bias_gelu", problem: { m: 36, n: 20, k: 40, transA: true, epilogue: { bias: true, act: "gelu" } }, full: true },
  { name: "TT_scale_relu_res", problem: { m: 24, n: 28, k: 20, transA: true, transB: true, epilogue: { scale: 0.5, act: "relu", residual: true } }, full: true },
  { name: "broadcastB_silu", problem: { m: 9, n: 12, k: 33, batch: 3, broadcastB: true, epilogue: { act: "silu" } }, full: true },
];

function run(variants: string[], modes: DtypeMode[], cases = CASES) {
  const rt = new InterpRuntime();
  const rows = checkVariants(rt, { ...rt.info }, { variants: variants.map(variantByName), modes, cases });
  const bad = rows.filter((r) => !r.pass);
  assert.deepEqual(bad.map((r) => `${r.variant}/${r.mode}/${r.case}: ${r.error ?? r.relErr}`), []);
  assert.ok(rows.some((r) => !r.skipped));
  return rows;
}

test("SIMT f32 (exact: 1e-4 gate) and f16", () => {
  run(["simt_64x64_4x4"], [{ name: "f32", dtype: "f32" }, { name: "f16", dtype: "f16" }]);
});

// _sm stores the next k-tile halfway through the k-steps; _t128 stages two f32x4 per operand and
// thread and keeps 128 accumulators. Whole tiles (M, N multiples of 128, K of 8) take the unchecked
// loads and stores (_al), whose prefetch after the last k-tile is clamped inside K.
test("SIMT mid-tile staging (_sm), 128-thread tiles (_t128), unchecked loads on whole tiles (_al)", () => {
  const caps = { ...new InterpRuntime().info };
  const name = (v: string, p: MatmulProblem, aligned?: boolean) => planMatmul(p, caps, { variant: v, aligned }).steps[0].desc.name;
  assert.equal(name("simt_128x128_8x8_sm", { m: 128, n: 256, k: 24, dtype: "f32" }), "mm_simt_f32_f32_128x128x8_8x8_NN_b4c4_al_sm");
  assert.equal(name("simt_128x128_8x8_sm", { m: 128, n: 256, k: 24, dtype: "f32" }, false), "mm_simt_f32_f32_128x128x8_8x8_NN_b4c4_sm");
  assert.equal(name("simt_128x128_8x16_t128_sm", { m: 128, n: 128, k: 20, dtype: "f32" }), "mm_simt_f32_f32_128x128x8_8x16_t128_NN_b4c4_sm");
  assert.equal(name("simt_128x128_8x8_sm", { m: 130, n: 128, k: 8, transA: true, dtype: "f32" }), "mm_simt_f32_f32_128x128x8_8x8_TN_b4c4_sm");
  assert.equal(name("simt_64x64_4x4", { m: 64, n: 64, k: 64, dtype: "f16", transB: true }), "mm_simt_f16_f16_64x64x16_4x4_NT_al");
  const whole: CheckCase[] = [
    { name: "al_NN_128x256x24", problem: { m: 128, n: 256, k: 24 }, full: true },
    { name: "al_TN_batched_bias_gelu_256x128x16", problem: { m: 256, n: 128, k: 16, batch: 2, transA: true, epilogue: { bias: true, act: "gelu" } }, full: true },
    { name: "al_TT_res_128x128x40", problem: { m: 128, n: 128, k: 40, transA: true, transB: true, epilogue: { residual: true, scale: 0.5 } }, full: true },
  ];
  const rows = run(["simt_128x128_8x8_sm", "simt_128x128_8x16_t128_sm"], [{ name: "f32", dtype: "f32" }, { name: "f16", dtype: "f16" }], [
    ...CASES,
    ...whole,
    // two tiles each way with ragged edges: every strip of a thread's block and both staging slots
    { name: "133x131x21_bias", problem: { m: 133, n: 131, k: 21, epilogue: { bias: true } }, full: true },
    { name: "TN_130x129x17", problem: { m: 130, n: 129, k: 17, transA: true }, full: true },
  ]);
  assert.ok(rows.filter((r) => !r.skipped).length >= 2 * 2 * 11);
  // f32 is the exact path: the whole-tile cases hold 1e-6, not just the 1e-4 gate
  for (const r of rows.filter((x) => x.mode === "f32" && x.case.startsWith("al_"))) assert.ok((r.relErr ?? 1) < 1e-6, `${r.variant}/${r.case}: ${r.relErr}`);
});

test("SIMT split-K", () => {
  run(["simt_64x64_4x4_sk4"], [{ name: "f32", dtype: "f32" }], [
    { name: "splitk", problem: { m: 9, n: 13, k: 130, epilogue: { bias: true, act: "gelu" } }, full: true },
    { name: "splitk_batched", problem: { m: 5, n: 7, k: 70, batch: 2, transA: true }, full: true },
  ]);
});

test("coopmat f16 / bf16 / f16-acc / f32-on-f16-tiles, small tile", () => {
  run(["cm_64x64x32_w2x2"], [
    { name: "f16", dtype: "f16" }, { name: "bf16", dtype: "bf16" }, { name: "f16acc16", dtype: "f16", accF16: true }, { name: "f32", dtype: "f32" },
  ]);
});

test("coopmat other tile shapes and split-K", () => {
  run(["cm_128x128x32_w2x4", "cm_128x256x16_w2x4"], [{ name: "f16", dtype: "f16" }], CASES.slice(1, 3));
  run(["cm_64x64x32_w2x2_sk4"], [{ name: "f16", dtype: "f16" }, { name: "bf16", dtype: "bf16" }], [
    { name: "splitk", problem: { m: 20, n: 33, k: 200, epilogue: { bias: true, act: "silu" } }, full: true },
  ]);
});

test("f32 on bf16 tensor cores, hi+lo split (exact-f32 gate 1e-4)", () => {
  const rows = run(["cm3_64x64x32_w2x2", "cm3_128x64x16_w2x2"], [{ name: "f32", dtype: "f32" }], CASES.slice(0, 4));
  const worst = Math.max(...rows.filter((r) => r.relErr !== null).map((r) => r.relErr as number));
  assert.ok(worst < 1e-4, `worst ${worst}`);
  assert.ok(rows.every((r) => r.tolerance === 1e-4));
});

test("coopmat epilogue on accumulator fragments (full blocks) and staged (edge blocks)", () => {
  const epi: CheckCase[] = [
    { name: "full_scale_bias_gelu_res", problem: { m: 64, n: 64, k: 48, epilogue: { scale: 0.5, bias: true, act: "gelu", residual: true } }, full: true },
    { name: "edge_bias_relu_res", problem: { m: 70, n: 80, k: 32, batch: 2, epilogue: { bias: true, act: "relu", residual: true } }, full: true },
    { name: "full_bias_silu_NT", problem: { m: 32, n: 48, k: 40, transB: true, epilogue: { bias: true, act: "silu" } }, full: true },
  ];
  run(["cm_64x64x32_w2x2"], [{ name: "f16", dtype: "f16" }, { name: "f16acc16", dtype: "f16", accF16: true }, { name: "f32", dtype: "f32" }], epi);
  run(["cm_128x256x16_w2x2"], [{ name: "f16acc16", dtype: "f16", accF16: true }], epi.slice(0, 1));
});

// The trainer's linear layers (HeliosBackend.linear): f16 outputs with an f32 bias (qkv, fc), f32
// outputs of f16 operands with an f32 bias and residual (the projections), on the small tile and
// the tiles the shipped H200 data picks for GPT-2's plain products (whole blocks: the epilogue on
// the accumulator fragment; edge blocks: staged).
test("coopmat linear epilogues: f16 out with an f32 bias, f32 out with an f32 residual", () => {
  const cases: CheckCase[] = [
    { name: "f16out_bias32_edge", problem: { m: 70, n: 80, k: 40, epilogue: { bias: true, biasDtype: "f32" } }, full: true },
    { name: "f16out_bias32_whole", problem: { m: 128, n: 256, k: 64, epilogue: { bias: true, biasDtype: "f32" } }, full: true },
    { name: "f32out_bias_res_edge", problem: { m: 70, n: 80, k: 40, outDtype: "f32", epilogue: { bias: true, residual: true } }, full: true },
    { name: "f32out_bias_res_whole", problem: { m: 128, n: 256, k: 64, outDtype: "f32", epilogue: { bias: true, residual: true } }, full: true },
  ];
  const rows = run(["cm_64x64x32_w2x2", "cm_128x256x32_w2x4_v128_s1_kpr_b2", "cm_128x256x32_w2x4_v128_s1_kpr_a2", "cm_128x128x32_w2x2_v128_s1_kpa"], [{ name: "f16", dtype: "f16" }], cases);
  assert.ok(rows.filter((r) => !r.skipped).length >= 12, rows.map((r) => `${r.variant}/${r.case}: ${r.skipped ?? "ran"}`).join("; "));
  // f32 accumulators rounded once: f16 output rounding (~2e-4) at most, far under the 1e-2 gate
  for (const r of rows) if (!r.skipped) assert.ok(r.relErr !== null && r.relErr < (r.case.startsWith("f16") ? 1e-3 : 1e-5), `${r.variant} ${r.case}: ${r.relErr}`);
  // an f32 bias beside an f16 output is its own kernel (the name says so)
  const caps = { ...new InterpRuntime().info };
  assert.match(planMatmul({ m: 64, n: 64, k: 64, dtype: "f16", epilogue: { bias: true, biasDtype: "f32" } }, caps, { variant: "cm_64x64x32_w2x2" }).steps[0].desc.name, /_biasf32$/);
  assert.match(planMatmul({ m: 64, n: 64, k: 64, dtype: "f16", outDtype: "f32", epilogue: { bias: true } }, caps, { variant: "cm_64x64x32_w2x2" }).steps[0].desc.name, /_bias$/);
});

// 128-bit staging (coopmat-stage.ts). 136×264×88 puts both operands on u32x4 chunks with edge
// tiles in M, N and K (the last k-tile is part zeros); 130×260×72 only A (N % 8 = 4: B falls back
// to 64-bit chunks); 17×33×65 neither. f16 results are held to 1e-3, well under the 1e-2 gate
// (f16 output rounding gives ~2e-4): a wrong zero-fill of the last k-tile can stay under 1e-2.
const WIDE: CheckCase[] = [
  { name: "136x264x88_v88_edges", problem: { m: 136, n: 264, k: 88 }, full: true },
  { name: "17x33x65_fallback", problem: { m: 17, n: 33, k: 65 }, full: true },
];

test("128-bit staging: which chunk width each problem gets", () => {
  const caps = { ...new InterpRuntime().info };
  const name = (v: string, p: MatmulProblem) => planMatmul(p, caps, { variant: v }).steps[0].desc.name;
  const wide = "cm_128x256x16_w2x4_v128_pf2";
  assert.match(name(wide, { m: 136, n: 264, k: 80, dtype: "f16" }), /_v88_pf2(_|$)/);
  assert.match(name(wide, { m: 130, n: 260, k: 72, dtype: "bf16" }), /_v84_pf2(_|$)/);
  assert.match(name(wide, { m: 40, n: 48, k: 64, dtype: "f16", transA: true, transB: true }), /_TT_v88_pf2(_|$)/);
  assert.match(name(wide, { m: 64, n: 64, k: 68, dtype: "f16" }), /_v44_pf2(_|$)/);
  assert.match(name(wide, { m: 17, n: 33, k: 65, dtype: "f16" }), /_v11_pf2(_|$)/);
  // f32 inputs are converted at staging: 128-bit f32x4 loads already (vec 4)
  assert.match(name(wide, { m: 64, n: 64, k: 64, dtype: "f32" }), /_v44_pf2(_|$)/);
  assert.match(name("cm_128x256x32_w2x4_v128_s1", { m: 64, n: 64, k: 64, dtype: "f16" }), /_v88_s1_lk/);
});

test("128-bit staging, f16: every pipeline shape on aligned edge tiles and the unaligned fallback", () => {
  const rows = run(["cm_128x256x16_w2x4_v128_pf2", "cm_256x128x32_w4x2_v128_s1"], [{ name: "f16", dtype: "f16" }], WIDE);
  for (const r of rows) assert.ok(r.relErr !== null && r.relErr < 1e-3, `${r.variant} ${r.case}: ${r.relErr}`);
  run(["cm_128x256x32_w2x4_v128_s1", "cm_128x128x64_w2x4_v128_s1"], [{ name: "f16", dtype: "f16" }], [
    { name: "130x260x72_v84", problem: { m: 130, n: 260, k: 72 }, full: true },
  ]);
});

test("128-bit staging: bf16, f16 accumulation, transposes, epilogues, batches, split-K", () => {
  const cases: CheckCase[] = [
    { name: "TT_40x48x64", problem: { m: 40, n: 48, k: 64, transA: true, transB: true }, full: true },
    { name: "TN_bias_gelu_72x80x48", problem: { m: 72, n: 80, k: 48, transA: true, epilogue: { bias: true, act: "gelu" } }, full: true },
    { name: "NT_batched_res_24x40x56", problem: { m: 24, n: 40, k: 56, batch: 2, transB: true, epilogue: { scale: 0.5, residual: true } }, full: true },
  ];
  const modes: DtypeMode[] = [{ name: "f16", dtype: "f16" }, { name: "bf16", dtype: "bf16" }, { name: "f16acc16", dtype: "f16", accF16: true }];
  // prefetch 2 and one stage with prefetch 1
  run(["cm_128x256x16_w2x4_v128_pf2", "cm_128x128x32_w2x2_v128_s1"], modes, cases);
  // odd k-tile counts under prefetch 2 (K = 80: 5 tiles of 16; the extra tile is all zeros), and
  // the 4×8 f16-accumulation tiles
  run(["cm_128x256x16_w2x4_v128_pf2", "cm_256x256x32_w4x2_v128_s1"], [{ name: "f16acc16", dtype: "f16", accF16: true }], [
    { name: "bias_gelu_40x72x80", problem: { m: 40, n: 72, k: 80, epilogue: { bias: true, act: "gelu" } }, full: true },
  ]);
  run(["cm_128x256x16_w2x4_v128_pf2_sk2"], [{ name: "f16", dtype: "f16" }, { name: "f32", dtype: "f32" }], [
    { name: "splitk_bias_silu_24x40x200", problem: { m: 24, n: 40, k: 200, epilogue: { bias: true, act: "silu" } }, full: true },
  ]);
});

test("128x128 tiles (4 subgroups, 32-deep k-tiles; 8 subgroups, 64-deep): f16, bf16, f16 acc, edges, transposes, epilogue", () => {
  const tiles = ["cm_128x128x32_w2x2_v128_s1", "cm_128x128x64_w2x4_v128_s1"];
  const tn: CheckCase = { name: "TN_bias_gelu_72x80x48", problem: { m: 72, n: 80, k: 48, transA: true, epilogue: { bias: true, act: "gelu" } }, full: true };
  const rows = run(tiles, [{ name: "f16", dtype: "f16" }], [
    // 128-bit chunks; partial tiles in M and N, and K = 104 (an odd count of 32-deep tiles, a partial 64-deep one)
    { name: "136x144x104_v88_edges", problem: { m: 136, n: 144, k: 104 }, full: true },
    tn,
  ]);
  for (const r of rows) assert.ok(r.relErr !== null && r.relErr < 1e-3, `${r.variant} ${r.case}: ${r.relErr}`);
  run(tiles, [{ name: "bf16", dtype: "bf16" }, { name: "f16acc16", dtype: "f16", accF16: true }], [tn]);
  // the 64-bit / scalar fallbacks, a batched NT problem with a residual, split-K (f16 and f32 inputs)
  run(tiles, [{ name: "f16", dtype: "f16" }], [
    { name: "17x33x65_fallback", problem: { m: 17, n: 33, k: 65 }, full: true },
    { name: "NT_batched_res_24x40x56", problem: { m: 24, n: 40, k: 56, batch: 2, transB: true, epilogue: { scale: 0.5, residual: true } }, full: true },
  ]);
  run(["cm_128x128x32_w2x2_v128_s1_sk2"], [{ name: "f16", dtype: "f16" }, { name: "f32", dtype: "f32" }], [
    { name: "splitk_bias_silu_24x40x200", problem: { m: 24, n: 40, k: 200, epilogue: { bias: true, act: "silu" } }, full: true },
  ]);
});

test("128x128 tiles: chunk widths and pipeline tags", () => {
  const caps = { ...new InterpRuntime().info };
  const name = (v: string, p: MatmulProblem) => planMatmul(p, caps, { variant: v }).steps[0].desc.name;
  assert.match(name("cm_128x128x32_w2x2_v128_s1", { m: 64, n: 64, k: 64, dtype: "f16" }), /_128x128x32_w2x2_NN_v88_s1_lk/);
  assert.match(name("cm_128x128x64_w2x4_v128_s1", { m: 64, n: 64, k: 68, dtype: "f16" }), /_v44_s1_lk/);
  assert.match(name("cm_128x128x32_w2x4", { m: 64, n: 64, k: 64, dtype: "f16" }), /_128x128x32_w2x4_NN_v44$/);
});

// Unchecked staging (CoopConfig.aligned): problems whose tiles divide M, N and K load with no bounds
// checks; the prefetch past the last k-tile re-reads that tile (never multiplied). Non-zero random
// data everywhere, so a stray or doubled k-tile shows in the error.
test("aligned problems: unchecked staging loads (_al), every layout, dtype, epilogue and split-K", () => {
  const caps = { ...new InterpRuntime().info };
  const name = (v: string, p: MatmulProblem, aligned?: boolean) => planMatmul(p, caps, { variant: v, aligned }).steps[0].desc.name;
  assert.match(name("cm_128x128x32_w2x2_v128_s1", { m: 128, n: 256, k: 64, dtype: "f16" }), /_v88_s1_lk_al/);
  assert.doesNotMatch(name("cm_128x128x32_w2x2_v128_s1", { m: 128, n: 256, k: 64, dtype: "f16" }, false), /_al/);
  assert.doesNotMatch(name("cm_128x128x32_w2x2_v128_s1", { m: 128, n: 256, k: 48, dtype: "f16" }), /_al/);
  assert.doesNotMatch(name("cm_128x128x32_w2x2_v128_s1", { m: 136, n: 256, k: 64, dtype: "f16" }), /_al/);
  assert.doesNotMatch(name("cm_128x256x16_w2x4_v128_pf2", { m: 128, n: 256, k: 64, dtype: "f16" }), /_al/);
  assert.match(name("cm_128x128x32_w2x2_v128_s1_pl", { m: 128, n: 256, k: 64, dtype: "f16" }), /_v88_s1_lk_alp/);
  // output paths: 16-byte f16 stores (N % 8), 16-byte f32 stores (f32 out, split-K partials), or
  // the coopmat store (HELIOS_MATMUL_STORE=coopmat)
  const store = (p: MatmulProblem, outStore?: "wide" | "coopmat" | "staged4", v = "cm_128x128x32_w2x2_v128_s1") =>
    planMatmul(p, caps, { variant: v, outStore }).steps[0].desc.name;
  assert.match(store({ m: 128, n: 256, k: 64, dtype: "f16" }), /_al_so8$/);
  assert.match(store({ m: 128, n: 260, k: 64, dtype: "f16" }), /_v84_s1_lk$/);
  assert.match(store({ m: 128, n: 256, k: 64, dtype: "f16", outDtype: "f32" }), /_al_so4$/);
  assert.match(store({ m: 128, n: 256, k: 4096, dtype: "f16" }, "wide", "cm_128x128x32_w2x2_v128_s1_sk2"), /_so4_split$/);
  assert.match(store({ m: 128, n: 256, k: 64, dtype: "f16" }, "coopmat"), /_al$/);
  assert.match(store({ m: 128, n: 256, k: 64, dtype: "f16" }, "staged4"), /_al_staged4$/);
  // bf16 output (no bf16 accumulator type): 16-byte stores from the f32 tile where N % 8 == 0
  assert.match(store({ m: 128, n: 256, k: 64, dtype: "bf16" }), /_al_staged8$/);
  assert.match(store({ m: 128, n: 260, k: 64, dtype: "bf16" }), /_staged4$/);
  assert.match(store({ m: 128, n: 256, k: 64, dtype: "bf16", epilogue: { bias: true } }), /_al_staged4_bias$/);
  assert.match(store({ m: 128, n: 256, k: 64, dtype: "bf16" }, "staged4"), /_al_staged4$/);
  assert.doesNotMatch(name("cm_128x128x32_w2x2_v128_s1_pl", { m: 120, n: 256, k: 64, dtype: "f16" }), /_al/);
  const cases: CheckCase[] = [
    { name: "NN_128x256x96", problem: { m: 128, n: 256, k: 96 }, full: true },
    { name: "TN_bias_gelu_128x128x64", problem: { m: 128, n: 128, k: 64, transA: true, epilogue: { bias: true, act: "gelu" } }, full: true },
    { name: "NT_batched_res_128x128x32", problem: { m: 128, n: 128, k: 32, batch: 2, transB: true, epilogue: { scale: 0.5, residual: true } }, full: true },
  ];
  // _pl peels the last k-tile (K = 32: the loop runs no tile, only the peeled multiply)
  const rows = run(["cm_128x128x32_w2x2_v128_s1", "cm_128x128x32_w2x2_v128_s1_pl"], [{ name: "f16", dtype: "f16" }, { name: "bf16", dtype: "bf16" }, { name: "f16acc16", dtype: "f16", accF16: true }], cases);
  // f16 output rounding gives ~2e-4 (bf16 ~2e-3): a doubled or dropped k-tile is far above 1e-3
  for (const r of rows.filter((x) => x.mode !== "bf16")) assert.ok(r.relErr !== null && r.relErr < 1e-3, `${r.variant} ${r.mode} ${r.case}: ${r.relErr}`);
  // two shared stages, 64-bit chunks, split-K, and the f32 bf16x3 split on whole tiles
  run(["cm_64x64x32_w2x2", "cm_128x128x32_w2x4", "cm_128x128x64_w2x4_v128_s1_pl"], [{ name: "f16", dtype: "f16" }], [
    { name: "TT_128x128x128", problem: { m: 128, n: 128, k: 128, transA: true, transB: true }, full: true },
  ]);
  // bf16 out through the 16-byte path, on edge tiles too (N % 8 == 0: full blocks take it) and
  // batched; f16 accumulation writes through the same path where halfOut is off (staged4 control)
  const bf = run(["cm_128x128x32_w2x2_v128_s1"], [{ name: "bf16", dtype: "bf16" }], [
    { name: "edges_NT_batched_136x264x40", problem: { m: 136, n: 264, k: 40, batch: 2, transB: true }, full: true },
  ]);
  for (const r of bf) assert.ok(r.relErr !== null && r.relErr < 5e-3, `${r.variant} ${r.case}: ${r.relErr}`);
  // the peeled 256×256 f16-accumulation tile on a whole tile (two k-tiles) and on edges
  const big = run(["cm_256x256x32_w4x2_v128_s1_pl"], [{ name: "f16acc16", dtype: "f16", accF16: true }], [
    { name: "NN_256x256x64", problem: { m: 256, n: 256, k: 64 }, full: true },
    { name: "TN_bias_gelu_40x72x80", problem: { m: 40, n: 72, k: 80, transA: true, epilogue: { bias: true, act: "gelu" } }, full: true },
  ]);
  assert.ok(big.every((r) => !r.skipped));
  // a peeled variant on an unaligned problem runs the checked loop
  run(["cm_128x256x32_w2x4_v128_s1_pl"], [{ name: "f16", dtype: "f16" }], [{ name: "130x260x72", problem: { m: 130, n: 260, k: 72 }, full: true }]);
  run(["cm_64x64x32_w2x2_sk2"], [{ name: "f16", dtype: "f16" }], [
    { name: "splitk_bias_64x64x256", problem: { m: 64, n: 64, k: 256, epilogue: { bias: true, act: "silu" } }, full: true },
    { name: "f32out_TN_res_64x128x64", problem: { m: 64, n: 128, k: 64, transA: true, outDtype: "f32", epilogue: { residual: true, scale: 0.5 } }, full: true },
  ]);
  const f32 = run(["cm3_64x64x32_w2x2"], [{ name: "f32", dtype: "f32" }], [{ name: "64x128x64", problem: { m: 64, n: 128, k: 64 }, full: true }]);
  assert.ok(f32.every((r) => (r.relErr as number) < 1e-4));
  assert.match(name("cm3_64x64x32_w2x2", { m: 64, n: 128, k: 64, dtype: "f32" }), /_al/);
});

// f32 on presplit bf16 operands (presplit.ts): the split kernels lay out A' = [hi|hi|lo] and
// B' = [hi;lo;hi] along K for every layout (K contiguous or the row index; a broadcast B splits
// once), then a bf16 tile runs over K' = 3K. Held to the exact-f32 gate (1e-4).
test("presplit f32 (x3_*): every layout, batches, broadcast B, epilogues, edges, split-K", () => {
  const cases: CheckCase[] = [
    ...CASES,
    { name: "aligned_NN_64x128x64", problem: { m: 64, n: 128, k: 64 }, full: true },
    { name: "TT_odd_k_scalar_split_33x20x7", problem: { m: 33, n: 20, k: 7, transA: true, transB: true }, full: true },
  ];
  const rows = run(["x3_cm_64x64x32_w2x2", "x3_cm_128x128x32_w2x2_v128_s1"], [{ name: "f32", dtype: "f32" }], cases);
  for (const r of rows) {
    assert.equal(r.tolerance, 1e-4, `${r.variant} ${r.case}`);
    assert.ok(r.relErr !== null && r.relErr < 1e-4, `${r.variant} ${r.case}: ${r.relErr}`);
  }
  run(["x3_cm_64x64x32_w2x2_sk2"], [{ name: "f32", dtype: "f32" }], [
    { name: "splitk_bias_silu_24x40x200", problem: { m: 24, n: 40, k: 200, epilogue: { bias: true, act: "silu" } }, full: true },
  ]);
});

/** Whole 64×64 tiles in every layout, batches with a broadcast B, an epilogue: the two-block presplit cases. */
const TWO_BLOCK_CASES: CheckCase[] = [
  { name: "NN_64x128x64", problem: { m: 64, n: 128, k: 64 }, full: true },
  { name: "TN_batched_bias_gelu", problem: { m: 64, n: 64, k: 32, batch: 2, transA: true, epilogue: { bias: true, act: "gelu" } }, full: true },
  { name: "NT_128x64x96", problem: { m: 128, n: 64, k: 96, transB: true }, full: true },
  { name: "TT_64x64x64", problem: { m: 64, n: 64, k: 64, transA: true, transB: true }, full: true },
  { name: "broadcastB_64x64x32", problem: { m: 64, n: 64, k: 32, batch: 3, broadcastB: true }, full: true },
];

// Aligned inner tiles take the two-block layout ([hi | lo] along K, CoopConfig.kSeg2): the
// kernel maps each third of K' to a block. Every transposition (K contiguous or the row index),
// batches with a broadcast B, an epilogue and split-K (whose chunks start inside the thirds).
test("presplit f32, two-block operands on aligned tiles: every layout, batches, epilogues, split-K (exact-f32 gate)", () => {
  const rows = run(["x3_cm_64x64x32_w2x2"], [{ name: "f32", dtype: "f32" }], TWO_BLOCK_CASES);
  // 128-bit chunks (the tuned tiles' copies) across the block boundaries
  rows.push(...run(["x3_cm_128x128x32_w2x2_v128_s1"], [{ name: "f32", dtype: "f32" }], [
    { name: "TN_128x128x32", problem: { m: 128, n: 128, k: 32, transA: true }, full: true },
    { name: "NT_128x128x64", problem: { m: 128, n: 128, k: 64, transB: true }, full: true },
  ]));
  for (const r of rows) assert.ok(r.relErr !== null && r.relErr < 1e-4, `${r.variant} ${r.case}: ${r.relErr}`);
  run(["x3_cm_64x64x32_w2x2_sk2", "x3_cm_64x64x32_w2x2_sk4"], [{ name: "f32", dtype: "f32" }], [
    { name: "splitk_64x64x160", problem: { m: 64, n: 64, k: 160, epilogue: { bias: true } }, full: true },
  ]);
});

// The fused form (x3f_*, CoopConfig.fuse3): the same two-block operands, the kernel loops over K
// and stages each k-tile's hi and lo parts, three products per fragment pair. Every layout (the lo
// tile K further along a K-contiguous row, or K rows down a stacked block), batches with a
// broadcast B, an epilogue, split-K (chunks count K), 64- and 128-bit chunks; exact-f32 gate.
test("presplit f32, fused hi/lo products (x3f_*): every layout, batches, epilogues, split-K (exact-f32 gate)", () => {
  // one stage (64- and 128-bit chunks), the peeled last k-tile
  const rows = run(["x3f_cm_64x64x32_w2x2_s1", "x3f_cm_64x64x32_w2x2_v128_s1", "x3f_cm_64x64x32_w2x2_v128_s1_pl"], [{ name: "f32", dtype: "f32" }], TWO_BLOCK_CASES);
  rows.push(...run(["x3f_cm_64x64x32_w2x2_v128_s1_sk2"], [{ name: "f32", dtype: "f32" }], [
    { name: "splitk_64x64x160", problem: { m: 64, n: 64, k: 160, epilogue: { bias: true } }, full: true },
    { name: "splitk_TN_64x64x96", problem: { m: 64, n: 64, k: 96, transA: true }, full: true },
  ]));
  for (const r of rows) assert.ok(!r.skipped && r.relErr !== null && r.relErr < 1e-4, `${r.variant} ${r.case}: ${r.relErr}`);
  const caps = { ...new InterpRuntime().info };
  const plan = planMatmul({ m: 64, n: 128, k: 96, dtype: "f32", batch: 2, transB: true }, caps, { variant: "x3f_cm_64x64x32_w2x2_v128_s1_sk2" });
  assert.deepEqual(plan.steps.slice(0, 2).map((s) => s.desc.name), ["mm_presplit_f32_bf16x4_lo1_b2", "mm_presplit_f32_bf16x4_lo1_b2"]);
  assert.match(plan.steps[2].desc.name, /_k2_f3_split$/);
  // push k is K' = 3K (the blocks' geometry); split-K chunks count K: 96 in two chunks of 64 and 32
  assert.equal(plan.steps[2].pushValues.k, 288);
  assert.equal(plan.steps[2].pushValues.kChunk, 64);
  assert.deepEqual(plan.steps[2].groups, [2, 1, 4]);
  // whole tiles only: an edge needs the looped form
  assert.match(unsupported(variantByName("x3f_cm_64x64x32_w2x2_s1"), normalize({ m: 60, n: 64, k: 64, dtype: "f32" }), caps) ?? "", /whole tiles/);
  assert.match(unsupported(variantByName("x3f_cm_64x64x32_w2x2_s1"), normalize({ m: 64, n: 64, k: 64, dtype: "f16" }), caps) ?? "", /for f32 inputs/);
});

test("presplit f32: the plan (split steps, scratch, the inner bf16 problem) and when it is chosen", () => {
  const caps = { ...new InterpRuntime().info };
  const plan = planMatmul({ m: 64, n: 96, k: 40, dtype: "f32", batch: 2, transA: true }, caps, { variant: "x3_cm_64x64x32_w2x2" });
  assert.deepEqual(plan.steps.map((s) => s.bindings.join(",")), ["A,splitA", "B,splitB", "splitA,splitB,C"]);
  assert.deepEqual(plan.steps.slice(0, 2).map((s) => s.desc.name), ["mm_presplit_f32_bf16x4_lo2", "mm_presplit_f32_bf16x4_lo1"]);
  // transposed A stacks whole [K, M] blocks (seg = K·M); row-major B too (seg = K·N), in x4 chunks
  assert.deepEqual(plan.steps.slice(0, 2).map((s) => s.pushValues), [{ n: (2 * 40 * 64) / 4, seg: (40 * 64) / 4 }, { n: (2 * 40 * 96) / 4, seg: (40 * 96) / 4 }]);
  assert.deepEqual(plan.scratch, { splitA: 2 * 64 * 120 * 2, splitB: 2 * 120 * 96 * 2 });
  assert.equal(plan.steps[2].pushValues.k, 120);
  assert.match(plan.steps[2].desc.name, /^mm_cm_bf16_acc32_f32_/);
  assert.equal(plan.lowPrecision, false);
  // default for f32 where bf16 tiles exist (the x3 twin of the bf16 default), SIMT without them
  assert.match(planMatmul({ m: 256, n: 256, k: 256, dtype: "f32" }, caps).variant, /^x3_cm_/);
  assert.match(planMatmul({ m: 256, n: 256, k: 256, dtype: "f32" }, caps, { presplit: false }).variant, /^simt_/);
  const noBf16 = { ...caps, bf16Supported: false };
  assert.match(planMatmul({ m: 256, n: 256, k: 256, dtype: "f32" }, noBf16).variant, /^simt_/);
  assert.throws(() => planMatmul({ m: 8, n: 8, k: 8, dtype: "f16" }, caps, { variant: "x3_cm_64x64x32_w2x2" }), /for f32 inputs/);
});

test("presplit f32: aligned inner tiles take two-block operands (a third less to write)", () => {
  const caps = { ...new InterpRuntime().info };
  const problem = { m: 64, n: 128, k: 96, dtype: "f32" as const, batch: 2, transB: true };
  const two = planMatmul(problem, caps, { variant: "x3_cm_64x64x32_w2x2" });
  assert.deepEqual(two.steps.slice(0, 2).map((s) => s.desc.name), ["mm_presplit_f32_bf16x4_lo1_b2", "mm_presplit_f32_bf16x4_lo1_b2"]);
  assert.deepEqual(two.scratch, { splitA: 2 * 2 * 64 * 96 * 2, splitB: 2 * 2 * 96 * 128 * 2 });
  assert.match(two.steps[2].desc.name, /_al(p)?_\w*_k2$/);
  // the kernel loops over K' = 3K; the batch strides are the two-block operands'
  assert.equal(two.steps[2].pushValues.k, 288);
  assert.equal(two.steps[2].pushValues.strideA, 64 * 192);
  assert.equal(two.steps[2].pushValues.strideB, 192 * 128);
  // an unaligned problem keeps three blocks
  const edge = planMatmul({ ...problem, m: 60 }, caps, { variant: "x3_cm_64x64x32_w2x2" });
  assert.equal(edge.steps[0].desc.name, "mm_presplit_f32_bf16x4_lo2");
});

// Pair staging (CoopConfig.pairK): the K-contiguous operands are read two k-tiles per load; the
// threads holding the second tile store it one k-tile later (the branch form, pairSlots: the
// K-contiguous operands of _kpa). NN (A paired, B row-paired), NT (both), TT (B, A row-paired),
// several pairs, epilogues and batches, on whole tiles; where it does not apply (TN, an odd k-tile
// count, edges, split-K) the plain staging runs.
test("pair staging (_kpa): NN, NT and TT, several pairs, epilogues, batches; where it does not apply", () => {
  const caps = { ...new InterpRuntime().info };
  const name = (v: string, p: MatmulProblem) => planMatmul(p, caps, { variant: v }).steps[0].desc.name;
  const kp = "cm_128x256x32_w2x4_v128_s1_kpa";
  assert.match(name(kp, { m: 128, n: 256, k: 128, dtype: "f16" }), /_NN_v88_s1_lk_kpa_al/);
  assert.match(name(kp, { m: 128, n: 256, k: 128, dtype: "f16", transB: true }), /_NT_v88_s1_lk_kpa_al/);
  assert.match(name(kp, { m: 128, n: 256, k: 128, dtype: "f16", transA: true, transB: true }), /_TT_v88_s1_lk_kpa_al/);
  for (const p of [{ m: 128, n: 256, k: 128, transA: true }, { m: 128, n: 256, k: 96, transB: true }, { m: 136, n: 256, k: 128, transB: true }]) {
    assert.equal(name(kp, { ...p, dtype: "f16" }), name("cm_128x256x32_w2x4_v128_s1", { ...p, dtype: "f16" }), JSON.stringify(p));
  }
  assert.doesNotMatch(name(`${kp}_sk2`, { m: 128, n: 256, k: 4096, dtype: "f16", transB: true }), /_kp/);
  // the planner's default takes the pair-staged twin where B is K-contiguous; the tuner races the
  // twins wherever an operand is K-contiguous (not in TN, where they are the plain kernels)
  assert.match(planMatmul({ m: 4096, n: 4096, k: 4096, dtype: "f16", transB: true }, caps).variant, /_kpa$/);
  assert.doesNotMatch(planMatmul({ m: 4096, n: 4096, k: 4096, dtype: "f16" }, caps).variant, /_kp/);
  const cands = (p: MatmulProblem) => candidateVariants(normalize(p), caps).map((v) => v.name);
  for (const v of ["cm_128x256x32_w2x4_v128_s1_kpa", "cm_128x256x32_w2x4_v128_s1_kpr"]) {
    assert.ok(cands({ m: 4096, n: 4096, k: 4096, dtype: "f16" }).includes(v), v);
    assert.ok(!cands({ m: 4096, n: 4096, k: 4096, dtype: "f16", transA: true }).includes(v), v);
  }
  const rows = run([kp], [{ name: "f16", dtype: "f16" }, { name: "f16acc16", dtype: "f16", accF16: true }, { name: "bf16", dtype: "bf16" }], [
    { name: "NN_128x256x192", problem: { m: 128, n: 256, k: 192 }, full: true },
    { name: "NT_batched_res_128x256x64", problem: { m: 128, n: 256, k: 64, batch: 2, transB: true, epilogue: { scale: 0.5, residual: true } }, full: true },
    { name: "TT_bias_gelu_256x256x128", problem: { m: 256, n: 256, k: 128, transA: true, transB: true, epilogue: { bias: true, act: "gelu" } }, full: true },
    { name: "NT_odd_tiles_128x256x96", problem: { m: 128, n: 256, k: 96, transB: true }, full: true },
  ]);
  // f16 output rounding gives ~2e-4: a tile stored from the wrong half, twice or never is far above 1e-3
  for (const r of rows.filter((x) => x.mode !== "bf16")) assert.ok(r.relErr !== null && r.relErr < 1e-3, `${r.variant} ${r.mode} ${r.case}: ${r.relErr}`);
  const more = run(["cm_128x128x32_w2x2_v128_s1_kpa", "cm_256x256x32_w2x4_v128_s1_kpa"], [{ name: "f16acc16", dtype: "f16", accF16: true }], [
    { name: "NT_256x256x128", problem: { m: 256, n: 256, k: 128, transB: true }, full: true },
    { name: "NN_batched_256x256x64", problem: { m: 256, n: 256, k: 64, batch: 2 }, full: true },
  ]);
  for (const r of more) assert.ok(r.relErr !== null && r.relErr < 1e-3, `${r.variant} ${r.case}: ${r.relErr}`);
});

// The rotated pair form (CoopConfig.pairRot): odd slots take the other half of each line and
// rows xor 4; every lane stores one chunk of each slot pair per k-tile by select.
test("rotated pair staging (_kpr) and row pairs (_kpa): NN, NT, TT, several pairs, epilogue, batches", () => {
  const caps = { ...new InterpRuntime().info };
  const name = (v: string, p: MatmulProblem) => planMatmul(p, caps, { variant: v }).steps[0].desc.name;
  assert.match(name("cm_128x256x32_w2x4_v128_s1_kpr", { m: 128, n: 256, k: 128, dtype: "f16" }), /_NN_v88_s1_lk_kpr_al/);
  // f32 inputs staged through f32x4 chunks: the branch form instead
  assert.match(name("cm_128x256x32_w2x4_v128_s1_kpr", { m: 128, n: 256, k: 128, dtype: "f32", transB: true }), /_v44_s1_lk_kp_al/);
  const rows = run(["cm_128x256x32_w2x4_v128_s1_kpr", "cm_128x256x32_w2x4_v128_s1_kpa"], [{ name: "f16", dtype: "f16" }, { name: "f16acc16", dtype: "f16", accF16: true }], [
    { name: "NN_128x256x192", problem: { m: 128, n: 256, k: 192 }, full: true },
    { name: "NT_batched_bias_gelu_128x256x64", problem: { m: 128, n: 256, k: 64, batch: 2, transB: true, epilogue: { bias: true, act: "gelu" } }, full: true },
    { name: "TT_256x256x128", problem: { m: 256, n: 256, k: 128, transA: true, transB: true }, full: true },
  ]);
  for (const r of rows) assert.ok(r.relErr !== null && r.relErr < 1e-3, `${r.variant} ${r.mode} ${r.case}: ${r.relErr}`);
  const big = run(["cm_256x256x32_w2x4_v128_s1_kpr", "cm_256x256x32_w2x4_v128_s1_kpa"], [{ name: "f16acc16", dtype: "f16", accF16: true }], [
    { name: "NN_256x256x128", problem: { m: 256, n: 256, k: 128 }, full: true },
    { name: "TT_256x256x64", problem: { m: 256, n: 256, k: 64, transA: true, transB: true }, full: true },
  ]);
  for (const r of big) assert.ok(r.relErr !== null && r.relErr < 1e-3, `${r.variant} ${r.case}: ${r.relErr}`);
});

test("one operand in two shared stages (_a2, _b2): every layout, pair forms, epilogue, batches, edges, f32 out", () => {
  const caps = { ...new InterpRuntime().info };
  const plan = (v: string, p: MatmulProblem) => planMatmul(p, caps, { variant: v });
  assert.match(plan("cm_128x256x32_w2x4_v128_s1_kpr_a2", { m: 128, n: 256, k: 128, dtype: "f16" }).steps[0].desc.name, /_s1_lk_kpr_a2_al/);
  assert.match(plan("cm_128x256x32_w2x4_v128_s1_kpr_b2", { m: 128, n: 256, k: 128, dtype: "f16" }).steps[0].desc.name, /_s1_lk_kpr_b2_al/);
  // B's two [k][n] stages fit beside the 16-bit output tile; with f32 output the staging tile moves
  // into B's stage array (_es); with B's [n][k] stages (NT) and on edge tiles the twin runs as its
  // one-stage tile. A's fit beside the f32 staging tile.
  assert.match(plan("cm_128x256x32_w2x4_v128_s1_kpr_b2", { m: 128, n: 256, k: 128, dtype: "f16", outDtype: "f32" }).steps[0].desc.name, /_s1_lk_kpr_b2_es_al_so4$/);
  assert.match(plan("cm_128x256x32_w2x4_v128_s1_kpr_b2", { m: 128, n: 256, k: 128, dtype: "f16", transB: true }).steps[0].desc.name, /_NT_v88_s1_lk_kpr_al_so8$/);
  assert.match(plan("cm_128x256x32_w2x4_v128_s1_kpr_b2", { m: 384, n: 384, k: 384, dtype: "f16" }).steps[0].desc.name, /_NN_v88_s1_lk_so8$/);
  assert.equal(unsupported(variantByName("cm_128x256x32_w2x4_v128_s1_kpr_b2"), normalize({ m: 384, n: 384, k: 384, dtype: "f16" }), caps), null);
  assert.match(plan("cm_128x256x32_w2x4_v128_s1_kpr_a2", { m: 128, n: 256, k: 128, dtype: "f16", outDtype: "f32" }).steps[0].desc.name, /_kpr_a2_al_so4$/);
  const cases: CheckCase[] = [
    { name: "NN_128x256x192", problem: { m: 128, n: 256, k: 192 }, full: true },
    { name: "NT_batched_bias_gelu", problem: { m: 128, n: 128, k: 64, batch: 2, transB: true, epilogue: { bias: true, act: "gelu" } }, full: true },
    { name: "TN_residual", problem: { m: 128, n: 256, k: 96, transA: true, epilogue: { residual: true, scale: 0.5 } }, full: true },
    { name: "TT", problem: { m: 128, n: 128, k: 128, transA: true, transB: true }, full: true },
    { name: "edges", problem: { m: 136, n: 264, k: 88 }, full: true },
  ];
  const rows = run(["cm_128x128x32_w2x2_v128_s1_a2", "cm_128x128x32_w2x2_v128_s1_kpa_a2", "cm_128x128x32_w2x2_v128_s1_kpa_b2"], [{ name: "f16", dtype: "f16" }, { name: "f32", dtype: "f32" }], cases);
  for (const r of rows.filter((x) => !x.skipped)) assert.ok(r.relErr !== null && r.relErr < 1e-3, `${r.variant} ${r.mode} ${r.case}: ${r.relErr}`);
  // the kill switch (HELIOS_MATMUL_TWO_STAGE=0): no twin in the race, a forced one is its tile
  assert.equal(readMatmulConfig({ HELIOS_MATMUL_TWO_STAGE: "0" }).twoStage, false);
  assert.equal(readMatmulConfig({}).twoStage, true);
  const sq = normalize({ m: 4096, n: 4096, k: 4096, dtype: "f16" });
  const coopCaps = { ...caps, computeUnits: 132 };
  assert.ok(candidateVariants(sq, coopCaps).some((v) => v.name === "cm_128x256x32_w2x4_v128_s1_kpr_b2"));
  assert.ok(!candidateVariants(sq, coopCaps, { twoStage: false }).some((v) => /_[ab]2(_stk)?$/.test(v.name)));
  for (const v of ["cm_128x256x32_w2x4_v128_s1_kpr_a2", "cm_128x256x32_w2x4_v128_s1_kpr_b2"]) {
    const off = planMatmul({ m: 4096, n: 4096, k: 4096, dtype: "f16" }, coopCaps, { variant: v, twoStage: false });
    assert.equal(off.steps[0].desc.name, planMatmul({ m: 4096, n: 4096, k: 4096, dtype: "f16" }, coopCaps, { variant: "cm_128x256x32_w2x4_v128_s1_kpr" }).steps[0].desc.name);
  }
  const big = run(["cm_128x256x32_w2x4_v128_s1_kpr_a2", "cm_128x256x32_w2x4_v128_s1_kpr_b2"], [{ name: "f16acc16", dtype: "f16", accF16: true }], [cases[0], cases[2]]);
  assert.equal(big.filter((r) => !r.skipped).length, 4);
});

// Half of A in two stages (CoopConfig.halfA2, `_ah2`): the 256×256 f16-accumulation tile keeps its
// first 128 rows of A in two half-tile stages and the rest in one. NN on whole tiles only (B's
// [n][k] stage in NT leaves no room, a transposed A has no row halves, edge tiles no `_es`).
test("half of A in two shared stages (_ah2): whole tiles, epilogue, batches, stream-K, kill switch", () => {
  const caps = { ...new InterpRuntime().info };
  const coopCaps = { ...caps, computeUnits: 132 };
  const name = (v: string, p: MatmulProblem, o = {}) => planMatmul(p, coopCaps, { variant: v, ...o }).steps[0].desc.name;
  const sq = { m: 8192, n: 8192, k: 8192, dtype: "f16", accF16: true } as const;
  assert.match(name("cm_256x256x32_w2x4_v128_s1_kpa_ah2", sq), /_NN_v88_s1_lk_kpa_ah2_es_al_so8$/);
  assert.match(name("cm_256x256x32_w2x4_v128_s1_kpa_ah2_stk", sq), /_kpa_ah2_es_stk_al_so8$/);
  assert.match(name("cm_256x256x32_w2x4_v128_s1_kpa_ah2", { ...sq, transB: true }), /_NT_v88_s1_lk_kpa_al_so8$/);
  assert.match(name("cm_256x256x32_w2x4_v128_s1_kpa_ah2", { ...sq, transA: true }), /_TN_v88_s1_lk_al_so8$/);
  assert.doesNotMatch(name("cm_256x256x32_w2x4_v128_s1_kpa_ah2", { ...sq, m: 8200 }), /_ah2/);
  assert.equal(name("cm_256x256x32_w2x4_v128_s1_kpa_ah2", sq, { twoStage: false }), name("cm_256x256x32_w2x4_v128_s1_kpa", sq));
  const norm = normalize(sq);
  assert.ok(candidateVariants(norm, coopCaps).some((v) => v.name === "cm_256x256x32_w2x4_v128_s1_kpa_ah2"));
  assert.ok(!candidateVariants(norm, coopCaps, { twoStage: false }).some((v) => /_ah2/.test(v.name)));
  const acc16: DtypeMode[] = [{ name: "f16acc16", dtype: "f16", accF16: true }];
  const rows = [
    ...run(["cm_256x256x32_w2x4_v128_s1_kpa_ah2", "cm_256x256x32_w2x4_v128_s1_kpa_ah2_stk"], acc16, [{ name: "NN_256x256x128", problem: { m: 256, n: 256, k: 128 }, full: true }]),
    ...run(["cm_256x256x32_w2x4_v128_s1_kpa_ah2"], acc16, [
      { name: "NN_batched_bias_gelu_f32", problem: { m: 256, n: 256, k: 64, batch: 2, outDtype: "f32", epilogue: { bias: true, act: "gelu" } }, full: true },
    ]),
  ];
  assert.equal(rows.length, 3);
  for (const r of rows) assert.ok(!r.skipped && r.relErr !== null && r.relErr < 1e-3, `${r.variant} ${r.case}: ${r.relErr}`);
  // the checked kernels are the `_ah2` ones (and the stream-K twin runs as stream-K)
  for (const p of [{ m: 256, n: 256, k: 128 }, { m: 256, n: 256, k: 64, batch: 2, outDtype: "f32" as const, epilogue: { bias: true, act: "gelu" as const } }]) {
    const at = { ...p, dtype: "f16" as const, accF16: true };
    assert.match(planMatmul(at, caps, { variant: "cm_256x256x32_w2x4_v128_s1_kpa_ah2" }).steps[0].desc.name, /_kpa_ah2_es_al/);
    assert.match(planMatmul(at, caps, { variant: "cm_256x256x32_w2x4_v128_s1_kpa_ah2_stk" }).steps[0].desc.name, /_kpa_ah2_es_stk_al/);
  }
});
