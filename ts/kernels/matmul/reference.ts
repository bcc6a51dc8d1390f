// CPU references for matmul: fp64 products, f16/bf16 bit conversions, the relative Frobenius
// error used as the correctness gate, and a seeded generator for random test data.
import type { Activation, Epilogue, MatmulDtype, NormalizedProblem } from "./problem.js";

const f32buf = new Float32Array(1);
const u32buf = new Uint32Array(f32buf.buffer);

/** f32 -> IEEE half bits, round to nearest even (overflow -> inf, NaN kept). */
export function f32ToF16Bits(x: number): number {
  f32buf[0] = x;
  const f = u32buf[0];
  const sign = (f >>> 16) & 0x8000;
  const exp = (f >>> 23) & 0xff;
  let mant = f & 0x7fffff;
  if (exp === 0xff) return sign | 0x7c00 | (mant ? 0x200 : 0);
  let e = exp - 127 + 15;
  if (e >= 0x1f) return sign | 0x7c00;
  if (e <= 0) {
    if (e < -10) return sign;
    mant |= 0x800000;
    const shift = 14 - e;
    let h = mant >>> shift;
    const rem = mant & ((1 << shift) - 1);
    const half = 1 << (shift - 1);
    if (rem > half || (rem === half && (h & 1))) h++;
    return sign | h;
  }
  let h = (e << 10) | (mant >>> 13);
  const rem = mant & 0x1fff;
  if (rem > 0x1000 || (rem === 0x1000 && (h & 1))) h++;
  return sign | h;
}

export function f16BitsToF32(h: number): number {
  const sign = h & 0x8000 ? -1 : 1;
  const e = (h >>> 10) & 0x1f;
  const m = h & 0x3ff;
  if (e === 0) return sign * m * 2 ** -24;
  if (e === 0x1f) return m ? NaN : sign * Infinity;
  return sign * (1 + m / 1024) * 2 ** (e - 15);
}

/** f32 -> bfloat16 bits, round to nearest even. */
export function f32ToBf16Bits(x: number): number {
  f32buf[0] = x;
  const f = u32buf[0];
  if ((f & 0x7fffffff) > 0x7f800000) return (f >>> 16) | 0x40;
  const r = f + 0x7fff + ((f >>> 16) & 1);
  return (r >>> 16) & 0xffff;
}

export function bf16BitsToF32(h: number): number {
  u32buf[0] = h << 16;
  return f32buf[0];
}

/** splitmix32-style deterministic generator: tests and benches are reproducible. */
export function rng(seed: number): () => number {
  let s = seed >>> 0;
  return () => {
    s = (s + 0x9e3779b9) >>> 0;
    let z = s;
    z = Math.imul(z ^ (z >>> 16), 0x85ebca6b) >>> 0;
    z = Math.imul(z ^ (z >>> 13), 0xc2b2ae35) >>> 0;
    z = (z ^ (z >>> 16)) >>> 0;
    return z / 4294967296;
  };
}

/**
 * Random values in [-1, 1) already rounded to `dtype`: `values` is what the GPU sees (as f64), `bits`
 * the buffer to upload (Float32Array for f32, Uint16Array bits for f16/bf16).
 */
export function randomTensor(len: number, dtype: MatmulDtype, seed: number): { values: Float64Array; bits: Float32Array | Uint16Array } {
  const r = rng(seed);
  const values = new Float64Array(len);
  if (dtype === "f32") {
    const bits = new Float32Array(len);
    for (let i = 0; i < len; i++) {
      bits[i] = r() * 2 - 1;
      values[i] = bits[i];
    }
    return { values, bits };
  }
  const bits = new Uint16Array(len);
  const enc = dtype === "f16" ? f32ToF16Bits : f32ToBf16Bits;
  const dec = dtype === "f16" ? f16BitsToF32 : bf16BitsToF32;
  for (let i = 0; i < len; i++) {
    bits[i] = enc(r() * 2 - 1);
    values[i] = dec(bits[i]);
  }
  return { values, bits };
}

