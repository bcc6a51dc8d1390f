// HeliosBackend.linear (y = (x·Wᵀ + bias) ⊙ gelu'(geluGradOf) + residual, the terms in the matmul
// epilogue) against float64 references on random data: odd sizes and edge tiles (M, N, K not
// multiples of any tile), both weight layouts, f16 outputs with an f32 bias, f32 outputs of f16
// operands with an f32 residual, f32 operands, the GELU gradient of the MLP backward (f16 and f32;
// against geluBackward after the product too); the fallback (operand dtypes the kernels cannot
// take) gives what the product and one elementwise pass give; the epilogue costs no dispatch of its
// own; a transposed x (xT: weight gradients dyᵀ·x written in f32 by the product, on the SIMT
// tiles and split-K here, every kernel family in matmul-streamk's interpreter test). LayerNorm's
// output dtype: its f16 output is its f32 output cast, bit for bit.
import { test } from "node:test";
import assert from "node:assert/strict";
import { makeBackend, onNative, recordingBackend } from "./backend-helpers.js";
import { Rng, randTensor, values, type Sample } from "./harness.js";
import { ref, type RefTensor } from "./ref/tensor.js";
import * as N from "./ref/nn.js";
import { geluGrad } from "./ref/elementwise.js";
import { roundF16 } from "../ts/f16.js";
import type { Dtype, TensorData } from "../ts/types.js";

const B = makeBackend();

// (M, K, N): one element; below one tile; past the 64 and 128 tiles on both sides; K past the
// 16- and 8-deep k-tiles with a ragged last one; whole 64-tiles (the unchecked loads)
const SHAPES: [number, number, number][] = [[1, 1, 1], [17, 33, 65], [37, 19, 50], [130, 70, 129], [64, 48, 64]];

interface Case {
  x: Sample; W: Sample; bias: Sample | null; residual: Sample | null;
  /** geluGradOf: GELU's input, over [-4, 4] (both tails of the derivative). */
  gate: Sample | null;
  inOut: boolean; outDtype: Dtype;
  /** x stored [K, M] (LinearOptions.xT). */
  xT?: boolean;
}

function makeCase(rng: Rng, [M, K, N]: [number, number, number], dt: Dtype, outDtype: Dtype, o: { bias?: Dtype | null; residual?: boolean; gate?: boolean; inOut?: boolean; xT?: boolean }): Case {
  const inOut = o.inOut ?? false;
  return {
    x: randTensor(rng, o.xT ? [K, M] : [M, K], dt),
    W: randTensor(rng, inOut ? [K, N] : [N, K], dt),
    bias: o.bias ? randTensor(rng, [N], o.bias) : null,
    residual: o.residual ? randTensor(rng, [M, N], outDtype) : null,
    gate: o.gate ? randTensor(rng, [M, N], outDtype, -4, 4) : null,
    inOut, outDtype, xT: o.xT,
  };
}

function run(c: Case, be = B): TensorData {
  return be.linear(c.x.td, c.W.td, c.bias?.td ?? null, { inOut: c.inOut, xT: c.xT, outDtype: c.outDtype, residual: c.residual?.td, geluGradOf: c.gate?.td });
}

/**
 * The float64 result and the scale of the f32 error per element: S·|gelu'| + |residual| for S =
 * Σ|x||w| + |bias| (the f32 accumulation's error scale), plus S/4 with a gate (gelu' computed in
 * f32 to a few 1e-7 absolute: 2e-5 of S/4 is 5e-6·S).
 */
function reference(c: Case): { want: RefTensor; bound: Float64Array } {
  const Wt = c.inOut ? c.W.ref : N.transpose(c.W.ref, 0, 1);
  const x = c.xT ? N.transpose(c.x.ref, 0, 1) : c.x.ref;
  const prod = N.matmul(x, Wt);
  const abs = (t: RefTensor) => ref(t.shape, t.data.map(Math.abs));
  const bound = N.matmul(abs(x), abs(Wt)).data;
  const n = prod.shape[1];
  const want = prod.data.map((v, i) => {
    const b = c.bias ? c.bias.ref.data[i % n] : 0;
    const d = c.gate ? geluGrad(c.gate.ref.data[i]) : 1;
    const r = c.residual ? c.residual.ref.data[i] : 0;
    const sc = bound[i] + Math.abs(b);
    bound[i] = sc * Math.abs(d) + Math.abs(r) + (c.gate ? sc / 4 : 0);
    return (v + b) * d + r;
  });
  return { want: ref(prod.shape, want), bound };
}

