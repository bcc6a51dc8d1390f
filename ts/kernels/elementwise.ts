// Fused elementwise kernel: one thread per output element computes an SSA program over
// its inputs in f32 and stores the result once.
//
// Bindings: 0..L-1 inputs (read, storage type of each input's dtype), L: out (write).
// Push: n (u32 elements), then for kernels with strided inputs the collapsed output dims
//   d0..d{R-1} and per strided input j its element strides s{j}_0..s{j}_{R-1}, then the
//   op parameters p0..p{P-1} (f32).
// Split outputs (FusedKernelKey.split, f32 results only): instead of or beside `out`, the
// result's bf16 hi/lo split in the two-block layouts the f32 products read (matmul/presplit.ts):
//   rows  (bf16, 2n): row r of the [n / cols, cols] result at [r·2·cols, +cols) hi, then lo;
//   whole (bf16, 2n): hi of every element, then lo of every element.
//   Bindings after `out` (when kept) in that order; push gains `cols` (u32) after the params.
// Dispatch: grid1d(n) (x, then y past 65535 groups), WG threads.
// Numerics: everything in f32; f16 inputs widen on load and round to nearest on store;
// tanh is clamped so GELU/softCap never see NaN from an overflowing exp on any driver.
import { exp, kernel, lift, vecOf, type Buffer, log, max, min, pow, abs, floor, select, sqrt, u32, type Expr, type KernelBuilder, type KernelDesc } from "../ir/index.js";
import type { Dtype } from "../types.js";
import type { Instr, IndexMode } from "../fusion/plan.js";
import { bf16HiLo } from "./matmul/presplit.js";
import { WG, flatIndex, fromF32, safeTanh, storageOf, toF32, type PushSpec } from "./common.js";

export interface FusedKernelKey {
  readonly signature: string;
  /**
   * `inner` (vec4 kernels with strided inputs only): the input's innermost collapsed stride, 1
   * (its four elements are a vector: the other strides are multiples of 4) or 0 (one value
   * repeated along the innermost dim, whose length is a multiple of 4: the four share it).
   */
  readonly inputs: readonly { dtype: Dtype; mode: IndexMode; inner?: 0 | 1 }[];
  readonly rank: number;
  readonly program: readonly Instr[];
  readonly nParams: number;
  readonly outDtype: Dtype;
  /**
   * Four elements per thread with vector loads/stores: n % 4 == 0, and strided inputs only where
   * the innermost dim is a multiple of 4 and each strided input walks it with stride 1 or 0
   * (`inner`), so a bias [C] over [N, C] or a column [N, 1] does not cost the 4-wide form.
   */
  readonly vec4: boolean;
  /** Split outputs (f32 results): whether `out` is written too, and which split layouts are. */
  readonly split?: FusedSplitOutputs;
}

export interface FusedSplitOutputs {
  readonly f32: boolean;
  readonly rows: boolean;
  readonly whole: boolean;
}

export function fusedPushSpec(key: FusedKernelKey): PushSpec {
  const spec: PushSpec = { n: "u32" };
  const strided = key.inputs.map((inp, j) => (inp.mode === "strided" ? j : -1)).filter((j) => j >= 0);
  if (strided.length > 0) {
    for (let d = 0; d < key.rank; d++) spec[`d${d}`] = "u32";
    for (const j of strided) for (let d = 0; d < key.rank; d++) spec[`s${j}_${d}`] = "u32";
  }
  for (let p = 0; p < key.nParams; p++) spec[`p${p}`] = "f32";
  if (key.split?.rows) spec.cols = "u32";
  return spec;
}

const SQRT_2_OVER_PI = 0.7978845608028654;

/**
 * tanh(u) as 1 − 2/(1 + exp(2u)): exp → ∞ gives 1, exp → 0 gives −1, so no clamp is needed.
 * NVIDIA's tanh costs ~60 instructions, enough to make an f16 GELU pass compute-bound (H200: a
 * 16384×3072 pass took 76 µs where its bytes take ~54). Near u = 0 its error is an ulp of 1, not
 * of u: GELU and its derivative only use 1 ± tanh(u), where that is rounding; the tanh op and
 * softCap keep safeTanh.
 */
export function tanhByExp(u: Expr): Expr {
  return lift(2, u.type).div(exp(u.mul(2)).add(1)).neg().add(1);
}

/**
 * Alpha's tanh-form GELU, 0.5·x·(1 + tanh(u)) with u = √(2/π)·(x + 0.044715·x³), computed as
 * x / (1 + exp(−2u)): the same function (0.5·(1 + tanh(u)) = σ(2u)) without tanh (tanhByExp).
 * Huge |x| stays finite: exp → ∞ gives −0, exp → 0 gives x.
 */
