// The GELU-gradient epilogue (Epilogue.geluGrad: y ⊙ gelu'(preact), HeliosBackend.linear's
// geluGradOf) in every matmul kernel family with an epilogue, run by the IR interpreter against the
// fp64 reference (reference.ts geluGradRef, the tanh form) on random data: SIMT (f32 exact, f16;
// edge and whole tiles, split-K reduce), tensor-core tiles (edge blocks staged, whole blocks on the
// accumulator fragment with f16 and f32 16-byte stores or a coopmat store, f16 accumulation, bf16
// output, 128-bit and pair staging, split-K reduce), stream-K fixups, f32 on bf16 tensor cores
// (in-kernel split, presplit three- and two-block operands); whole blocks with 16-byte stores get the
// gate at those stores (preact read ahead with 16-byte loads). Held well under the gates: f32 paths
// 1e-5 (the epilogue's exp-form tanh agrees with tanh to f32 rounding), f16 output 1e-3 (one or two
// roundings). A control shows the check sees a missing gate. Plus names, bindings and classes.
import assert from "node:assert/strict";
import { test } from "node:test";
import { checkVariants, type CheckCase, type DtypeMode } from "../bench/matmul-check.js";
import { MatmulFixture } from "../ts/kernels/matmul/fixture.js";
import { planMatmul } from "../ts/kernels/matmul/plan.js";
import { normalize, type MatmulProblem } from "../ts/kernels/matmul/problem.js";
import { geluGradRef } from "../ts/kernels/matmul/reference.js";
import { runPlan } from "../ts/kernels/matmul/run.js";
import { shapeClass } from "../ts/kernels/matmul/autotune.js";
import { variantByName } from "../ts/kernels/matmul/variants.js";
import { InterpRuntime } from "./support/interp-runtime.js";
// the stream-K twin of the 64×64 tile, which the interpreter can afford
import "../lab/matmul-variants.js";

const F16: DtypeMode = { name: "f16", dtype: "f16" };
const F32: DtypeMode = { name: "f32", dtype: "f32" };

const g = { geluGrad: true } as const;

/** Runs variants × modes × cases; every row must run, pass, and stay under `bound(row)`. */
function run(variants: string[], modes: DtypeMode[], cases: CheckCase[], bound: (mode: string, c: string) => number, caps: object = {}) {
  const rt = new InterpRuntime();
  const rows = checkVariants(rt, { ...rt.info, ...caps }, { variants: variants.map(variantByName), modes, cases });
  assert.equal(rows.length, variants.length * modes.length * cases.length);
  const bad = rows.filter((r) => !r.pass || r.skipped || r.relErr === null || !(r.relErr < bound(r.mode, r.case)));
  assert.deepEqual(bad.map((r) => `${r.variant}/${r.mode}/${r.case}: ${r.error ?? r.skipped ?? r.relErr}`), []);
  return rows;
}

/** f32 results (f32 inputs on the exact paths, or f32 output) 1e-5; f16 output 1e-3; f16 accumulation 5e-3. */
const tight = (mode: string, c: string) => (mode === "f16acc16" ? 5e-3 : mode === "f32" || c.includes("f32out") ? 1e-5 : 1e-3);

test("the fp64 reference is GELU's derivative (central differences of the tanh-form GELU)", () => {
  const gelu = (x: number) => 0.5 * x * (1 + Math.tanh(0.7978845608028654 * (x + 0.044715 * x ** 3)));
  for (const x of [-5, -2.5, -0.75, -0.1, 0, 0.3, 1, 2, 6]) {
    const h = 1e-5;
    const fd = (gelu(x + h) - gelu(x - h)) / (2 * h);
    assert.ok(Math.abs(geluGradRef(x) - fd) < 1e-8, `x = ${x}: ${geluGradRef(x)} vs ${fd}`);
  }
});

