// Stream-K (ts/kernels/matmul/streamk.ts): the schedule on the host, the plans the planner builds,
// and the kernels in the IR interpreter against the fp64 reference — ranges with one and two
// segments, tiles split over two and three workgroups, more workgroups than units, batches,
// epilogues, pair staging, the two-block presplit operands, and the weight gradients' TN products
// of f16 operands written in f32 (stream-K's fixup and split-K's reduce included).
import assert from "node:assert/strict";
import { test } from "node:test";
import { checkVariants, type CheckCase, type DtypeMode } from "../bench/matmul-check.js";
import { candidateVariants, planMatmul } from "../ts/kernels/matmul/plan.js";
import { readMatmulConfig } from "../ts/kernels/matmul/config.js";
import { normalize, type MatmulProblem } from "../ts/kernels/matmul/problem.js";
import { streamKSchedule, unitRange } from "../ts/kernels/matmul/streamk.js";
import { tuneKey } from "../ts/kernels/matmul/autotune.js";
import { variantByName } from "../ts/kernels/matmul/variants.js";
import { InterpRuntime } from "./support/interp-runtime.js";
// the stream-K twin of the small 64×64 tile, which the interpreter can afford
import "../lab/matmul-variants.js";

test("stream-K schedule: whole waves data-parallel, the rest shared out, every unit in exactly one range", () => {
  assert.equal(streamKSchedule(264, 132), null);
  assert.deepEqual(streamKSchedule(1024, 132), { dp: 924, skTiles: 100, ctas: 132 });
  assert.deepEqual(streamKSchedule(144, 132), { dp: 132, skTiles: 12, ctas: 132 });
  assert.deepEqual(streamKSchedule(7, 132), { dp: 0, skTiles: 7, ctas: 132 });
  for (const [tiles, units, ctas] of [[1024, 128, 132], [144, 96, 132], [11, 6, 3], [7, 2, 5], [3, 1, 5], [13, 1, 4]]) {
    const s = streamKSchedule(tiles, ctas);
    assert.ok(s);
    let next = 0;
    for (let w = 0; w < s.dp + s.ctas; w++) {
      const [a, b] = unitRange(s, units, w);
      assert.equal(a, next, `tiles ${tiles} units ${units} ctas ${ctas}: workgroup ${w} starts at ${a}, expected ${next}`);
      assert.ok(b >= a);
      next = b;
    }
    assert.equal(next, tiles * units);
  }
});