/**
 * Within 2e-5 of the bound (f32 accumulation in any order: the SIMT kernels, and the tensor-core
 * kernels' f32 accumulators) plus, for an f16 output, half an f16 ulp of the result (one rounding,
 * at the store: the f32 sum never passes through f16 before the bias is added) — a whole ulp with
 * the GELU gate, which whole blocks apply to the f16-rounded product at the lane stores (two
 * roundings, as the unfused product and geluBackward).
 */
function assertLinear(got: TensorData, c: Case, what: string): void {
  const { want, bound } = reference(c);
  assert.deepEqual([...got.shape], want.shape, `${what}: shape`);
  assert.equal(got.dtype, c.outDtype, `${what}: dtype`);
  const g = values(got);
  const f16 = c.outDtype === "f16";
  for (let i = 0; i < g.length; i++) {
    const err = Math.abs(g[i] - want.data[i]);
    const tol = 1e-6 + 2e-5 * bound[i] + (f16 ? Math.abs(want.data[i]) * (c.gate ? 2 ** -10 : 2 ** -11) : 0);
    if (!(err <= tol)) assert.fail(`${what}: element ${i} is ${g[i]}, expected ${want.data[i]} (bound ${bound[i]}, tol ${tol})`);
  }
}

function tag(c: Case, s: [number, number, number]): string {
  return `${s.join("x")} ${c.x.td.dtype}->${c.outDtype}${c.xT ? " xT" : ""}${c.inOut ? " [in,out]" : ""}${c.bias ? ` bias ${c.bias.td.dtype}` : ""}${c.gate ? " geluGradOf" : ""}${c.residual ? " residual" : ""}`;
}

test("f16 operands, f16 output with an f32 bias (the trainer's qkv and fc), both weight layouts", () => {
  const rng = new Rng(2701);
  for (const s of SHAPES) for (const inOut of [false, true]) {
    const c = makeCase(rng, s, "f16", "f16", { bias: "f32", inOut });
    assertLinear(run(c), c, tag(c, s));
  }
});

test("f16 operands, f32 output with an f32 bias and residual (the trainer's projections)", () => {
  const rng = new Rng(2702);
  for (const s of SHAPES) for (const inOut of [false, true]) {
    const c = makeCase(rng, s, "f16", "f32", { bias: "f32", residual: true, inOut });
    assertLinear(run(c), c, tag(c, s));
  }
});

test("other combinations: no bias, an f16 bias, an f16 residual, f32 operands", () => {
  const rng = new Rng(2703);
  const s: [number, number, number] = [37, 19, 50];
  const cases = [
    makeCase(rng, s, "f16", "f16", { inOut: true }),
    makeCase(rng, s, "f16", "f16", { bias: "f16", residual: true }),
    makeCase(rng, s, "f16", "f32", { bias: "f16" }),
    makeCase(rng, s, "f16", "f32", { residual: true, inOut: true }),
    makeCase(rng, s, "f32", "f32", { bias: "f32", residual: true }),
    makeCase(rng, [130, 70, 129], "f32", "f32", { bias: "f32", inOut: true }),
  ];
  for (const c of cases) assertLinear(run(c), c, tag(c, s));
});

test("geluGradOf: df = (dy·W) ⊙ gelu'(f) of the MLP backward, f16 (matmul16: f16 f and df) and f32, both layouts", () => {
  const rng = new Rng(2707);
  for (const s of SHAPES) for (const inOut of [false, true]) {
    for (const dt of ["f16", "f32"] as Dtype[]) {
      const c = makeCase(rng, s, dt, dt, { gate: true, inOut });
      assertLinear(run(c), c, tag(c, s));
    }
  }
});

