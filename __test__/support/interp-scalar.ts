// The kernel interpreter's scalar arithmetic (__test__/support/kernel-interp.ts): SPIR-V's
// results on JS numbers. Every result rounds to its type (f32 fround, f16/bf16 round to nearest
// even, i32/u32 wrap); integer division by zero throws (a kernel must never issue one); min and
// max return the other operand for a NaN, as the GPUs measured here do.
import { roundF16 } from "../../ts/f16.js";

export type Scalar = number | boolean;

const f32b = new Float32Array(1);
const u32b = new Uint32Array(f32b.buffer);

function roundBf16(x: number): number {
  f32b[0] = x;
  const u = u32b[0];
  u32b[0] = (u + 0x7fff + ((u >>> 16) & 1)) & 0xffff0000;
  return f32b[0];
}

export function roundTo(s: string, x: number): number {
  switch (s) {
    case "f32": return Math.fround(x);
    case "f16": return roundF16(x);
    case "bf16": return roundBf16(x);
    case "u32": return x >>> 0;
    case "i32": return x | 0;
    default: return x;
  }
}

/** `cast` between scalar types (OpConvert*: float to integer truncates; to bool is `!= 0`). */
export function convert(s: string, x: Scalar): Scalar {
  if (s === "bool") return typeof x === "boolean" ? x : x !== 0;
  const n = typeof x === "boolean" ? (x ? 1 : 0) : x;
  if (s === "u32") return (n < 0 ? Math.trunc(n) >>> 0 : Math.min(Math.trunc(n), 4294967295)) >>> 0;
  if (s === "i32") return Math.trunc(n) | 0;
  return roundTo(s, n);
}

function minMax(pick: (a: number, b: number) => number, a: number, b: number): number {
  return Number.isNaN(a) ? b : Number.isNaN(b) ? a : pick(a, b);
}

export function binScalar(op: string, s: string, a: Scalar, b: Scalar): Scalar {
  const x = a as number, y = b as number;
  switch (op) {
    case "add": return roundTo(s, x + y);
    case "sub": return roundTo(s, x - y);
    case "mul": return s === "u32" ? Math.imul(x, y) >>> 0 : s === "i32" ? Math.imul(x, y) : roundTo(s, x * y);
    case "div":
      if (s === "u32" || s === "i32") { if (y === 0) throw new Error("integer division by zero"); return roundTo(s, Math.trunc(x / y)); }
      return roundTo(s, x / y);
    // OpFRem / OpSRem: the sign follows the dividend (C's fmod and %)
    case "rem": if (s === "u32" || s === "i32") { if (y === 0) throw new Error("integer rem by zero"); return roundTo(s, x % y); } return roundTo(s, x % y);
    case "lt": return x < y;
    case "le": return x <= y;
    case "gt": return x > y;
    case "ge": return x >= y;
    case "eq": return a === b;
    case "ne": return a !== b;
    case "and": return (a as boolean) && (b as boolean);
    case "or": return (a as boolean) || (b as boolean);
    case "xor": return a !== b;
    case "band": return roundTo(s, x & y);
    case "bor": return roundTo(s, x | y);
    case "bxor": return roundTo(s, x ^ y);
    case "shl": return roundTo(s, x << y);
    case "shr": return s === "u32" ? x >>> y : x >> y;
    case "min": return minMax(Math.min, x, y);
    case "max": return minMax(Math.max, x, y);
    case "pow": return roundTo(s, Math.pow(x, y));
    case "atan2": return roundTo(s, Math.atan2(x, y));
    case "step": return x <= y ? 1 : 0;
    default: throw new Error(`interp: binary op ${op}`);
  }
}

/** Unary ops on numbers; the caller rounds the result to the operand's type. */
export const UN: Record<string, (x: number) => number> = {
  neg: (x) => -x, bnot: (x) => ~x, exp: Math.exp, exp2: (x) => 2 ** x, log: Math.log, log2: Math.log2, sqrt: Math.sqrt,
  rsqrt: (x) => 1 / Math.sqrt(x), tanh: Math.tanh, sin: Math.sin, cos: Math.cos, abs: Math.abs,
  floor: Math.floor, ceil: Math.ceil, round: Math.round, trunc: Math.trunc, fract: (x) => x - Math.floor(x),
  sign: Math.sign,
};

/** True when `a` and `b` agree within `tol` (relative for large values), lane-wise. */
export function closeTo(a: Scalar | Scalar[], b: Scalar | Scalar[], tol: number): boolean {
  const xs = Array.isArray(a) ? a : [a];
  const ys = Array.isArray(b) ? b : [b];
  if (xs.length !== ys.length) return false;
  return xs.every((x, i) => {
    const y = ys[i];
    if (typeof x === "boolean" || typeof y === "boolean") return x === y;
    if (Number.isNaN(x) || Number.isNaN(y)) return Number.isNaN(x) && Number.isNaN(y);
    if (x === y) return true;
    return Math.abs(x - y) <= tol * Math.max(1, Math.abs(x), Math.abs(y));
  });
}