test("stream-K plans: the kernel over D + P workgroups, the fixup, the workspace; plain where it does not apply", () => {
  const caps = { ...new InterpRuntime().info, computeUnits: 132 };
  const plan = (v: string, p: MatmulProblem) => planMatmul(p, caps, { variant: v });
  const big = plan("cm_256x256x32_w2x4_v128_s1_kpa_stk", { m: 8192, n: 8192, k: 8192, dtype: "f16", accF16: true });
  assert.match(big.steps[0].desc.name, /_kpa_stk_al_so8$/);
  assert.match(big.steps[1].desc.name, /^mm_streamk_fixup_acc16_f16_256x256_w2x4_u64$/);
  assert.deepEqual(big.steps[0].groups, [924 + 132, 1, 1]);
  assert.deepEqual(big.steps[1].groups, [100 * 32, 1, 1]);
  assert.deepEqual(big.steps[0].bindings, ["A", "B", "C", "workspace"]);
  assert.deepEqual(big.steps[1].bindings, ["workspace", "C"]);
  assert.equal(big.steps[0].pushValues.kChunk, 924);
  assert.equal(big.steps[0].pushValues.splits, 132);
  assert.equal(big.scratch.workspace, 2 * 132 * 256 * 256 * 2);
  const epi = plan("cm_128x256x32_w2x4_v128_s1_stk", { m: 3072, n: 3072, k: 3072, dtype: "bf16", epilogue: { bias: true, residual: true } });
  assert.deepEqual(epi.steps[0].bindings, ["A", "B", "C", "bias", "residual", "workspace"]);
  assert.deepEqual(epi.steps[1].bindings, ["workspace", "C", "bias", "residual"]);
  // whole waves (132 tiles of 128×256), edge tiles, split-K: the plain tile
  const plainName = (p: MatmulProblem) => plan("cm_128x256x32_w2x4_v128_s1", p).steps.map((s) => s.desc.name);
  for (const p of [{ m: 128 * 66, n: 512, k: 256 }, { m: 3000, n: 3072, k: 3072 }, { m: 3072, n: 3072, k: 3080 }]) {
    assert.deepEqual(plan("cm_128x256x32_w2x4_v128_s1_stk", { ...p, dtype: "f16" }).steps.map((s) => s.desc.name), plainName({ ...p, dtype: "f16" }), JSON.stringify(p));
  }
  // the tuner races a twin only where it runs as stream-K
  const cands = (p: MatmulProblem) => candidateVariants(normalize(p), caps).map((v) => v.name);
  assert.ok(cands({ m: 3072, n: 3072, k: 3072, dtype: "f16" }).includes("cm_128x256x32_w2x4_v128_s1_stk"));
  assert.ok(cands({ m: 8192, n: 8192, k: 8192, dtype: "f16", accF16: true }).includes("cm_256x256x32_w2x4_v128_s1_kpa_stk"));
  assert.ok(!cands({ m: 128 * 66, n: 512, k: 256, dtype: "f16" }).includes("cm_128x256x32_w2x4_v128_s1_stk"));
  assert.ok(!cands({ m: 3072, n: 3072, k: 3072, dtype: "f16" }).includes("cm_64x64x32_w2x2_stk"));
  // the default takes the twin where the last wave is far from full (3072³: 2.18 waves of 128×256)
  assert.equal(planMatmul({ m: 3072, n: 3072, k: 3072, dtype: "f16" }, caps).variant, "cm_128x256x32_w2x4_v128_s1_stk");
  assert.equal(planMatmul({ m: 4096, n: 4096, k: 4096, dtype: "f16" }, caps).variant, "cm_128x256x32_w2x4_v128_s1");
  // the kill switch (HELIOS_MATMUL_STREAMK=0): no twin in the race or the default, a forced one is its tile
  assert.equal(readMatmulConfig({ HELIOS_MATMUL_STREAMK: "0" }).streamK, false);
  assert.equal(readMatmulConfig({}).streamK, true);
  const off = { streamK: false };
  assert.ok(!candidateVariants(normalize({ m: 3072, n: 3072, k: 3072, dtype: "f16" }), caps, off).some((v) => v.name.endsWith("_stk")));
  assert.equal(planMatmul({ m: 3072, n: 3072, k: 3072, dtype: "f16" }, caps, off).variant, "cm_128x256x32_w2x4_v128_s1");
  const forced = planMatmul({ m: 3072, n: 3072, k: 3072, dtype: "f16" }, caps, { variant: "cm_128x256x32_w2x4_v128_s1_stk", streamK: false });
  assert.deepEqual(forced.steps.map((st) => st.desc.name), plainName({ m: 3072, n: 3072, k: 3072, dtype: "f16" }));
});

function run(caps: object, variants: string[], modes: DtypeMode[], cases: CheckCase[]) {
  const rt = new InterpRuntime();
  const rows = checkVariants(rt, { ...rt.info, ...caps }, { variants: variants.map(variantByName), modes, cases });
  // every case runs as stream-K (a twin is not checked where it is its plain tile)
  assert.equal(rows.length, variants.length * modes.length * cases.length);
  const bad = rows.filter((r) => !r.pass || r.skipped);
  assert.deepEqual(bad.map((r) => `${r.variant}/${r.mode}/${r.case}: ${r.error ?? r.skipped ?? r.relErr}`), []);
  return rows;
}