test("geluGradOf with the other terms: (x·Wᵀ + bias) ⊙ gelu'(f) + residual, f16 -> f32 and f32", () => {
  const rng = new Rng(2708);
  for (const s of [[37, 19, 50], [130, 70, 129]] as [number, number, number][]) {
    for (const c of [
      makeCase(rng, s, "f16", "f32", { bias: "f32", gate: true, residual: true }),
      makeCase(rng, s, "f16", "f16", { bias: "f32", gate: true, inOut: true }),
      makeCase(rng, s, "f32", "f32", { bias: "f32", gate: true, residual: true, inOut: true }),
    ]) assertLinear(run(c), c, tag(c, s));
  }
});

test("geluGradOf gives geluBackward of the product to rounding, in one dispatch instead of two", () => {
  const rng = new Rng(2709);
  for (const dt of ["f32", "f16"] as Dtype[]) {
    const c = makeCase(rng, [130, 70, 129], dt, dt, { gate: true, inOut: true });
    const [dy, W, f] = [c.x, c.W, c.gate!].map((t) => B.fromArray(values(t.td), t.td.shape, t.td.dtype));
    B.syncGpu();
    const d0 = B.stats().dispatches;
    const fused = B.linear(dy, W, null, { inOut: true, outDtype: dt, geluGradOf: f });
    B.evaluate(fused);
    const d1 = B.stats().dispatches;
    const sep = B.castDtype(B.geluBackward(f, B.matmul(dy, W)), dt);
    B.evaluate(sep);
    // the elementwise pass is the one dispatch more (the product itself may be several on a GPU:
    // split-K or stream-K)
    assert.equal(B.stats().dispatches - d1 - (d1 - d0), 1, `${dt}: dispatches separate minus fused`);
    const a = values(fused), b = values(sep);
    let worst = 0, scale = 0;
    for (let i = 0; i < a.length; i++) {
      worst = Math.max(worst, Math.abs(a[i] - b[i]));
      scale = Math.max(scale, Math.abs(b[i]));
    }
    // f32: one product, the same f32 arithmetic; f16: the separate path rounds dy·W to f16 first
    // (as whole tensor-core blocks do at their lane stores; the other paths gate before rounding)
    assert.ok(worst <= scale * (dt === "f32" ? 1e-6 : 2 ** -9), `${dt}: max |fused - separate| ${worst} (max |df| ${scale})`);
  }
});

test("the epilogue adds no dispatch: bias and residual ride in the product's kernel", () => {
  const rng = new Rng(2704);
  const c = makeCase(rng, [37, 19, 50], "f16", "f32", { bias: "f32", residual: true });
  // device tensors, uploaded before counting
  const [x, W, bias, res] = [c.x, c.W, c.bias!, c.residual!].map((t) => B.fromArray(values(t.td), t.td.shape, t.td.dtype));
  B.syncGpu();
  const d0 = B.stats().dispatches;
  const y = B.linear(x, W, bias, { outDtype: "f32", residual: res });
  B.evaluate(y);
  assert.equal(B.stats().dispatches - d0, 1, "one product kernel");
  assertLinear(y, c, "dispatch case");
});

test("operands the kernels cannot take together fall back to the product and one elementwise pass, same values", () => {
  const rng = new Rng(2705);
  const s: [number, number, number] = [17, 33, 65];
  // f32 x with f16 W (mixed: the backend's own SIMT product), f16 and f32 outputs
  for (const outDtype of ["f32", "f16"] as Dtype[]) {
    const x = randTensor(rng, [17, 33], "f32"), W = randTensor(rng, [65, 33], "f16");
    const bias = randTensor(rng, [65], "f32"), residual = outDtype === "f32" ? randTensor(rng, [17, 65], "f32") : null;
    const y = B.linear(x.td, W.td, bias.td, { outDtype, residual: residual?.td });
    // what the product and an elementwise sum in f32 give, cast once
    const prod = B.matmulTransposed(x.td, W.td);
    const sum = B.add(B.add(prod, bias.td), residual ? residual.td : B.zeros([17, 65]));
    const want = outDtype === "f16" ? B.castDtype(sum, "f16") : sum;
    assert.deepEqual(Array.from(values(y)), Array.from(values(want)), `fallback ${outDtype}: the product then the elementwise pass`);
    const c: Case = { x, W, bias, residual, gate: null, inOut: false, outDtype };
    // mixed f32·f16 products accumulate in f32 and write f32: the same bound as the epilogue path
    assertLinear(y, c, `fallback ${tag(c, s)}`);
  }
});