test("SIMT: f32 (exact) and f16, edge tiles, whole tiles (_al), batches, transposes, every other term, split-K", () => {
  const cases: CheckCase[] = [
    { name: "edge_37x50x19", problem: { m: 37, n: 50, k: 19, epilogue: g }, full: true },
    { name: "al_64x128x32", problem: { m: 64, n: 128, k: 32, epilogue: g }, full: true },
    { name: "TN_batched_20x36x24", problem: { m: 20, n: 36, k: 24, batch: 2, transA: true, epilogue: g }, full: true },
    { name: "NT_all_terms_33x31x29", problem: { m: 33, n: 31, k: 29, transB: true, epilogue: { scale: 0.5, bias: true, act: "relu", geluGrad: true, residual: true } }, full: true },
  ];
  run(["simt_64x64_4x4"], [F32, F16], cases, tight);
  run(["simt_128x128_8x8_sm"], [F32, F16], [{ name: "al_128x128x16", problem: { m: 128, n: 128, k: 16, epilogue: g }, full: true }, cases[0]], tight);
  run(["simt_64x64_4x4_sk4"], [F32], [{ name: "splitk_9x13x130", problem: { m: 9, n: 13, k: 130, epilogue: g }, full: true }], tight);
});

test("tensor-core tiles: edge blocks, whole blocks on the fragment (f16 16-byte, f32 16-byte, coopmat stores), f16 accumulation, bf16, split-K", () => {
  const cases: CheckCase[] = [
    // whole blocks in an edge tile; N % 8 == 0: halfOut (f16), wideOut32 (f32)
    { name: "edge_70x80x40", problem: { m: 70, n: 80, k: 40, epilogue: g }, full: true },
    { name: "whole_64x64x32", problem: { m: 64, n: 64, k: 32, batch: 2, epilogue: g }, full: true },
    // N % 8 == 4: whole f16 blocks leave by a coopmat store
    { name: "edge_coopstore_40x84x24", problem: { m: 40, n: 84, k: 24, epilogue: g }, full: true },
    { name: "f32out_whole_64x64x32", problem: { m: 64, n: 64, k: 32, outDtype: "f32", epilogue: g }, full: true },
    { name: "f32out_edge_all_terms_50x36x40", problem: { m: 50, n: 36, k: 40, transB: true, outDtype: "f32", epilogue: { scale: 0.5, bias: true, act: "gelu", geluGrad: true, residual: true } }, full: true },
  ];
  run(["cm_64x64x32_w2x2"], [F16, { name: "f16acc16", dtype: "f16", accF16: true }], cases, tight);
  // bf16 output has no accumulator of its type: every block staged; bf16 rounding (2^-9) under 1e-2
  run(["cm_64x64x32_w2x2"], [{ name: "bf16", dtype: "bf16" }], cases.slice(0, 2), () => 1e-2);
  run(["cm_64x64x32_w2x2_sk4"], [F16], [{ name: "splitk_20x33x200", problem: { m: 20, n: 33, k: 200, epilogue: g }, full: true }], tight);
  // 128-bit staging with pair loads on whole tiles (the trainer's NN product on the shipped tiles)
  run(["cm_128x128x32_w2x2_v128_s1_kpa"], [F16], [{ name: "kpa_whole_128x128x64", problem: { m: 128, n: 128, k: 64, epilogue: g }, full: true }], tight);
});

test("whole blocks gated at their 16-byte lane stores: more blocks than the read-ahead, the residual after the gate, odd edge tiles, f16 and f32 out", () => {
  const all = { scale: 0.5, bias: true, act: "gelu", geluGrad: true, residual: true } as const;
  // 16 blocks per subgroup: past the 8 (f16) and 4 (f32) blocks of preact read ahead
  const whole: CheckCase[] = [
    { name: "whole_128x256x64_b2", problem: { m: 128, n: 256, k: 64, batch: 2, epilogue: g }, full: true },
    { name: "whole_all_terms_128x128x96", problem: { m: 128, n: 128, k: 96, epilogue: all }, full: true },
    { name: "f32out_whole_256x128x64", problem: { m: 256, n: 128, k: 64, outDtype: "f32", epilogue: g }, full: true },
    { name: "f32out_whole_all_terms_128x128x64", problem: { m: 128, n: 128, k: 64, outDtype: "f32", epilogue: all }, full: true },
  ];
  run(["cm_128x128x32_w2x2_v128_s1_kpa"], [F16], whole, tight);
  // the trainer's tile (GPT-2's dg product takes it on the H200)
  run(["cm_128x256x32_w2x4_v128_s1_kpr_a2"], [F16], whole.slice(0, 1), tight);
  // edge tiles with odd M and K: whole blocks (lane loads in the full-block branch) beside edge blocks (staged)
  run(["cm_64x64x32_w2x2"], [F16], [
    { name: "edge_83x136x45", problem: { m: 83, n: 136, k: 45, epilogue: g }, full: true },
    { name: "edge_all_terms_83x136x45", problem: { m: 83, n: 136, k: 45, transA: true, epilogue: all }, full: true },
    { name: "f32out_edge_77x52x33", problem: { m: 77, n: 52, k: 33, outDtype: "f32", epilogue: g }, full: true },
    { name: "f32out_edge_all_terms_77x52x33", problem: { m: 77, n: 52, k: 33, transB: true, outDtype: "f32", epilogue: all }, full: true },
  ], tight);
});

