// The multi-tensor optimizer path (HELIOS_MULTI_TENSOR_ADAMW): adamwStepMulti against adamwStep /
// adamwStepDevice tensor by tensor, and totalSumOfSquares' grouped reduction against its
// per-tensor one, on many tensors of odd sizes (not multiples of 4, of the workgroup or of a
// group's block) with random data, mixed dtypes, several steps; sizes that divide by 4 mixed with
// ones that do not (the vec4 kernel takes the former: which kernel runs is checked on the mock
// runtime; adamw-multi-vec4.test.ts compares the two kernels bit for bit); the skip flag and the
// finite guard; dispatch counts; argument errors.
import { test } from "node:test";
import assert from "node:assert/strict";
import { makeBackend, onNative } from "./backend-helpers.js";
import { Rng, randTensor, positiveTensor, values } from "./harness.js";
import * as N from "./ref/nn.js";
import type { Dtype, TensorData } from "../ts/types.js";
import type { HeliosBackend } from "../ts/backend.js";
import { ADAMW_BLOCK, ADAMW_MULTI_MAX, SUMSQ_MULTI_MAX } from "../ts/kernels/multi-tensor.js";
import { adamwGroups } from "../ts/ops/optim.js";
import { HeliosBackend as Backend } from "../ts/backend.js";
import { MockRuntime, type Compiled } from "./mock/runtime.js";

const multi = makeBackend({ multiTensorAdamw: true });
const single = makeBackend({ multiTensorAdamw: false });

/** Element counts around every boundary the kernels have: 4, the workgroup, a block, a reduce row (8192). */
const SIZES = [1, 3, 7, 33, 255, 257, 1023, ADAMW_BLOCK + 1, 2 * ADAMW_BLOCK + 5, 3001, 8191, 8193, 20011, 5, 129, 771];

interface HostSet {
  p: Float32Array; m: Float32Array; v: Float32Array; pd: Dtype; gd: Dtype; wd: number; n: number;
}

/** Sizes that divide by 4 (the vec4 kernel's) around its boundaries, mixed with sizes that do not. */
const SIZES4 = [4, 12, 7, 1028, ADAMW_BLOCK, 2 * ADAMW_BLOCK + 4, 3, 3 * ADAMW_BLOCK + 4, 1001, 16, 4100];

/** Parameters and state for `count` tensors; some f16 parameters and some f16 gradients. */
function hostSets(rng: Rng, count: number, sizes = SIZES): HostSet[] {
  return Array.from({ length: count }, (_, j) => {
    const n = sizes[j % sizes.length] + (j >= sizes.length ? 4 * j : 0);
    const pd: Dtype = j % 5 === 3 ? "f16" : "f32";
    const gd: Dtype = j % 7 === 4 ? "f16" : "f32";
    const p = Float32Array.from(values(randTensor(rng, [n], pd).td));
    return {
      p, m: Float32Array.from(randTensor(rng, [n], "f32", -0.1, 0.1).ref.data),
      v: Float32Array.from(positiveTensor(rng, [n]).ref.data).map((x) => x * 1e-2), pd, gd, wd: j % 3 === 0 ? 0 : 0.1, n,
    };
  });
}

function upload(B: HeliosBackend, h: HostSet[]) {
  return h.map((s) => ({
    params: B.castDtype(B.fromArray(s.p, [s.n], "f32"), s.pd),
    m: B.fromArray(s.m, [s.n], "f32"),
    v: B.fromArray(s.v, [s.n], "f32"),
    weightDecay: s.wd,
  }));
}

/** Equal to f32 rounding: a few ulps of f32 (one of f16 for f16 parameters) apart at most. */
function assertMatches(got: TensorData, exp: TensorData, what: string): { exact: boolean } {
  const a = values(got), b = values(exp);
  assert.equal(a.length, b.length, `${what}: length`);
  const rtol = got.dtype === "f16" ? 2 ** -10 : 4 * 2 ** -23;
  let exact = true;
  for (let i = 0; i < a.length; i++) {
    if (a[i] === b[i]) continue;
    exact = false;
    if (!(Math.abs(a[i] - b[i]) <= rtol * Math.abs(b[i]) + 1e-30)) assert.fail(`${what}[${i}]: ${a[i]}, per-tensor ${b[i]}`);
  }
  return { exact };
}

