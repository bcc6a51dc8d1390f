// Reference elementwise ops and their backward passes (float64).
import { type RefTensor, broadcastShapes, unravel, bcastAt, numel } from "./tensor.js";

export function binary(a: RefTensor, b: RefTensor, f: (x: number, y: number) => number): RefTensor {
  const shape = broadcastShapes(a.shape, b.shape);
  const n = numel(shape);
  const out = new Float64Array(n);
  for (let i = 0; i < n; i++) {
    const c = unravel(i, shape);
    out[i] = f(bcastAt(a, c), bcastAt(b, c));
  }
  return { shape, data: out };
}

export function unary(a: RefTensor, f: (x: number) => number): RefTensor {
  return { shape: [...a.shape], data: a.data.map(f) };
}

export function zip(a: RefTensor, b: RefTensor, f: (x: number, y: number) => number): RefTensor {
  if (a.data.length !== b.data.length) throw new Error("ref zip: size mismatch");
  return { shape: [...a.shape], data: a.data.map((x, i) => f(x, b.data[i])) };
}

const SQRT_2_OVER_PI = Math.sqrt(2 / Math.PI);
export const gelu = (x: number) => 0.5 * x * (1 + Math.tanh(SQRT_2_OVER_PI * (x + 0.044715 * x ** 3)));
export const geluGrad = (x: number) => {
  const t = Math.tanh(SQRT_2_OVER_PI * (x + 0.044715 * x ** 3));
  return 0.5 * (1 + t) + 0.5 * x * (1 - t * t) * SQRT_2_OVER_PI * (1 + 3 * 0.044715 * x * x);
};
export const sigmoid = (x: number) => 1 / (1 + Math.exp(-x));
export const silu = (x: number) => x * sigmoid(x);
export const siluGrad = (x: number) => {
  const s = sigmoid(x);
  return s * (1 + x * (1 - s));
};
export const relu = (x: number) => (x > 0 ? x : 0);
export const clamp = (x: number, lo: number, hi: number) => Math.max(lo, Math.min(hi, x));
/** Alpha passes gradient only strictly inside (lo, hi). */
export const clampGrad = (x: number, lo: number, hi: number) => (x > lo && x < hi ? 1 : 0);
export const softCap = (x: number, cap: number) => Math.tanh(x / cap) * cap;
export const softCapGrad = (x: number, cap: number) => 1 - Math.tanh(x / cap) ** 2;