test("geluGradOf on operands the kernels cannot take: the product, then geluBackward's elementwise pass, same values", () => {
  const rng = new Rng(2710);
  for (const outDtype of ["f32", "f16"] as Dtype[]) {
    const x = randTensor(rng, [17, 33], "f32"), W = randTensor(rng, [65, 33], "f16");
    const bias = randTensor(rng, [65], "f32"), gate = randTensor(rng, [17, 65], outDtype, -4, 4);
    const residual = outDtype === "f32" ? randTensor(rng, [17, 65], "f32") : null;
    const y = B.linear(x.td, W.td, bias.td, { outDtype, residual: residual?.td, geluGradOf: gate.td });
    const df = B.geluBackward(gate.td, B.add(B.matmulTransposed(x.td, W.td), bias.td));
    const sum = residual ? B.add(df, residual.td) : df;
    const want = outDtype === "f16" ? B.castDtype(sum, "f16") : sum;
    assert.deepEqual(Array.from(values(y)), Array.from(values(want)), `fallback ${outDtype}`);
    const c: Case = { x, W, bias, residual, gate, inOut: false, outDtype };
    assertLinear(y, c, `fallback ${tag(c, [17, 33, 65])}`);
  }
});

// xT's (M, K, N): M and N the weight's sides, K the tokens. One element; odd sizes; K long beside
// a small output, which the planner splits over K (the split-K partials and their reduce); whole
// 64-tiles with a split K.
const XT_SHAPES: [number, number, number][] = [[1, 1, 1], [17, 65, 33], [70, 300, 45], [37, 1500, 50], [64, 2048, 64]];

test("xT: dW = dyᵀ·x written in f32 by the product (f16 and f32 operands, both W layouts) and f16 out", () => {
  const rng = new Rng(2711);
  for (const s of XT_SHAPES) for (const inOut of [true, false]) for (const dt of ["f16", "f32"] as Dtype[]) {
    const c = makeCase(rng, s, dt, "f32", { xT: true, inOut });
    assertLinear(run(c), c, tag(c, s));
  }
  for (const s of XT_SHAPES) {
    const c = makeCase(rng, s, "f16", "f16", { xT: true, inOut: true });
    assertLinear(run(c), c, tag(c, s));
  }
});

test("xT in f32 is matmulTransposedA's f16 product before its rounding, without the cast pass", () => {
  const rng = new Rng(2712);
  for (const s of XT_SHAPES) {
    const c = makeCase(rng, s, "f16", "f32", { xT: true, inOut: true });
    const [dy, x] = [c.x, c.W].map((t) => B.fromArray(values(t.td), t.td.shape, t.td.dtype));
    B.syncGpu();
    const d0 = B.stats().dispatches;
    const dW = B.linear(dy, x, null, { xT: true, inOut: true, outDtype: "f32" });
    B.evaluate(dW);
    const d1 = B.stats().dispatches;
    const sep = B.castDtype(B.matmulTransposedA(dy, x), "f32");
    B.evaluate(sep);
    assert.equal(B.stats().dispatches - d1 - (d1 - d0), 1, `${tag(c, s)}: the cast is the one dispatch more`);
    const { want, bound } = reference(c);
    const a = values(dW), b = values(sep);
    let errA = 0, errB = 0;
    for (let i = 0; i < a.length; i++) {
      // the f16 product is this sum rounded once (both accumulate in f32, perhaps in another order)
      const tol = 1e-6 + 2e-5 * bound[i] + Math.abs(a[i]) * 2 ** -11;
      if (!(Math.abs(a[i] - b[i]) <= tol)) assert.fail(`${tag(c, s)}: element ${i}: f32 ${a[i]}, f16 ${b[i]} (tol ${tol})`);
      errA += (a[i] - want.data[i]) ** 2;
      errB += (b[i] - want.data[i]) ** 2;
    }
    // without the f16 rounding the result is nearer fp64 (a one-element f16-exact sum ties)
    assert.ok(errA <= errB, `${tag(c, s)}: f32 error ${errA} > f16 error ${errB}`);
  }
});

