// What every matmul kernel shares: the push-constant block (declared once, used by the generators
// and by the dispatcher), binding roles, and the fused epilogue.
import {
  Expr, exp, f32, select, type Buffer, type KernelBuilder, type Var,
} from "../../ir/index.js";
import type { Activation, MatmulDtype, NormalizedProblem } from "./problem.js";
import { checkU32 } from "../common.js";
import { gelu, geluGrad, tanhByExp } from "../elementwise.js";

/**
 * Push constants of every matmul kernel (u32 sizes, f32 scalars; std430 order):
 * m, n, k           problem sizes
 * kChunk            K range of one split (== k without split-K; a multiple of the k-tile)
 * strideA/B/C       elements between batches (strideB = 0 broadcasts B)
 * splits            split-K factor (workgroup z = batch·splits + split)
 * batch             batch count
 * scale             epilogue scale (f32)
 */
export const PUSH_FIELDS = {
  m: "u32", n: "u32", k: "u32", kChunk: "u32",
  strideA: "u32", strideB: "u32", strideC: "u32", splits: "u32",
  batch: "u32", scale: "f32",
} as const;

export const PUSH_BYTES = 40;

export type PushValues = {
  m: number; n: number; k: number; kChunk: number;
  strideA: number; strideB: number; strideC: number; splits: number;
  batch: number; scale: number;
};

export function packPush(v: PushValues): ArrayBuffer {
  const buf = new ArrayBuffer(PUSH_BYTES);
  const u = new Uint32Array(buf);
  const f = new Float32Array(buf);
  const fields = ["m", "n", "k", "kChunk", "strideA", "strideB", "strideC", "splits", "batch"] as const;
  fields.forEach((name, i) => (u[i] = checkU32(name, v[name])));
  f[9] = v.scale;
  return buf;
}

export function pushValues(p: NormalizedProblem, splits: number, kChunk: number): PushValues {
  return {
    m: p.m, n: p.n, k: p.k, kChunk,
    strideA: p.m * p.k,
    strideB: p.broadcastB ? 0 : p.k * p.n,
    strideC: p.m * p.n,
    splits, batch: p.batch, scale: p.epilogue.scale,
  };
}

/** What the caller binds at each binding index of a step. */
export type BindingRole = "A" | "B" | "C" | EpilogueRole | ScratchRole;

/** The tensors an epilogue reads (Epilogue.bias, .residual, .geluGrad), bound in this order after C. */
export type EpilogueRole = "bias" | "residual" | "preact";

/** The epilogue's binding roles of problem p, in binding order. */
export function epilogueRoles(p: NormalizedProblem): EpilogueRole[] {
  const e = p.epilogue;
  return [...(e.bias ? ["bias" as const] : []), ...(e.residual ? ["residual" as const] : []), ...(e.geluGrad ? ["preact" as const] : [])];
}

/**
 * The epilogue's buffers, declared in epilogueRoles order (the bias in epilogue.biasDtype, the
 * others in the output dtype). Kernels that write split-K partials declare none.
 */
export function epilogueBuffers(k: KernelBuilder, p: NormalizedProblem): Pick<EpilogueRefs, EpilogueRole> {
  const e = p.epilogue;
  return {
    bias: e.bias ? k.buffer("bias", e.biasDtype, "read") : undefined,
    residual: e.residual ? k.buffer("residual", p.outDtype, "read") : undefined,
    preact: e.geluGrad ? k.buffer("preact", p.outDtype, "read") : undefined,
  };
}

/**
 * Scratch buffers a plan needs beside the caller's tensors (MatmulPlan.scratch): the split-K
 * partials (f32) and the presplit bf16 operands. Fully written before they are read.
 */
export type ScratchRole = "workspace" | "splitA" | "splitB";

/** The IR element type a buffer of `d` is declared with. */
export function irElem(d: MatmulDtype): "f32" | "f16" | "bf16" {
  return d;
}

export function activate(k: KernelBuilder, act: Activation, x: Expr): Expr {
  switch (act) {
    case "relu":
      return x.max(0);
    case "gelu":
      return geluSigmoid(k, x);
    case "silu":
      return k.let(x.div(exp(x.neg()).add(1)), "silu");
    default:
      return x;
  }
}

/**
 * The bindings of a kernel that finishes partial products (split-K reduce, stream-K fixup):
 * 0 the partials (read), 1 C (write), then the epilogue's tensors (read; epilogueRoles).
 */
export function finishBindings(k: KernelBuilder, p: NormalizedProblem, partials: "f32" | "f16") {
  const ws = k.buffer("ws", partials, "read");
  const C = k.buffer("c", p.outDtype, "write");
  const bufs = epilogueBuffers(k, p);
  const pc = k.push(PUSH_FIELDS);
  const refs: EpilogueRefs = { scale: pc.scale, ...bufs, dtype: p.outDtype };
  return { ws, C, pc, refs };
}

/**
 * Alpha's tanh-form GELU as x / (1 + exp(−2u)) (elementwise.ts gelu: the same function, no tanh).
 * NVIDIA's tanh costs ~60 instructions: H200 session 10, a fused GELU epilogue added 97 µs to a
 * 284 µs product (16384×3072×768) where SiLU's exp added 3.5.
 */
export function geluSigmoid(k: KernelBuilder, x: Expr): Expr {
  return k.let(gelu(x), "gelu");
}

