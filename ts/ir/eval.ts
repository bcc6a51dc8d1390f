// A CPU evaluator of pure expression trees, the reference for the IR property test. Scalars are
// numbers/booleans, vectors arrays. f32 rounds with Math.fround after every op, i32/u32 wrap;
// f16 is rounded through a Float16 round-trip. Memory, subgroup and coopmat ops are not pure and
// are rejected.
import type { ExprNode, LitValue } from "./nodes.js";
import { isFloat, scalarOf, widthOf, type ScalarType, type Type } from "./types.js";

export type Value = number | boolean | (number | boolean)[];
export type Env = Map<string, { value: Value; type: Type }>;

interface Typed { v: Value; t: Type }

export function evalExpr(node: ExprNode, env: Env = new Map()): Value {
  return ev(node, env).v;
}

/** The inferred type of a pure expression, with the same rules as src/ir. */
export function typeOfExpr(node: ExprNode, env: Env = new Map()): Type {
  return ev(node, env).t;
}

const f16buf = new Float32Array(1);
const u32buf = new Uint32Array(f16buf.buffer);

/** Rounds to the nearest f16 (round-to-nearest-even), returned as a JS number. */
export function roundF16(x: number): number {
  if (!Number.isFinite(x)) return x;
  const a = Math.abs(x);
  if (a >= 65520) return x > 0 ? Infinity : -Infinity;
  if (a < 2 ** -24 / 2) return x < 0 ? -0 : 0;
  const e = Math.max(Math.floor(Math.log2(a)), -14);
  const q = 2 ** (e - 10);
  let r = a / q;
  const fl = Math.floor(r);
  const frac = r - fl;
  r = frac > 0.5 || (frac === 0.5 && fl % 2 === 1) ? fl + 1 : fl;
  return Math.sign(x) * r * q;
}

function roundTo(s: ScalarType, x: number): number {
  switch (s) {
    case "f32": return Math.fround(x);
    case "f16": return roundF16(x);
    case "bf16": {
      f16buf[0] = x;
      const u = u32buf[0];
      u32buf[0] = (u + 0x7fff + ((u >>> 16) & 1)) & 0xffff0000;
      return f16buf[0];
    }
    case "i32": return x | 0;
    case "u32": return x >>> 0;
    default: return x;
  }
}

function litScalar(s: ScalarType, v: number | boolean | string): number | boolean {
  if (s === "bool") return v === true || v === "true";
  if (v === "inf") return Infinity;
  if (v === "-inf") return -Infinity;
  if (v === "nan") return NaN;
  return roundTo(s, Number(v));
}

function litValue(t: Type, v: LitValue): Value {
  const s = scalarOf(t);
  const w = widthOf(t);
  if (w === 1) return litScalar(s, v as number);
  if (Array.isArray(v)) return v.map((x) => litScalar(s, x));
  return new Array(w).fill(litScalar(s, v));
}

/** Applies `f` lane-wise over scalars or same-width vectors (scalars broadcast). */
function lanes(args: Value[], f: (...xs: (number | boolean)[]) => number | boolean): Value {
  const w = Math.max(...args.map((a) => (Array.isArray(a) ? a.length : 1)));
  if (w === 1 && !args.some(Array.isArray)) return f(...(args as (number | boolean)[]));
  const out: (number | boolean)[] = [];
  for (let i = 0; i < w; i++) out.push(f(...args.map((a) => (Array.isArray(a) ? a[i] : a))));
  return out;
}

function imul32(s: ScalarType, a: number, b: number): number {
  return s === "u32" ? Math.imul(a, b) >>> 0 : Math.imul(a, b);
}

function arith(op: string, s: ScalarType, a: number, b: number): number {
  const fl = isFloat(s);
  switch (op) {
    case "add": return roundTo(s, a + b);
    case "sub": return roundTo(s, a - b);
    case "mul": return fl ? roundTo(s, a * b) : imul32(s, a, b);
    case "div":
      if (fl) return roundTo(s, a / b);
      return b === 0 ? (s === "u32" ? 0xffffffff : -1) : roundTo(s, Math.trunc(a / b));
    case "rem":
      // OpFRem / OpSRem: the sign follows the dividend (like C's fmod / %).
      if (fl) return roundTo(s, a % b);
      return b === 0 ? 0 : roundTo(s, a % b);
    case "min": return Number.isNaN(a) ? b : Number.isNaN(b) ? a : Math.min(a, b);
    case "max": return Number.isNaN(a) ? b : Number.isNaN(b) ? a : Math.max(a, b);
    case "pow": return roundTo(s, Math.pow(a, b));
    case "atan2": return roundTo(s, Math.atan2(a, b));
    case "step": return b < a ? 0 : 1;
    case "band": return roundTo(s, a & b);
    case "bor": return roundTo(s, a | b);
    case "bxor": return roundTo(s, a ^ b);
    case "shl": return roundTo(s, a << (b & 31));
    case "shr": return s === "u32" ? a >>> (b & 31) : a >> (b & 31);
    default: throw new Error(`evalExpr: unknown binary op ${op}`);
  }
}

function compare(op: string, a: number | boolean, b: number | boolean): boolean {
  switch (op) {
    case "lt": return a < b;
    case "le": return a <= b;
    case "gt": return a > b;
    case "ge": return a >= b;
    case "eq": return a === b;
    case "ne": return a !== b;
    default: throw new Error(`evalExpr: unknown comparison ${op}`);
  }
}

