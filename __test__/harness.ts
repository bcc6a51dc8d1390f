// Test harness for backend tests: seeded random data (never all zeros), f32/f16 tensors,
// tolerance assertions that name the worst element, and a finite-difference gradient check.
import assert from "node:assert/strict";
import type { Dtype, TensorData } from "../ts/types.js";
import { toF16Array, fromF16Array, roundF16 } from "../ts/f16.js";
import { type RefTensor, ref } from "./ref/tensor.js";
import { Mulberry32 } from "../ts/random.js";

/** mulberry32: small, fast, good enough for test data; seeded so failures reproduce. */
export class Rng extends Mulberry32 {
  uniform(lo: number, hi: number): number {
    return lo + (hi - lo) * this.next();
  }
  int(lo: number, hiExclusive: number): number {
    return lo + Math.floor(this.next() * (hiExclusive - lo));
  }
  normal(): number {
    const u = Math.max(this.next(), 1e-12);
    return Math.sqrt(-2 * Math.log(u)) * Math.cos(2 * Math.PI * this.next());
  }
}

export interface Sample {
  /** What goes to the backend. */
  td: TensorData;
  /** The same values in float64, after rounding to the storage dtype. */
  ref: RefTensor;
}

/** Random tensor; f16 values are rounded so the reference sees exactly what the GPU stores. */
export function randTensor(rng: Rng, shape: number[], dtype: Dtype = "f32", lo = -2, hi = 2): Sample {
  const n = shape.reduce((a, b) => a * b, 1);
  const vals = new Float64Array(n);
  for (let i = 0; i < n; i++) vals[i] = rng.uniform(lo, hi);
  return sampleOf(shape, vals, dtype);
}

export function positiveTensor(rng: Rng, shape: number[], dtype: Dtype = "f32"): Sample {
  return randTensor(rng, shape, dtype, 0.1, 3);
}

export function sampleOf(shape: number[], vals: ArrayLike<number>, dtype: Dtype): Sample {
  let data: TensorData["data"];
  let stored: ArrayLike<number>;
  if (dtype === "f16") {
    data = toF16Array(vals);
    stored = fromF16Array(data);
  } else if (dtype === "i32") {
    data = Int32Array.from(vals);
    stored = data;
  } else if (dtype === "f64") {
    data = Float64Array.from(vals);
    stored = Float32Array.from(vals);
  } else {
    data = Float32Array.from(vals);
    stored = data;
  }
  return { td: { shape, dtype, data }, ref: ref(shape, stored) };
}

export function randIndices(rng: Rng, shape: number[], hi: number): TensorData {
  const n = shape.reduce((a, b) => a * b, 1);
  const d = new Int32Array(n);
  for (let i = 0; i < n; i++) d[i] = rng.int(0, hi);
  return { shape, dtype: "i32", data: d };
}

/** Values of any TensorData as float64 (f16 decoded). Reading `.data` forces a GPU tensor. */
export function values(t: TensorData): Float64Array {
  return t.dtype === "f16" ? Float64Array.from(fromF16Array(t.data as Uint16Array)) : Float64Array.from(t.data);
}

export interface Tol {
  atol: number;
  rtol: number;
}

export const TOL: Record<Dtype, Tol> = {
  f32: { atol: 1e-5, rtol: 1e-4 },
  f64: { atol: 1e-5, rtol: 1e-4 },
  i32: { atol: 0, rtol: 0 },
  f16: { atol: 2e-3, rtol: 2e-3 },
};

/** Compares shape and values; the message names the worst element and its coordinates. */
export function assertClose(actual: TensorData, expected: RefTensor, tol: Tol, what: string): void {
  assert.deepEqual([...actual.shape], expected.shape, `${what}: shape`);
  const got = values(actual);
  const exp = expected.dtypeRound ? expected.data.map(expected.dtypeRound) : expected.data;
  let worst = -1;
  let worstExcess = 0;
  for (let i = 0; i < exp.length; i++) {
    const e = exp[i];
    const g = got[i];
    if (Number.isNaN(e) && Number.isNaN(g)) continue;
    if (e === g) continue; // covers matching infinities
    const excess = Math.abs(g - e) - (tol.atol + tol.rtol * Math.abs(e));
    if (!(excess <= 0) && (worst < 0 || !(excess <= worstExcess))) {
      worst = i;
      worstExcess = excess;
    }
  }
  if (worst >= 0) {
    assert.fail(`${what}: element ${worst} of [${expected.shape}] is ${got[worst]}, expected ${exp[worst]} (atol ${tol.atol}, rtol ${tol.rtol})`);
  }
}

declare module "./ref/tensor.js" {
  interface RefTensor {
    /** Optional: round expected values to the output's storage dtype before comparing. */
    dtypeRound?: (x: number) => number;
  }
}

export function asF16Output(t: RefTensor): RefTensor {
  return { ...t, dtypeRound: roundF16 };
}

/**
 * Central finite differences of a scalar function of x (float64), used to prove the
 * reference backward passes are right before the GPU is compared with them.
 */
export function finiteDiff(x: Float64Array, f: (x: Float64Array) => number, h = 1e-5): Float64Array {
  const g = new Float64Array(x.length);
  const y = x.slice();
  for (let i = 0; i < x.length; i++) {
    y[i] = x[i] + h;
    const fp = f(y);
    y[i] = x[i] - h;
    const fm = f(y);
    y[i] = x[i];
    g[i] = (fp - fm) / (2 * h);
  }
  return g;
}

/** Loss used to turn an op output into a scalar: sum(out * w) with fixed random w. */
export function weightedSum(out: Float64Array, w: Float64Array): number {
  let s = 0;
  for (let i = 0; i < out.length; i++) s += out[i] * w[i];
  return s;
}

export function assertArrayClose(got: ArrayLike<number>, exp: ArrayLike<number>, tol: Tol, what: string): void {
  assert.equal(got.length, exp.length, `${what}: length`);
  for (let i = 0; i < exp.length; i++) {
    const d = Math.abs(got[i] - exp[i]);
    if (!(d <= tol.atol + tol.rtol * Math.abs(exp[i]))) {
      assert.fail(`${what}: element ${i} is ${got[i]}, expected ${exp[i]}`);
    }
  }
}
