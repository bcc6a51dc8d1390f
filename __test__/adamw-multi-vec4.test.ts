// adamw_multi's vec4 form against its scalar form, kernel to kernel on the device (lavapipe in
// CI): one group of tensors mixing sizes that divide by 4 (4, 12, 1028, ADAMW_BLOCK, 2·ADAMW_BLOCK
// + 4) with sizes that do not (7, 1001) through the scalar kernel, the divisible ones through the
// vec4 kernel, on the same random data; f32 and f16 gradients (one group mixing both), f32
// parameters (and one f16 case), host and device scalars, skip set and not. p, m and v must be
// equal bit for bit, and match a float64 reference. Both modules pass spirv-val.
import { test, type TestContext } from "node:test";
import assert from "node:assert/strict";
import { deviceSkipReason, native, runKernel, spirvVal, spirvValPath } from "./ir-harness.js";
import { Rng } from "./harness.js";
import * as N from "./ref/nn.js";
import { fromF16Array, toF16Array } from "../ts/f16.js";
import { gridRows, packPush } from "../ts/kernels/common.js";
import { ADAMW_BLOCK, adamwMultiKernel, adamwMultiPush, type HyperSource } from "../ts/kernels/multi-tensor.js";
import type { Dtype } from "../ts/types.js";
import type { KernelDesc } from "../ts/ir/index.js";

const skip = deviceSkipReason();
const tool = spirvValPath();

const SIZES = [4, 7, 12, 1028, ADAMW_BLOCK, 1001, 2 * ADAMW_BLOCK + 4];
const B1 = 0.9, B2 = 0.95, EPS = 1e-8;
const STEP = { lr: 3e-2, bc1: 1 - B1 ** 3, bc2: 1 - B2 ** 3, gradScale: 0.7 };

interface Tensor {
  n: number; pd: Dtype; gd: Dtype; wd: number;
  /** The values as stored (f16 ones already rounded). */
  p: Float32Array; g: Float32Array; m: Float32Array; v: Float32Array;
}

function tensors(rng: Rng, gd: (j: number) => Dtype, pd: (j: number) => Dtype): Tensor[] {
  const rand = (n: number, lo: number, hi: number, d: Dtype = "f32") => {
    const x = Float32Array.from({ length: n }, () => rng.uniform(lo, hi));
    return d === "f16" ? fromF16Array(toF16Array(x)) : x;
  };
  return SIZES.map((n, j) => ({
    n, pd: pd(j), gd: gd(j), wd: j % 3 === 1 ? 0 : 0.1,
    p: rand(n, -2, 2, pd(j)), g: rand(n, -2, 2, gd(j)), m: rand(n, -0.1, 0.1), v: rand(n, 1e-3, 3e-2),
  }));
}

const stored = (x: Float32Array, d: Dtype) => (d === "f16" ? toF16Array(x) : x);

function validate(desc: KernelDesc): void {
  if (!tool) return;
  const err = spirvVal(tool.path, desc.name, native.kernelSpirv(desc));
  assert.equal(err, undefined, `${desc.name}: spirv-val: ${err}`);
}

/** Runs adamw_multi (scalar or vec4) over `ts`; returns each tensor's p, m and v buffers after the step. */
function step(ts: Tensor[], hyper: HyperSource, vec4: boolean, skipFlag: number): ArrayBuffer[][] {
  const desc = adamwMultiKernel(ts.map((t) => ({ p: t.pd, g: t.gd })), hyper, vec4);
  validate(desc);
  const blocks = ts.reduce((b, t) => b + Math.ceil(t.n / ADAMW_BLOCK), 0);
  const push: Record<string, number> = { blocks, beta1: B1, beta2: B2, eps: EPS };
  if (hyper === "push") Object.assign(push, STEP);
  ts.forEach((t, j) => Object.assign(push, { [`n${j}`]: t.n, [`wd${j}`]: t.wd }));
  const buffers = ts.flatMap((t) => [stored(t.p, t.pd), stored(t.g, t.gd), t.m.slice(), t.v.slice()]);
  if (hyper === "device") buffers.push(Float32Array.from([STEP.lr, STEP.bc1, STEP.bc2, STEP.gradScale, skipFlag]));
  const words = packPush(adamwMultiPush(ts.length, hyper), push);
  const out = runKernel(desc, { buffers, groups: gridRows(blocks), push: words.buffer as ArrayBuffer });
  return ts.map((_, j) => [out[4 * j], out[4 * j + 2], out[4 * j + 3]]);
}