function unary(op: string, s: ScalarType, a: number): number {
  const r = (x: number) => roundTo(s, x);
  switch (op) {
    case "neg": return isFloat(s) ? -a : roundTo(s, -a);
    case "bnot": return roundTo(s, ~a);
    case "exp": return r(Math.exp(a));
    case "exp2": return r(Math.pow(2, a));
    case "log": return r(Math.log(a));
    case "log2": return r(Math.log2(a));
    case "sqrt": return r(Math.sqrt(a));
    case "rsqrt": return r(1 / Math.sqrt(a));
    case "tanh": return r(Math.tanh(a));
    case "sin": return r(Math.sin(a));
    case "cos": return r(Math.cos(a));
    case "abs": return isFloat(s) ? Math.abs(a) : roundTo(s, Math.abs(a));
    case "floor": return Math.floor(a);
    case "ceil": return Math.ceil(a);
    case "round": return r(Math.round(a));
    case "trunc": return Math.trunc(a);
    case "fract": return r(a - Math.floor(a));
    case "sign": return Math.sign(a);
    default: throw new Error(`evalExpr: unknown unary op ${op}`);
  }
}

function convert(from: ScalarType, to: ScalarType, x: number | boolean): number | boolean {
  if (to === "bool") return x !== 0 && x !== false;
  if (from === "bool") return x ? 1 : 0;
  const n = x as number;
  if (isFloat(from) && !isFloat(to)) {
    // Out-of-range float->int is undefined in SPIR-V; the property test keeps values in range.
    return roundTo(to, Math.trunc(n));
  }
  if (from === "i32" && to === "u32") return n >>> 0;
  if (from === "u32" && to === "i32") return n | 0;
  return roundTo(to, n);
}

const SWZ = "xyzw";

function ev(node: ExprNode, env: Env): Typed {
  switch (node.op) {
    case "lit":
      return { v: litValue(node.t, node.v), t: node.t };
    case "get": {
      const b = env.get(node.name);
      if (!b) throw new Error(`evalExpr: undefined value '${node.name}'`);
      return { v: b.value, t: b.type };
    }
    case "swz": {
      const a = ev(node.a, env);
      const s = scalarOf(a.t);
      const arr = a.v as (number | boolean)[];
      const picked = [...node.c].map((ch) => arr[SWZ.indexOf(ch)]);
      return picked.length === 1
        ? { v: picked[0], t: s }
        : { v: picked, t: `${s}x${picked.length}` as Type };
    }
    case "vec": {
      const parts = node.args.map((x) => ev(x, env).v);
      const flat = parts.flatMap((p) => (Array.isArray(p) ? p : [p]));
      const w = widthOf(node.t);
      return { v: flat.length === 1 ? new Array(w).fill(flat[0]) : flat, t: node.t };
    }
    case "select": {
      const c = ev(node.c, env).v;
      const a = ev(node.a, env);
      const b = ev(node.b, env).v;
      return { v: lanes([c, a.v, b], (cc, x, y) => (cc ? x : y)), t: a.t };
    }
    case "cast": {
      const a = ev(node.a, env);
      const from = scalarOf(a.t);
      const to = scalarOf(node.t);
      return { v: lanes([a.v], (x) => convert(from, to, x)), t: node.t };
    }
    case "fma": case "mix": case "clamp": {
      const a = ev(node.a, env);
      const b = ev(node.b, env).v;
      const c = ev(node.c, env).v;
      const s = scalarOf(a.t);
      const f = (x: number | boolean, y: number | boolean, z: number | boolean): number => {
        const [p, q, w] = [x as number, y as number, z as number];
        if (node.op === "fma") return roundTo(s, p * q + w);
        if (node.op === "mix") return roundTo(s, p + (q - p) * w);
        return Math.min(Math.max(p, q), w);
      };
      return { v: lanes([a.v, b, c], f), t: a.t };
    }
    default:
      return evOps(node, env);
  }
}

function evOps(node: ExprNode, env: Env): Typed {
  const op = node.op;
  if ("b" in node && "a" in node && typeof node.b === "object") {
    const a = ev(node.a as ExprNode, env);
    const b = ev(node.b as ExprNode, env);
    const s = scalarOf(a.t);
    if (op === "lt" || op === "le" || op === "gt" || op === "ge" || op === "eq" || op === "ne") {
      const w = widthOf(a.t);
      return { v: lanes([a.v, b.v], (x, y) => compare(op, x, y)), t: w === 1 ? "bool" : (`boolx${w}` as Type) };
    }
    if (op === "and") return { v: lanes([a.v, b.v], (x, y) => Boolean(x) && Boolean(y)), t: a.t };
    if (op === "or") return { v: lanes([a.v, b.v], (x, y) => Boolean(x) || Boolean(y)), t: a.t };
    if (op === "xor") return { v: lanes([a.v, b.v], (x, y) => Boolean(x) !== Boolean(y)), t: a.t };
    if (op === "dot") {
      const x = a.v as number[];
      const y = b.v as number[];
      let acc = 0;
      for (let i = 0; i < x.length; i++) acc = roundTo(s, acc + roundTo(s, x[i] * y[i]));
      return { v: acc, t: s };
    }
    const t = widthOf(b.t) > widthOf(a.t) ? b.t : a.t;
    return { v: lanes([a.v, b.v], (x, y) => arith(op, s, x as number, y as number)), t };
  }
  if ("a" in node && typeof node.a === "object") {
    const a = ev(node.a as ExprNode, env);
    if (op === "not") return { v: lanes([a.v], (x) => !x), t: a.t };
    const s = scalarOf(a.t);
    return { v: lanes([a.v], (x) => unary(op, s, x as number)), t: a.t };
  }
  throw new Error(`evalExpr: '${op}' is not a pure expression`);
}

/** True when `a` and `b` agree within `tol` (relative for large values), lane-wise. */
export function closeTo(a: Value, b: Value, tol: number): boolean {
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