test("the gate on whole tiles reads preact with 16-byte loads, ahead of the blocks, and never as a coopmat", () => {
  const caps = { ...new InterpRuntime().info, computeUnits: 132 };
  const body = (variant: string, p: MatmulProblem) => {
    const desc = planMatmul(p, caps, { variant }).steps[0].desc;
    const preact = desc.bindings.findIndex((b) => b.name === "preact");
    const nodes: Record<string, unknown>[] = [];
    const walk = (x: unknown): void => {
      if (Array.isArray(x)) x.forEach(walk);
      else if (x && typeof x === "object") {
        const o = x as Record<string, unknown>;
        if (o.b === preact || o.s === "cmstore") nodes.push(o);
        Object.values(o).forEach(walk);
      }
    };
    walk(desc.body);
    return { desc, nodes, preact };
  };
  // GPT-2's dg product: 16384×3072×768, f16 out, whole 128×256 tiles (16 blocks per subgroup)
  const { desc, nodes } = body("cm_128x256x32_w2x4_v128_s1_kpr_a2", { m: 16384, n: 3072, k: 768, dtype: "f16", epilogue: g });
  assert.match(desc.name, /_al_so8_dgelu$/);
  const reads = nodes.filter((n) => n.op === "load" || n.op === "cmload");
  assert.deepEqual(new Set(reads.map((n) => `${n.op} ${n.as} x${n.vec}`)), new Set(["load u32 x4"]));
  assert.equal(reads.length, 16);
  // 8 blocks' preact loads are issued before the first block's store
  const order = nodes.map((n) => (n.op === "load" ? "L" : n.s === "cmstore" ? "S" : "")).join("");
  assert.match(order, /^L{8}S/);
  // f32 out: two f32x4 per lane and block, 4 blocks ahead
  const f32 = body("cm_128x128x32_w2x2_v128_s1_kpa", { m: 256, n: 256, k: 256, dtype: "f16", outDtype: "f32", epilogue: g });
  assert.deepEqual(new Set(f32.nodes.filter((n) => n.op).map((n) => `${n.op} x${n.vec}`)), new Set(["load x4"]));
  assert.match(f32.nodes.map((n) => (n.op === "load" ? "L" : n.s === "cmstore" ? "S" : "")).join(""), /^L{8}S/);
});

test("stream-K fixups and f32 on bf16 tensor cores (in-kernel split, presplit three- and two-block operands)", () => {
  // 3 tiles of 2 units over 5 workgroups: every tile split, the gate applied by the fixup
  const rows = run(["cm_64x64x32_w2x2_stk"], [F16], [
    { name: "stk_192x64x64", problem: { m: 192, n: 64, k: 64, epilogue: g }, full: true },
    { name: "stk_f32out_192x64x64", problem: { m: 192, n: 64, k: 64, outDtype: "f32", epilogue: g }, full: true },
  ], tight, { computeUnits: 5 });
  assert.ok(rows.length === 2);
  const caps = { ...new InterpRuntime().info, computeUnits: 5 };
  assert.match(planMatmul({ m: 192, n: 64, k: 64, dtype: "f16", epilogue: g }, caps, { variant: "cm_64x64x32_w2x2_stk" }).steps[1].desc.name, /^mm_streamk_fixup_.*_dgelu$/);
  run(["cm3_64x64x32_w2x2", "x3_cm_64x64x32_w2x2"], [F32], [
    { name: "edge_37x50x19", problem: { m: 37, n: 50, k: 19, epilogue: g }, full: true },
    // whole tiles: the presplit operands in two K blocks (_k2)
    { name: "whole_64x64x64", problem: { m: 64, n: 64, k: 64, epilogue: g }, full: true },
  ], tight);
  assert.match(planMatmul({ m: 64, n: 64, k: 64, dtype: "f32", epilogue: g }, caps, { variant: "x3_cm_64x64x32_w2x2" }).steps[2].desc.name, /_k2_dgelu$/);
});