test("adamwStepMulti (host scalars) matches adamwStep tensor by tensor over several steps, and the float64 reference", (t) => {
  const rng = new Rng(2701);
  const count = 3 * ADAMW_MULTI_MAX + 4;
  const h = hostSets(rng, count);
  const A = upload(multi, h), S = upload(single, h);
  const ref = h.map((s) => ({ p: Float64Array.from(s.p), m: Float64Array.from(s.m), v: Float64Array.from(s.v) }));
  let exact = true;
  for (let step = 1; step <= 3; step++) {
    const lr = 1e-2 * step, bc1 = 1 - 0.9 ** step, bc2 = 1 - 0.95 ** step, gradScale = 0.7;
    const grads = h.map((s) => randTensor(rng, [s.n], s.gd));
    multi.adamwStepMulti(A.map((a, j) => ({ ...a, grads: grads[j].td })), { lr, bc1, bc2, gradScale }, 0.9, 0.95, 1e-8);
    S.forEach((s, j) => single.adamwStep(s.params, grads[j].td, s.m, s.v, lr, 0.9, 0.95, 1e-8, s.weightDecay, bc1, bc2, gradScale));
    ref.forEach((r, j) => N.adamw(r.p, grads[j].ref.data, r.m, r.v, lr, 0.9, 0.95, 1e-8, h[j].wd, bc1, bc2, gradScale));
  }
  A.forEach((a, j) => {
    for (const k of ["params", "m", "v"] as const) exact = assertMatches(a[k], S[j][k], `tensor ${j} (n=${h[j].n}) ${k}`).exact && exact;
    if (h[j].pd === "f16") return; // the reference does not round to f16 each step
    const got = values(a.params);
    for (let i = 0; i < got.length; i++) {
      assert.ok(Math.abs(got[i] - ref[j].p[i]) <= 1e-5 + 1e-4 * Math.abs(ref[j].p[i]), `tensor ${j} params[${i}]: ${got[i]} vs float64 ${ref[j].p[i]}`);
    }
  });
  t.diagnostic(`multi-tensor and per-tensor updates ${exact ? "bit-identical" : "equal to f32 rounding"} over ${count} tensors`);
});

test("adamwStepMulti with a device hyper tensor matches adamwStepDevice; skip != 0 leaves everything untouched", () => {
  const rng = new Rng(2702);
  const h = hostSets(rng, 2 * ADAMW_MULTI_MAX + 3).map((s) => ({ ...s, pd: "f32" as Dtype }));
  const A = upload(multi, h), S = upload(single, h);
  for (let step = 1; step <= 2; step++) {
    const hyper = [3e-3, 1 - 0.9 ** step, 1 - 0.999 ** step, 1.3, 0];
    const grads = h.map((s) => randTensor(rng, [s.n], s.gd).td);
    multi.adamwStepMulti(A.map((a, j) => ({ ...a, grads: grads[j] })), multi.fromArray(hyper, [5]), 0.9, 0.999, 1e-8);
    const hs = single.fromArray(hyper, [5]);
    S.forEach((s, j) => single.adamwStepDevice(s.params, grads[j], s.m, s.v, hs, 0.9, 0.999, 1e-8, s.weightDecay));
  }
  A.forEach((a, j) => {
    for (const k of ["params", "m", "v"] as const) assertMatches(a[k], S[j][k], `tensor ${j} ${k}`);
  });
  const before = A.map((a) => [values(a.params), values(a.m), values(a.v)]);
  const grads = h.map((s) => randTensor(rng, [s.n], s.gd).td);
  multi.adamwStepMulti(A.map((a, j) => ({ ...a, grads: grads[j] })), multi.fromArray([1e-2, 0.5, 0.5, 1, 1], [5]), 0.9, 0.999, 1e-8);
  A.forEach((a, j) => {
    assert.deepEqual([values(a.params), values(a.m), values(a.v)], before[j], `tensor ${j} changed under skip`);
  });
});