export function gelu(x: Expr): Expr {
  return x.div(exp(x.mul(x).mul(0.044715).add(1).mul(x).mul(-2 * SQRT_2_OVER_PI)).add(1));
}

/**
 * GELU's derivative (tanh form), the one formula of every GELU backward: the fused elementwise
 * geluBackward and the matmul epilogue that multiplies a product by it (matmul/common.ts
 * geluGradExp, which binds its terms to names).
 */
export function geluGrad(x: Expr, tanh: (u: Expr) => Expr = tanhByExp): Expr {
  const t = tanh(x.add(x.mul(x).mul(x).mul(0.044715)).mul(SQRT_2_OVER_PI));
  const dInner = x.mul(x).mul(3 * 0.044715).add(1).mul(SQRT_2_OVER_PI);
  return t.add(1).mul(0.5).add(x.mul(0.5).mul(t.mul(t).neg().add(1)).mul(dInner));
}

export function generateFused(key: FusedKernelKey): KernelDesc {
  const k = kernel("fused_ew", { workgroup: [WG] });
  const bufs = key.inputs.map((inp, j) => k.buffer(`in${j}`, storageOf(inp.dtype), "read"));
  const split = key.split;
  if (split && key.outDtype !== "f32") throw new Error("helios: internal error: split outputs of a non-f32 fused result");
  const out = !split || split.f32 ? k.buffer("out", storageOf(key.outDtype), "write") : null;
  const rowsOut = split?.rows ? k.buffer("rows", "bf16", "write") : null;
  const wholeOut = split?.whole ? k.buffer("whole", "bf16", "write") : null;
  const pc = k.push(fusedPushSpec(key));
  const i = flatIndex(k);
  const vec = key.vec4;
  // vec4 kernels index vectors: n counts elements, the guard counts vectors
  k.if(vec ? i.ge(pc.n.div(4)) : i.ge(pc.n), () => k.return());
  // element offsets (the first of the thread's four in vec4 kernels) of strided inputs
  const offsets = vec ? inputOffsets(k, key, k.let(i.mul(4), "e"), pc) : inputOffsets(k, key, i, pc);
  const vals: Expr[] = [];
  const param = (n: number) => (vec ? vecOf("f32x4", pc[`p${n}`]) : pc[`p${n}`]);
  for (const ins of key.program) {
    if (ins.k === "load") {
      const inp = key.inputs[ins.input];
      vals.push(k.let(vec ? loadVec4(bufs[ins.input], inp.mode, inp.inner, i, offsets[ins.input]) : toF32(bufs[ins.input].load(offsets[ins.input])), "x"));
    }
    else if (ins.k === "un") vals.push(k.let(unary(ins.op, vals[ins.x], ins.param, param), "u"));
    else vals.push(k.let(binary(ins.op, vals[ins.a], vals[ins.b], ins.param, param), "b"));
  }
  const r = vals[vals.length - 1];
  if (out) out.store(i, vec ? r.cast(`${storageOf(key.outDtype)}x4` as "f32x4") : fromF32(r, key.outDtype));
  if (split) storeSplit(k, r, vec ? k.let(i.mul(4), "e") : i, pc, vec, rowsOut, wholeOut);
  const desc = k.finish();
  const forms = split ? `_split${split.f32 ? "f" : ""}${split.rows ? "r" : ""}${split.whole ? "w" : ""}` : "";
  desc.name = `fused_${key.outDtype}_${key.program.length}${vec ? "_v4" : ""}${forms}`;
  return desc;
}

/**
 * Stores result r of element e (the first of four in vec4 kernels, which need cols % 4 == 0 so
 * the four share a row) as bf16 hi = r rounded to nearest, lo = (r − hi) rounded, in the split
 * layouts asked for (same rounding as matmul/presplit.ts).
 */
function storeSplit(k: KernelBuilder, r: Expr, e: Expr, pc: Record<string, Expr>, vec: boolean, rows: Buffer | null, whole: Buffer | null): void {
  const { hi, lo } = bf16HiLo(k, r, vec);
  // element offsets; vec4 kernels store one 4-wide vector at offset / 4
  const at = (b: Buffer) => {
    const view = vec ? b.as("bf16", 4) : b;
    return (el: Expr, v: Expr) => view.store(vec ? el.div(4) : el, v);
  };
  if (whole) {
    const put = at(whole);
    put(e, hi);
    put(pc.n.add(e), lo);
  }
  if (rows) {
    // element (row, c) = e: hi at row·2·cols + c = row·cols + e, lo one row length after
    const put = at(rows);
    const base = k.let(e.div(pc.cols).mul(pc.cols).add(e), "rbase");
    put(base, hi);
    put(base.add(pc.cols), lo);
  }
}