/**
 * GELU's derivative at x (elementwise.ts geluGrad: the formula of the elementwise geluBackward)
 * with tanh(u) = 1 − 2/(1 + exp(2u)): the same function, equal to f32 rounding, without NVIDIA's
 * ~60-instruction tanh (see geluSigmoid: 97 µs of a 284 µs 16384×3072×768 product in tanh form,
 * the shape of GPT-2's MLP backward product this epilogue serves). exp → ∞ gives 1, exp → 0
 * gives −1: no clamp needed. x is f32 or an f32 vector (the lane-store epilogue takes 4 at once).
 */
export function geluGradExp(k: KernelBuilder, x: Expr): Expr {
  return k.let(geluGrad(x, (u) => k.let(tanhByExp(u), "th")), "dgelu");
}

export interface EpilogueRefs {
  scale: Expr;
  bias?: Buffer;
  residual?: Buffer;
  /** GELU's input, whose derivative multiplies y (Epilogue.geluGrad). */
  preact?: Buffer;
  /** Dtype of the residual and preact buffers (the output dtype; the bias buffer's is epilogue.biasDtype). */
  dtype: MatmulDtype;
}

/**
 * y = act(scale·acc + bias[col]) · gelu'(preact[outIdx]) + residual[outIdx], in f32. Reads are
 * only issued by callers for in-bounds elements (they wrap this in the bounds check).
 */
export function applyEpilogue(
  k: KernelBuilder,
  p: NormalizedProblem,
  refs: EpilogueRefs,
  acc: Expr,
  col: Expr,
  outIdx: Expr,
): Expr {
  const e = p.epilogue;
  let y = e.scale === 1 ? acc : acc.mul(refs.scale);
  if (e.bias && refs.bias) y = y.add(refs.bias.load(col).cast(f32));
  y = activate(k, e.act, k.let(y, "y"));
  if (e.geluGrad && refs.preact) y = y.mul(geluGradExp(k, k.let(refs.preact.load(outIdx).cast(f32), "pa")));
  if (e.residual && refs.residual) y = y.add(refs.residual.load(outIdx).cast(f32));
  return y;
}

/** Clamped index + zero for out-of-range loads (no out-of-bounds access ever reaches memory). */
export function guardedLoad(k: KernelBuilder, buf: Buffer, idx: Expr, valid: Expr): Expr {
  const safe = k.let(select(valid, idx, 0), "gi");
  const v = buf.load(safe);
  return select(valid, v.cast(f32), 0);
}

export function ceilDiv(a: number, b: number): number {
  return Math.floor((a + b - 1) / b);
}

/**
 * The current value of a var, read where the enclosing statement executes. (Var.get() binds a let
 * whose generated name can collide with a later var of the same hint: 'areg_1'.)
 */
export function read(v: Var): Expr {
  return new Expr({ op: "get", name: v.name }, v.type);
}

/** Tile rows per band of the grouped workgroup order (see tileOrigin). */
export const GROUP_ROWS = 8;

/**
 * The output tile of this workgroup, in grouped order: consecutive workgroups walk down a band of
 * GROUP_ROWS tile rows before moving one tile column right, so a wave of workgroups shares a few
 * A row-panels and B column-panels in L2 instead of streaming all of B (row-major order does that
 * once the grid is wider than a wave). A bijection on the [nx, ny] grid, partial last band included.
 */
export function tileOrigin(k: KernelBuilder, wg: Expr, bm: number, bn: number, groupRows = GROUP_ROWS): { row0: Expr; col0: Expr } {
  const nwg = k.let(k.numWorkgroups, "nwg");
  const nx = k.let(nwg.x, "nx");
  const ny = k.let(nwg.y, "ny");
  const pid = k.let(wg.y.mul(nx).add(wg.x), "pid");
  return groupedTile(k, pid, nx, ny, bm, bn, groupRows);
}

/** Tile `pid` of an nx × ny grid in grouped order (tileOrigin); stream-K numbers tiles this way too. */
export function groupedTile(k: KernelBuilder, pid: Expr, nx: Expr, ny: Expr, bm: number, bn: number, groupRows = GROUP_ROWS): { row0: Expr; col0: Expr } {
  const perBand = k.let(nx.mul(groupRows), "perband");
  const band = k.let(pid.div(perBand), "band");
  const firstRow = k.let(band.mul(groupRows), "firstrow");
  const rows = k.let(ny.sub(firstRow).min(groupRows), "bandrows");
  const inBand = k.let(pid.rem(perBand), "inband");
  const ty = k.let(firstRow.add(inBand.rem(rows)), "tiley");
  const tx = k.let(inBand.div(rows), "tilex");
  return { row0: k.let(ty.mul(bm), "row0"), col0: k.let(tx.mul(bn), "col0") };
}

/** No scale, bias, activation, residual or GELU gradient: the accumulator is the output. */
export function isPlainEpilogue(e: NormalizedProblem["epilogue"]): boolean {
  return e.scale === 1 && !e.bias && e.act === "none" && !e.residual && !e.geluGrad;
}

/** The epilogue part of a kernel name; every code-changing epilogue choice appears in it. */
export function epilogueTag(p: NormalizedProblem): string {
  const e = p.epilogue;
  const bias = e.bias ? `_bias${e.biasDtype !== p.outDtype ? e.biasDtype : ""}` : "";
  return `${e.scale !== 1 ? "_scale" : ""}${bias}${e.act !== "none" ? "_" + e.act : ""}${e.geluGrad ? "_dgelu" : ""}${e.residual ? "_res" : ""}`;
}