test("adamwStepMulti on sizes dividing by 4 and not: host and device scalars, f32 and f16 gradients, against adamwStep(Device) and float64", (t) => {
  const rng = new Rng(2708);
  for (const gd of ["f32", "f16", "mixed"] as const) {
    const h = hostSets(rng, SIZES4.length + 5, SIZES4).map((s, j) => ({ ...s, pd: "f32" as Dtype, gd: (gd === "mixed" ? (j % 2 ? "f16" : "f32") : gd) as Dtype }));
    const A = upload(multi, h), S = upload(single, h);
    const ref = h.map((s) => ({ p: Float64Array.from(s.p), m: Float64Array.from(s.m), v: Float64Array.from(s.v) }));
    let exact = true;
    for (let step = 1; step <= 4; step++) {
      const lr = 1e-2, bc1 = 1 - 0.9 ** step, bc2 = 1 - 0.95 ** step, gradScale = 0.8;
      const grads = h.map((s) => randTensor(rng, [s.n], s.gd));
      const sets = A.map((a, j) => ({ ...a, grads: grads[j].td }));
      if (step % 2) {
        multi.adamwStepMulti(sets, { lr, bc1, bc2, gradScale }, 0.9, 0.95, 1e-8);
        S.forEach((s, j) => single.adamwStep(s.params, grads[j].td, s.m, s.v, lr, 0.9, 0.95, 1e-8, s.weightDecay, bc1, bc2, gradScale));
      } else {
        multi.adamwStepMulti(sets, multi.fromArray([lr, bc1, bc2, gradScale, 0], [5]), 0.9, 0.95, 1e-8);
        const hs = single.fromArray([lr, bc1, bc2, gradScale, 0], [5]);
        S.forEach((s, j) => single.adamwStepDevice(s.params, grads[j].td, s.m, s.v, hs, 0.9, 0.95, 1e-8, s.weightDecay));
        // a skipped step between them changes nothing
        multi.adamwStepMulti(sets, multi.fromArray([lr, bc1, bc2, gradScale, 1], [5]), 0.9, 0.95, 1e-8);
      }
      ref.forEach((r, j) => N.adamw(r.p, grads[j].ref.data, r.m, r.v, lr, 0.9, 0.95, 1e-8, h[j].wd, bc1, bc2, gradScale));
    }
    A.forEach((a, j) => {
      for (const k of ["params", "m", "v"] as const) exact = assertMatches(a[k], S[j][k], `${gd}: tensor ${j} (n=${h[j].n}) ${k}`).exact && exact;
      const got = values(a.params);
      for (let i = 0; i < got.length; i++) {
        assert.ok(Math.abs(got[i] - ref[j].p[i]) <= 1e-5 + 1e-4 * Math.abs(ref[j].p[i]), `${gd}: tensor ${j} params[${i}]: ${got[i]} vs float64 ${ref[j].p[i]}`);
      }
    });
    t.diagnostic(`${gd} gradients: multi-tensor and per-tensor updates ${exact ? "bit-identical" : "equal to f32 rounding"}`);
  }
});

/** The mock runtime, noting the name of every kernel it runs. */
class NamingRuntime extends MockRuntime {
  names: string[] = [];
  protected override run(k: Compiled, buffers: ArrayBuffer[], groups: [number, number, number], push: ArrayBuffer | null): void {
    this.names.push(k.desc.name);
    super.run(k, buffers, groups, push);
  }
}