/** The four values of vector `i` from input `b`; `off` is a strided input's element offset. */
function loadVec4(b: Buffer, mode: IndexMode, inner: 0 | 1 | undefined, i: Expr, off: Expr | number): Expr {
  if (mode === "scalar") return vecOf("f32x4", toF32(b.load(0)));
  if (mode === "full") return b.loadVec(i, 4).cast("f32x4");
  if (inner === 0) return vecOf("f32x4", toF32(b.load(off)));
  if (inner === 1) return b.loadVec(lift(off, "u32").div(4), 4).cast("f32x4");
  throw new Error("helios: internal error: a strided input of a 4-wide fused kernel without its inner stride");
}

function inputOffsets(k: KernelBuilder, key: FusedKernelKey, i: Expr, pc: Record<string, Expr>): (Expr | number)[] {
  const strided = key.inputs.some((inp) => inp.mode === "strided");
  const offs: (Expr | number)[] = key.inputs.map((inp) => (inp.mode === "full" ? i : 0));
  if (!strided) return offs;
  const acc = key.inputs.map((inp, j) => (inp.mode === "strided" ? k.var(u32, 0, `off${j}`) : null));
  const rem = k.var(u32, i, "rem");
  for (let d = key.rank - 1; d >= 0; d--) {
    const r = rem.get();
    const dim = pc[`d${d}`];
    const c = k.let(r.rem(dim), "c");
    rem.set(r.div(dim));
    acc.forEach((v, j) => {
      if (v) v.set(v.get().add(c.mul(pc[`s${j}_${d}`])));
    });
  }
  return offs.map((o, j) => (acc[j] ? (acc[j] as { get(): Expr }).get() : o));
}

type Param = (n: number) => Expr;

function unary(op: string, x: Expr, p: number, param: Param): Expr {
  switch (op) {
    case "copy": return x;
    case "neg": return x.neg();
    case "exp": return exp(x);
    case "log": return log(x);
    case "sqrt": return sqrt(x);
    case "relu": return select(x.gt(0), x, 0);
    case "gelu": return gelu(x);
    case "silu": return x.div(exp(x.neg()).add(1));
    case "sigmoid": return recip(exp(x.neg()).add(1));
    case "tanh": return safeTanh(x);
    case "scale": return x.mul(param(p));
    case "addScalar": return x.add(param(p));
    case "pow": return powSigned(x, param(p));
    case "clamp": return max(param(p), min(param(p + 1), x));
    case "softCap": return safeTanh(x.div(param(p))).mul(param(p));
  }
  throw new Error(`helios: internal error: unary op ${op}`);
}

function binary(op: string, a: Expr, b: Expr, p: number, param: Param): Expr {
  switch (op) {
    case "add": return a.add(b);
    case "sub": return a.sub(b);
    case "mul": return a.mul(b);
    case "div": return a.div(b);
    case "geluBwd": return b.mul(geluGrad(a));
    case "reluBwd": return select(a.gt(0), b, 0);
    case "siluBwd": {
      const s = recip(exp(a.neg()).add(1));
      return b.mul(s).mul(a.mul(s.neg().add(1)).add(1));
    }
    case "siluMul": return a.div(exp(a.neg()).add(1)).mul(b);
    case "clampBwd": return select(a.gt(param(p)).and(a.lt(param(p + 1))), b, 0);
    case "softCapBwd": {
      const t = safeTanh(a.div(param(p)));
      return b.mul(t.mul(t).neg().add(1));
    }
    case "maskedFill": return select(b.ne(0), param(p), a);
  }
  throw new Error(`helios: internal error: binary op ${op}`);
}

function recip(x: Expr): Expr {
  return lift(1, x.type).div(x);
}

/** Math.pow semantics for negative bases: odd integer exponents keep the sign, others NaN. */
function powSigned(x: Expr, e: Expr): Expr {
  const mag = pow(abs(x), e);
  const isInt = floor(e).eq(e);
  const odd = abs(e.sub(floor(e.mul(0.5)).mul(2))).eq(1);
  const neg = select(isInt, select(odd, mag.neg(), mag), lift(NaN, x.type));
  return select(x.lt(0), neg, select(x.eq(0).and(e.eq(0)), lift(1, x.type), mag));
}