test("xT with the epilogue: bias, residual and geluGradOf at [M, N], f16 -> f32, f16 -> f16 and f32", () => {
  const rng = new Rng(2713);
  for (const s of [[17, 65, 33], [70, 300, 45], [37, 1500, 50]] as [number, number, number][]) {
    for (const c of [
      makeCase(rng, s, "f16", "f32", { xT: true, inOut: true, bias: "f32", residual: true }),
      makeCase(rng, s, "f16", "f32", { xT: true, bias: "f32", gate: true, residual: true }),
      makeCase(rng, s, "f16", "f16", { xT: true, inOut: true, bias: "f32", gate: true }),
      makeCase(rng, s, "f32", "f32", { xT: true, inOut: true, bias: "f32", gate: true, residual: true }),
    ]) assertLinear(run(c), c, tag(c, s));
  }
});

test("xT on every SIMT tile and split-K (HELIOS_MATMUL_VARIANT), f16 -> f32 with bias and residual", () => {
  const rng = new Rng(2714);
  const saved = process.env.HELIOS_MATMUL_VARIANT;
  try {
    for (const v of ["simt_64x64_4x4", "simt_128x128_8x8_sm", "simt_128x128_8x16_t128_sm", "simt_64x64_4x4_sk4"]) {
      process.env.HELIOS_MATMUL_VARIANT = v;
      // a backend of its own: plans are memoized per engine
      const { B: be, names } = recordingBackend();
      // edge tiles, and whole 128-tiles (the unchecked loads)
      for (const s of [[17, 65, 33], [128, 256, 128]] as [number, number, number][]) {
        const c = makeCase(rng, s, "f16", "f32", { xT: true, inOut: true, bias: "f32", residual: true });
        assertLinear(run(c, be), c, `${v} ${tag(c, s)}`);
      }
      // the forced variant ran (the mock runtime has no tuner, so no forcing)
      if (!onNative()) continue;
      const mm = [...names].filter((n) => n.startsWith("mm_"));
      assert.ok(mm.some((n) => /^mm_simt_f16_f32_.*_TN_/.test(n)), `${v}: ${mm.join(", ")}`);
      assert.equal(mm.includes("mm_splitk_reduce_f32_bias_res"), v.endsWith("_sk4"), `${v}: ${mm.join(", ")}`);
    }
  } finally {
    if (saved === undefined) delete process.env.HELIOS_MATMUL_VARIANT;
    else process.env.HELIOS_MATMUL_VARIANT = saved;
  }
});

test("xT on operands the kernels cannot take together: matmulTransposedA and the elementwise pass, same values", () => {
  const rng = new Rng(2715);
  // f32 dy with f16 x (mixed: the backend's own SIMT product)
  for (const outDtype of ["f32", "f16"] as Dtype[]) {
    const x = randTensor(rng, [65, 17], "f32"), W = randTensor(rng, [65, 33], "f16");
    const bias = randTensor(rng, [33], "f32"), gate = randTensor(rng, [17, 33], outDtype, -4, 4);
    const y = B.linear(x.td, W.td, bias.td, { xT: true, inOut: true, outDtype, geluGradOf: gate.td });
    const df = B.geluBackward(gate.td, B.add(B.matmulTransposedA(x.td, W.td), bias.td));
    const want = outDtype === "f16" ? B.castDtype(df, "f16") : df;
    assert.deepEqual(Array.from(values(y)), Array.from(values(want)), `fallback xT ${outDtype}`);
    const c: Case = { x, W, bias, residual: null, gate, inOut: true, xT: true, outDtype };
    assertLinear(y, c, `fallback ${tag(c, [17, 65, 33])}`);
  }
});