test("control: the same data without the gate misses the reference by far (the check sees a dropped gate)", () => {
  const rt = new InterpRuntime();
  const problem: MatmulProblem = { m: 37, n: 50, k: 19, dtype: "f32", epilogue: g };
  for (const variant of ["simt_64x64_4x4", "cm3_64x64x32_w2x2"]) {
    const gated = planMatmul(problem, rt.info, { variant });
    const fx = new MatmulFixture(rt, gated.problem, 17);
    runPlan(rt, gated, fx.buffers(gated));
    assert.ok(fx.fullError() < 1e-5, `${variant}: gated`);
    const plain = planMatmul({ ...problem, epilogue: {} }, rt.info, { variant });
    runPlan(rt, plain, fx.buffers(plain));
    assert.ok(fx.fullError() > 0.1, `${variant}: without the gate ${fx.fullError()}`);
    fx.destroy();
  }
});

test("names, bindings and the tuning class carry the GELU gradient", () => {
  const caps = { ...new InterpRuntime().info, computeUnits: 132 };
  const plan = (variant: string, p: MatmulProblem) => planMatmul(p, caps, { variant });
  const main = plan("cm_64x64x32_w2x2", { m: 64, n: 64, k: 64, dtype: "f16", epilogue: { bias: true, residual: true, geluGrad: true } });
  assert.match(main.steps[0].desc.name, /_bias_dgelu_res$/);
  // appended after bias and residual: kernels without the gate keep their bindings
  assert.deepEqual(main.steps[0].bindings, ["A", "B", "C", "bias", "residual", "preact"]);
  const split = plan("simt_64x64_4x4_sk4", { m: 9, n: 13, k: 4096, dtype: "f32", epilogue: g });
  assert.deepEqual(split.steps.map((s) => s.bindings), [["A", "B", "workspace"], ["workspace", "C", "preact"]]);
  assert.match(split.steps[1].desc.name, /^mm_splitk_reduce_f32_dgelu$/);
  const stk = plan("cm_128x256x32_w2x4_v128_s1_stk", { m: 3072, n: 3072, k: 3072, dtype: "f16", epilogue: g });
  assert.deepEqual(stk.steps.map((s) => s.bindings), [["A", "B", "C", "preact", "workspace"], ["workspace", "C", "preact"]]);
  const x3 = plan("x3_cm_64x64x32_w2x2", { m: 64, n: 64, k: 64, dtype: "f32", epilogue: g });
  assert.deepEqual(x3.steps[2].bindings, ["splitA", "splitB", "C", "preact"]);
  // the planner's memo keys on the gate: the plain kernel is another description
  assert.notEqual(plan("cm_64x64x32_w2x2", { m: 64, n: 64, k: 64, dtype: "f16" }).steps[0].desc, plan("cm_64x64x32_w2x2", { m: 64, n: 64, k: 64, dtype: "f16", epilogue: g }).steps[0].desc);
  const cls = (e: MatmulProblem["epilogue"]) => shapeClass(normalize({ m: 16384, n: 3072, k: 768, dtype: "f16", epilogue: e }));
  assert.deepEqual([cls(undefined), cls({ bias: true, biasDtype: "f32" }), cls(g), cls({ ...g, residual: true })], [
    "m28n23k19/single/NN/plain", "m28n23k19/single/NN/epi", "m28n23k19/single/NN/dgelu", "m28n23k19/single/NN/dgelu",
  ]);
});