test("adamwStepMulti runs the vec4 kernel on the tensors whose sizes divide by 4 and the scalar kernel on the rest", () => {
  assert.deepEqual(adamwGroups([4, 5, 8, 12, 1, 16, 20, 24, 28, 32, 36].map((n) => ({ n }))).map((g) => [g.vec4, g.group.map((x) => x.n)]), [
    [true, [4, 8, 12, 16, 20, 24, 28]], [true, [32, 36]], [false, [5, 1]],
  ]);
  const rt = new NamingRuntime();
  const M = new Backend({ runtime: rt, config: { multiTensorAdamw: true }, validation: true });
  const rng = new Rng(2709);
  const h = hostSets(rng, ADAMW_MULTI_MAX + 3, [4, 12, 7, 1028, ADAMW_BLOCK + 4]).map((s) => ({ ...s, pd: "f32" as Dtype }));
  const A = upload(M, h);
  for (const a of A) M.evaluate(a.params);
  const grads = h.map((s) => randTensor(rng, [s.n], s.gd).td);
  for (const hyper of ["push", "device"] as const) {
    rt.names.length = 0;
    const sets = A.map((a, j) => ({ ...a, grads: grads[j] }));
    M.adamwStepMulti(sets, hyper === "push" ? { lr: 1e-3, bc1: 0.1, bc2: 0.05, gradScale: 1 } : M.fromArray([1e-3, 0.1, 0.05, 1, 0], [5]), 0.9, 0.95, 1e-8);
    M.flush();
    const d = hyper === "device" ? "_device" : "";
    // sizes 4, 12, 7, 1028, B + 4 (f16 gradient), 24, 36, 35, 1060, B + 40: 8 divide by 4 (7 + 1)
    assert.deepEqual(rt.names.filter((n) => n.startsWith("adamw_multi")), [
      `adamw_multi7${d}_v4_f32_mixed`, `adamw_multi1${d}_v4_f32_f32`, `adamw_multi2${d}_f32_f32`,
    ]);
  }
});

test("adamwStepMulti inside a capture updates in place on every replay", { skip: !onNative() && "the mock runtime has no captured batches" }, () => {
  const rng = new Rng(2703);
  const h = hostSets(rng, ADAMW_MULTI_MAX + 2).map((s) => ({ ...s, pd: "f32" as Dtype, gd: "f32" as Dtype }));
  const A = upload(multi, h), E = upload(multi, h);
  const grads = h.map((s) => multi.fromArray(randTensor(rng, [s.n]).ref.data, [s.n]));
  const hyper = multi.zeros([5], "f32");
  multi.beginCapture();
  multi.adamwStepMulti(A.map((a, j) => ({ ...a, grads: grads[j] })), hyper, 0.9, 0.95, 1e-8);
  const c = multi.endCapture();
  for (let step = 1; step <= 3; step++) {
    const hv = [1e-2, 1 - 0.9 ** step, 1 - 0.95 ** step, 0.5, 0];
    multi.writeTensor(hyper, hv);
    multi.replay(c);
    multi.adamwStepMulti(E.map((e, j) => ({ ...e, grads: grads[j] })), { lr: hv[0], bc1: hv[1], bc2: hv[2], gradScale: hv[3] }, 0.9, 0.95, 1e-8);
  }
  A.forEach((a, j) => {
    for (const k of ["params", "m", "v"] as const) assertMatches(a[k], E[j][k], `tensor ${j} ${k}`);
  });
  multi.destroyCapture(c);
});

test("totalSumOfSquares: grouped partials equal the per-tensor ones bit for bit; empty tensors are skipped", () => {
  const rng = new Rng(2704);
  const shapes: number[][] = [];
  for (let j = 0; j < 2 * SUMSQ_MULTI_MAX + 11; j++) shapes.push(j % 17 === 5 ? [0, 3] : j % 4 === 1 ? [3, SIZES[j % SIZES.length]] : [SIZES[j % SIZES.length] + j]);
  const samples = shapes.map((s, j) => randTensor(rng, s, j % 6 === 2 ? "f16" : "f32"));
  const a = values(multi.totalSumOfSquares(samples.map((s) => s.td)))[0];
  const b = values(single.totalSumOfSquares(samples.map((s) => s.td)))[0];
  assert.equal(a, b, "grouped and per-tensor sums of squares");
  let exp = 0;
  for (const s of samples) for (const x of s.ref.data) exp += x * x;
  assert.ok(Math.abs(a - exp) <= 1e-5 * exp, `sum of squares ${a}, float64 ${exp}`);
  assert.equal(values(multi.totalSumOfSquares([multi.zeros([0])]))[0], 0);
});