/** Decodes a read-back output buffer to f64. */
export function decode(buf: ArrayBuffer, dtype: MatmulDtype, len: number): Float64Array {
  const out = new Float64Array(len);
  if (dtype === "f32") {
    const f = new Float32Array(buf, 0, len);
    for (let i = 0; i < len; i++) out[i] = f[i];
  } else {
    const h = new Uint16Array(buf, 0, len);
    const dec = dtype === "f16" ? f16BitsToF32 : bf16BitsToF32;
    for (let i = 0; i < len; i++) out[i] = dec(h[i]);
  }
  return out;
}

export function activate(act: Activation, x: number): number {
  switch (act) {
    case "relu": return x > 0 ? x : 0;
    // Alpha's GELU is the tanh form.
    case "gelu": return 0.5 * x * (1 + Math.tanh(0.7978845608028654 * (x + 0.044715 * x * x * x)));
    case "silu": return x / (1 + Math.exp(-x));
    default: return x;
  }
}

/** GELU's derivative (tanh form, as elementwise.ts geluGrad), in fp64. */
export function geluGradRef(x: number): number {
  const c = 0.7978845608028654;
  const t = Math.tanh(c * (x + 0.044715 * x * x * x));
  return 0.5 * (1 + t) + 0.5 * x * (1 - t * t) * c * (1 + 3 * 0.044715 * x * x);
}

/** The epilogue's inputs at one output element: bias[col], residual and preact at the element. */
export interface EpilogueValues {
  bias?: number;
  residual?: number;
  preact?: number;
}

/** The epilogue applied to the fp64 product s (problem.ts Epilogue), for the values present. */
export function refEpilogue(e: Required<Epilogue>, s: number, v: EpilogueValues): number {
  let y = s * e.scale;
  if (v.bias !== undefined) y += v.bias;
  y = activate(e.act, y);
  if (v.preact !== undefined) y *= geluGradRef(v.preact);
  if (v.residual !== undefined) y += v.residual;
  return y;
}

export interface RefInputs {
  a: Float64Array;
  b: Float64Array;
  bias?: Float64Array;
  residual?: Float64Array;
  preact?: Float64Array;
}

/** One output element C[bt, i, j] in fp64, epilogue included. */
export function refElement(p: NormalizedProblem, x: RefInputs, bt: number, i: number, j: number): number {
  const { m, n, k } = p;
  const aOff = bt * m * k;
  const bOff = p.broadcastB ? 0 : bt * k * n;
  let s = 0;
  for (let t = 0; t < k; t++) {
    const av = p.transA ? x.a[aOff + t * m + i] : x.a[aOff + i * k + t];
    const bv = p.transB ? x.b[bOff + j * k + t] : x.b[bOff + t * n + j];
    s += av * bv;
  }
  const e = p.epilogue;
  const at = bt * m * n + i * n + j;
  return refEpilogue(e, s, {
    bias: e.bias ? x.bias?.[j] : undefined,
    residual: e.residual ? x.residual?.[at] : undefined,
    preact: e.geluGrad ? x.preact?.[at] : undefined,
  });
}

/** Full fp64 reference C (batch×M×N). Cost batch·M·N·K: keep it for check-sized shapes. */
export function refMatmul(p: NormalizedProblem, x: RefInputs): Float64Array {
  const { m, n, batch } = p;
  const out = new Float64Array(batch * m * n);
  for (let bt = 0; bt < batch; bt++)
    for (let i = 0; i < m; i++)
      for (let j = 0; j < n; j++) out[bt * m * n + i * n + j] = refElement(p, x, bt, i, j);
  return out;
}

/** ‖got − want‖_F / ‖want‖_F (falls back to the absolute norm when want is all zero). */
export function relFrobenius(got: ArrayLike<number>, want: ArrayLike<number>): number {
  let num = 0;
  let den = 0;
  for (let i = 0; i < want.length; i++) {
    const d = got[i] - want[i];
    num += d * d;
    den += want[i] * want[i];
  }
  if (Number.isNaN(num)) return Infinity;
  return den > 0 ? Math.sqrt(num / den) : Math.sqrt(num);
}

/** The gate of issue 5: 1e-2 for 16-bit inputs (or f16 tiles / f16 accumulation), 1e-4 for f32. */
export function tolerance(p: NormalizedProblem, variantIsLowPrecision: boolean): number {
  if (p.dtype !== "f32" || variantIsLowPrecision) return p.accF16 ? 2e-2 : 1e-2;
  return 1e-4;
}