test("argument checks", () => {
  const x = B.zeros([3, 4], "f16"), W = B.zeros([5, 4], "f16");
  const shapeError = (re: RegExp) => (e: Error & { code?: string }) => e.code === "ERR_HELIOS_SHAPE" && re.test(e.message);
  assert.throws(() => B.linear(x, W, null, { geluGradOf: B.zeros([3, 5], "f32") }), shapeError(/^linear: geluGradOf dtype f32 must be the output dtype f16$/));
  assert.throws(() => B.linear(x, W, null, { geluGradOf: B.zeros([5, 3], "f16") }), shapeError(/^linear: geluGradOf \[5, ?3\] must be \[3, 5\]$/));
  assert.throws(() => B.linear(x, B.zeros([5, 3], "f16"), null), /disagree on K/);
  assert.throws(() => B.linear(x, W, B.zeros([4])), /bias \[4\] must be \[5\]/);
  assert.throws(() => B.linear(x, W, null, { residual: B.zeros([3, 5], "f16"), outDtype: "f32" }), /residual dtype f16 must be the output dtype f32/);
  assert.throws(() => B.linear(x, W, null, { residual: B.zeros([5, 3], "f16") }), /residual \[5, ?3\] must be \[3, 5\]/);
  assert.throws(() => B.linear(B.zeros([2, 3, 4], "f16"), W, null), /x must be \[M, K\]/);
  assert.equal(B.linear(B.zeros([0, 4], "f16"), W, null).shape.join(), "0,5");
  // xT: x [K, M], so M and K are its second and first sides
  const xt = B.zeros([4, 3], "f16");
  assert.equal(B.linear(xt, W, null, { xT: true }).shape.join(), "3,5");
  assert.equal(B.linear(xt, B.zeros([4, 5], "f16"), null, { xT: true, inOut: true, outDtype: "f32" }).shape.join(), "3,5");
  assert.throws(() => B.linear(x, W, null, { xT: true }), shapeError(/^linear: x \[3, ?4\] \(\[K, M\], xT\) and W \[5, ?4\] \(\[out, in\]\) disagree on K$/));
  assert.throws(() => B.linear(xt, B.zeros([3, 5], "f16"), null, { xT: true, inOut: true }), shapeError(/^linear: x \[4, ?3\] \(\[K, M\], xT\) and W \[3, ?5\] \(\[in, out\]\) disagree on K$/));
  assert.throws(() => B.linear(xt, W, null, { xT: true, residual: B.zeros([4, 5], "f16") }), shapeError(/^linear: residual \[4, ?5\] must be \[3, 5\]$/));
  assert.throws(() => B.linear(xt, W, null, { xT: true, geluGradOf: B.zeros([5, 3], "f16") }), shapeError(/^linear: geluGradOf \[5, ?3\] must be \[3, 5\]$/));
  assert.throws(() => B.linear(B.zeros([4], "f16"), W, null, { xT: true }), shapeError(/^linear: x must be \[K, M\] \(xT\), got \[4\]$/));
  assert.equal(B.linear(B.zeros([4, 0], "f16"), W, null, { xT: true }).shape.join(), "0,5");
  // K = 0: the empty sum
  assert.deepEqual(Array.from(values(B.linear(B.zeros([0, 2], "f16"), B.zeros([0, 3], "f16"), null, { xT: true, inOut: true, outDtype: "f32" }))), [0, 0, 0, 0, 0, 0]);
});

test("layerNorm writing f16 gives its f32 output cast to f16, bit for bit (every forward kernel)", () => {
  const rng = new Rng(2706);
  // dim % 4 == 0 (rows4), odd dims in one register pass (cached) and past it (three passes)
  for (const dim of [64, 768, 33, 4099]) {
    const x = randTensor(rng, [5, dim], "f32"), w = randTensor(rng, [dim], "f32"), b = randTensor(rng, [dim], "f32");
    const y16 = B.layerNorm(x.td, w.td, b.td, 1e-5, { outDtype: "f16" });
    assert.equal(y16.dtype, "f16");
    const y32 = B.layerNorm(x.td, w.td, b.td, 1e-5);
    assert.deepEqual(Array.from(y16.data as Uint16Array), Array.from(B.castDtype(y32, "f16").data as Uint16Array), `dim ${dim}`);
    const want = N.layerNorm(x.ref, w.ref, b.ref, 1e-5).data.map(roundF16);
    const got = values(y16);
    for (let i = 0; i < got.length; i++) assert.ok(Math.abs(got[i] - want[i]) <= 2e-3 * (1 + Math.abs(want[i])), `dim ${dim} element ${i}: ${got[i]} vs ${want[i]}`);
  }
});