test("a non-finite gradient anywhere makes the grouped sum of squares non-finite and checkFinite flag it", () => {
  const rng = new Rng(2705);
  for (const bad of [NaN, Infinity, -Infinity, 3e38]) {
    const samples = Array.from({ length: SUMSQ_MULTI_MAX + 5 }, (_, j) => randTensor(rng, [SIZES[j % SIZES.length]]));
    (samples[SUMSQ_MULTI_MAX + 2].td.data as Float32Array)[2] = bad;
    for (const B of [multi, single]) {
      const ss = B.totalSumOfSquares(samples.map((s) => s.td));
      assert.ok(!Number.isFinite(values(ss)[0]), `${bad}: sum of squares ${values(ss)[0]}`);
      assert.equal(values(B.checkFinite(ss))[0], 1, `${bad}: checkFinite`);
    }
  }
});

test("dispatches: ceil(n / 7) for AdamW (sizes dividing by 4 and the rest apart) and ceil(n / 29) + the final pass for the norm, against n and n + 1", () => {
  const rng = new Rng(2706);
  const count = 148; // GPT-2's parameter tensors
  const h = hostSets(rng, count).map((s) => {
    const n = Math.min(s.n, 3 + (s.n % 50));
    return { ...s, n, p: s.p.subarray(0, n), m: s.m.subarray(0, n), v: s.v.subarray(0, n) };
  });
  const grads = h.map((s) => randTensor(rng, [s.n], "f32").td);
  const counted = (B: HeliosBackend, f: () => void) => {
    B.flush();
    const d0 = B.stats().dispatches;
    f();
    return B.stats().dispatches - d0;
  };
  const A = upload(multi, h), S = upload(single, h);
  for (const x of A) multi.evaluate(x.params);
  for (const x of S) single.evaluate(x.params);
  const scal = { lr: 1e-3, bc1: 0.1, bc2: 0.05, gradScale: 1 };
  const quads = h.filter((s) => s.n % 4 === 0).length;
  assert.equal(adamwGroups(h).length, Math.ceil(quads / ADAMW_MULTI_MAX) + Math.ceil((count - quads) / ADAMW_MULTI_MAX));
  assert.equal(counted(multi, () => multi.adamwStepMulti(A.map((a, j) => ({ ...a, grads: grads[j] })), scal, 0.9, 0.95, 1e-8)), adamwGroups(h).length);
  assert.equal(counted(single, () => S.forEach((s, j) => single.adamwStep(s.params, grads[j], s.m, s.v, 1e-3, 0.9, 0.95, 1e-8, s.weightDecay, 0.1, 0.05))), count);
  assert.equal(counted(multi, () => multi.evaluate(multi.totalSumOfSquares(grads))), Math.ceil(count / SUMSQ_MULTI_MAX) + 1);
  assert.equal(counted(single, () => single.evaluate(single.totalSumOfSquares(grads))), count + 1);
});

test("adamwStepMulti argument errors name the op and the tensor", () => {
  const B = multi;
  const ok = () => ({ params: B.randn([3]), grads: B.randn([3]), m: B.zeros([3]), v: B.zeros([3]), weightDecay: 0 });
  const scal = { lr: 1e-3, bc1: 1, bc2: 1, gradScale: 1 };
  assert.throws(() => B.adamwStepMulti([ok(), { ...ok(), grads: B.zeros([4]) }], scal, 0.9, 0.9, 1e-8), /adamwStepMulti: tensor 1: grads \[4\] does not match params \[3\]/);
  assert.throws(() => B.adamwStepMulti([{ ...ok(), m: B.zeros([3], "f16") }], scal, 0.9, 0.9, 1e-8), /tensor 0: m and v must be f32/);
  assert.throws(() => B.adamwStepMulti([{ ...ok(), params: { shape: [3], dtype: "f32", data: new Float32Array(3) } }], scal, 0.9, 0.9, 1e-8), /tensor 0: params must be a device tensor/);
  const shared = ok();
  assert.throws(() => B.adamwStepMulti([shared, { ...ok(), m: shared.v }], scal, 0.9, 0.9, 1e-8), /updated twice/);
  assert.throws(() => B.adamwStepMulti([{ ...ok(), v: B.reshape(shared.m, [1, 3]) }, shared], scal, 0.9, 0.9, 1e-8), /share a buffer/);
  assert.throws(() => B.adamwStepMulti([ok()], B.zeros([4]), 0.9, 0.9, 1e-8), /hyper must be f32 \[5\]/);
});