test("stream-K kernels in the interpreter: one and two segments per range, split tiles, empty ranges, batches, epilogues", () => {
  // 704×64×192 in 64×64 tiles: 11 tiles of 6 units over 3 workgroups, so 9 run whole and 2 are
  // shared out; workgroup 1 of the stream-K part holds a tile's end and the next tile's start
  const s = streamKSchedule(11, 3);
  assert.ok(s);
  assert.deepEqual(unitRange(s, 6, s.dp + 1), [58, 62]);
  const rows = run({ computeUnits: 3 }, ["cm_64x64x32_w2x2_stk"], [{ name: "f16", dtype: "f16" }, { name: "f16acc16", dtype: "f16", accF16: true }, { name: "bf16", dtype: "bf16" }], [
    { name: "two_segments_bias_gelu_704x64x192", problem: { m: 704, n: 64, k: 192, epilogue: { bias: true, act: "gelu" } }, full: true },
  ]);
  for (const r of rows.filter((x) => x.mode !== "bf16")) assert.ok(r.relErr !== null && r.relErr < 1e-3, `${r.variant} ${r.mode} ${r.case}: ${r.relErr}`);
  // a tile split over three workgroups (3 tiles of 8 units over 5: 4.8 units each), NT, batches,
  // residual; 3 tiles of one unit over 5 workgroups (two ranges empty)
  const more = run({ computeUnits: 5 }, ["cm_64x64x32_w2x2_stk"], [{ name: "f16", dtype: "f16" }], [
    { name: "NT_scale_res_64x192x256", problem: { m: 64, n: 192, k: 256, transB: true, epilogue: { scale: 0.5, residual: true } }, full: true },
    { name: "batched_TN_128x64x96x3", problem: { m: 128, n: 64, k: 96, batch: 3, transA: true }, full: true },
    { name: "more_workgroups_than_units_192x64x32", problem: { m: 192, n: 64, k: 32 }, full: true },
  ]);
  for (const r of more) assert.ok(r.relErr !== null && r.relErr < 1e-3, `${r.variant} ${r.case}: ${r.relErr}`);
});

test("stream-K with pair staging (units of two k-tiles) and on two-block presplit f32 operands", () => {
  const pair = run({ computeUnits: 5 }, ["cm_128x256x32_w2x4_v128_s1_kpa_stk"], [{ name: "f16acc16", dtype: "f16", accF16: true }], [
    { name: "NN_256x256x192", problem: { m: 256, n: 256, k: 192 }, full: true },
  ]);
  for (const r of pair) assert.ok(r.relErr !== null && r.relErr < 1e-3, `${r.variant} ${r.case}: ${r.relErr}`);
  const caps = { ...new InterpRuntime().info, computeUnits: 5 };
  assert.match(planMatmul({ m: 256, n: 256, k: 192, dtype: "f16" }, caps, { variant: "cm_128x256x32_w2x4_v128_s1_kpa_stk" }).steps[1].desc.name, /_u64$/);
  const x3 = planMatmul({ m: 192, n: 128, k: 64, dtype: "f32" }, caps, { variant: "x3_cm_64x64x32_w2x2_stk" });
  assert.match(x3.steps[2].desc.name, /_stk_al.*_k2/);
  run({ computeUnits: 5 }, ["x3_cm_64x64x32_w2x2_stk"], [{ name: "f32", dtype: "f32" }], [
    { name: "x3_bias_192x128x64", problem: { m: 192, n: 128, k: 64, epilogue: { bias: true } }, full: true },
  ]);
});