const asF32 = (b: ArrayBuffer, d: Dtype) => (d === "f16" ? fromF16Array(new Uint16Array(b)) : new Float32Array(b));

function check(t: TestContext, gd: (j: number) => Dtype, pd: (j: number) => Dtype, hyper: HyperSource, skipFlag = 0): void {
  const ts = tensors(new Rng(4107), gd, pd);
  validate(adamwMultiKernel(ts.map((x) => ({ p: x.pd, g: x.gd })), hyper, true));
  if (skip) {
    t.skip(skip);
    return;
  }
  const quads = ts.filter((x) => x.n % 4 === 0);
  const scalar = step(ts, hyper, false, skipFlag);
  const vec = step(quads, hyper, true, skipFlag);
  quads.forEach((x, q) => {
    const j = ts.indexOf(x);
    ["p", "m", "v"].forEach((what, k) => {
      assert.deepEqual(new Uint8Array(vec[q][k]), new Uint8Array(scalar[j][k]), `n=${x.n} (g ${x.gd}) ${what}: vec4 and scalar differ`);
    });
  });
  ts.forEach((x, j) => {
    const [p, m, v] = scalar[j];
    const got = { p: asF32(p, x.pd), m: new Float32Array(m), v: new Float32Array(v) };
    if (skipFlag) {
      assert.deepEqual(got, { p: x.p, m: x.m, v: x.v }, `n=${x.n}: changed under skip`);
      return;
    }
    const ref = { p: Float64Array.from(x.p), m: Float64Array.from(x.m), v: Float64Array.from(x.v) };
    N.adamw(ref.p, Float64Array.from(x.g), ref.m, ref.v, STEP.lr, B1, B2, EPS, x.wd, STEP.bc1, STEP.bc2, STEP.gradScale);
    for (const what of ["p", "m", "v"] as const) {
      // an f16 parameter is one f16 rounding from the float64 value
      const rtol = what === "p" && x.pd === "f16" ? 2 ** -10 : 1e-5;
      for (let i = 0; i < x.n; i++) {
        const a = got[what][i], b = ref[what][i];
        if (!(Math.abs(a - b) <= 1e-6 + rtol * Math.abs(b))) assert.fail(`n=${x.n} ${what}[${i}]: ${a}, float64 ${b}`);
      }
    }
  });
}

const f32s = () => "f32" as Dtype;
const f16s = () => "f16" as Dtype;
const alternate = (j: number): Dtype => (j % 2 ? "f16" : "f32");

for (const hyper of ["push", "device"] as const) {
  test(`adamw_multi vec4 = scalar bit for bit, f32 gradients, ${hyper} scalars`, (t) => check(t, f32s, f32s, hyper));
  test(`adamw_multi vec4 = scalar bit for bit, f16 gradients, ${hyper} scalars`, (t) => check(t, f16s, f32s, hyper));
  test(`adamw_multi vec4 = scalar bit for bit, mixed gradients and f16 parameters, ${hyper} scalars`, (t) => check(t, alternate, (j) => alternate(j + 1), hyper));
}

test("adamw_multi vec4 with skip != 0 leaves p, m and v untouched", (t) => {
  check(t, f32s, f32s, "device", 1);
  check(t, alternate, f32s, "device", 1);
});