test("the epilogue's tiles in B's stage array (_es, with _b2): bf16 and f32 output, an epilogue, stream-K segments", () => {
  const caps = { ...new InterpRuntime().info, computeUnits: 5 };
  const name = (v: string, p: MatmulProblem) => planMatmul(p, caps, { variant: v }).steps[0].desc.name;
  // B's second stage fits beside bf16 or f32 output only with the tiles moved into its stage array
  assert.match(name("cm_128x256x32_w2x4_v128_s1_kpr_b2", { m: 256, n: 256, k: 128, dtype: "bf16" }), /_kpr_b2_es_al_staged8$/);
  assert.match(name("cm_128x256x32_w2x4_v128_s1_kpr_b2", { m: 256, n: 256, k: 128, dtype: "f16", outDtype: "f32" }), /_kpr_b2_es_al_so4$/);
  assert.match(name("cm_128x256x32_w2x4_v128_s1_kpr_b2", { m: 256, n: 256, k: 128, dtype: "f16" }), /_kpr_b2_al_so8$/);
  assert.match(planMatmul({ m: 256, n: 256, k: 128, dtype: "bf16" }, caps, { variant: "cm_128x256x32_w2x4_v128_s1_kpr_b2", twoStage: false }).steps[0].desc.name, /_kpr_al_staged8$/);
  const rt = new InterpRuntime();
  const rows = checkVariants(rt, { ...rt.info, computeUnits: 5 }, {
    variants: ["cm_128x256x32_w2x4_v128_s1_kpr_b2", "cm_128x256x32_w2x4_v128_s1_kpr_b2_stk"].map(variantByName),
    modes: [{ name: "bf16", dtype: "bf16" }, { name: "f16", dtype: "f16" }],
    cases: [
      // 3 tiles of 4 pair units over 5 workgroups: every tile split, the stream-K form with segments
      { name: "NN_128x768x256", problem: { m: 128, n: 768, k: 256 }, full: true },
      { name: "NN_bias_gelu_256x256x128", problem: { m: 256, n: 256, k: 128, epilogue: { bias: true, act: "gelu" } }, full: true },
      { name: "NN_f32_out_256x256x128", problem: { m: 256, n: 256, k: 128, outDtype: "f32" }, full: true },
    ],
  });
  const bad = rows.filter((r) => !r.pass);
  assert.deepEqual(bad.map((r) => `${r.variant}/${r.mode}/${r.case}: ${r.error ?? r.relErr}`), []);
  assert.ok(rows.filter((r) => !r.skipped).length >= 8, JSON.stringify(rows.map((r) => [r.variant, r.mode, r.case, r.skipped])));
});

test("weight gradients (linear's xT): TN products of f16 operands written in f32 by stream-K, split-K and their fixup / reduce", () => {
  const caps = { ...new InterpRuntime().info, computeUnits: 5 };
  const prob = (epilogue: MatmulProblem["epilogue"], accF16 = false): MatmulProblem =>
    ({ m: 192, n: 64, k: 256, transA: true, dtype: "f16", outDtype: "f32", accF16, epilogue });
  const names = (v: string, p: MatmulProblem) => planMatmul(p, caps, { variant: v }).steps.map((s) => s.desc.name);
  assert.deepEqual(names("cm_64x64x32_w2x2_stk", prob({ bias: true, residual: true })),
    ["mm_cm_f16_acc32_f32_64x64x32_w2x2_TN_v44_stk_al_so4_bias_res", "mm_streamk_fixup_acc32_f32_64x64_w2x2_u32_bias_res"]);
  assert.match(names("cm_64x64x32_w2x2_stk", prob(undefined, true))[1], /^mm_streamk_fixup_acc16_f32_64x64_w2x2_u32$/);
  assert.deepEqual(names("cm_64x64x32_w2x2_sk4", prob({ geluGrad: true })).slice(1), ["mm_splitk_reduce_f32_dgelu"]);
  // a shape class of its own for the tuner: the f16 product's winner is not taken for it
  const info = new InterpRuntime().info;
  assert.notEqual(tuneKey(info, normalize(prob(undefined))), tuneKey(info, normalize({ ...prob(undefined), outDtype: "f16" })));
  // 3 tiles of 8 units over 5 workgroups (every tile split); 70×45×300 in four k-ranges of 96
  const epi = { bias: true, residual: true, geluGrad: true };
  const modes: DtypeMode[] = [{ name: "f16", dtype: "f16" }, { name: "f16acc16", dtype: "f16", accF16: true }];
  const tn = (m: number, n: number, k: number): CheckCase =>
    ({ name: `TN_f32out_epi_${m}x${n}x${k}`, problem: { m, n, k, transA: true, outDtype: "f32", epilogue: epi }, full: true });
  const rows = [
    ...run({ computeUnits: 5 }, ["cm_64x64x32_w2x2_stk"], modes, [tn(192, 64, 256)]),
    ...run({ computeUnits: 5 }, ["cm_64x64x32_w2x2_sk4"], modes, [tn(70, 45, 300)]),
  ];
  // f32 accumulation stored in f32: far under one f16 rounding (~1e-4), which the output never passes through
  for (const r of rows) assert.ok(r.relErr !== null && r.relErr < (r.mode === "f16" ? 1e-6 : 1e-3), `${r.variant} ${r.mode} ${r.case}: ${r.relErr}`);
});
