// Host side of reductions and softmax: shape rules, pass planning, dispatch.
import type { Dtype, TensorData } from "../types.js";
import { type Engine, run } from "../engine.js";
import type { HeliosTensor } from "../tensor.js";
import { normalizeAxis, reducedShape, size, splitAxis, fail } from "../shape.js";
import { gridRows, grid1d } from "../kernels/common.js";
import { COLSUM_PUSH, colsumKernel, planColumns, type ColumnPlan } from "../kernels/colsum.js";
import {
  REDUCE_ROWS_PUSH, REDUCE_STRIDED_PUSH, SOFTMAX_ROWS_PUSH, SOFTMAX_STRIDED_PUSH,
  reduceRowsKernel, reduceStridedKernel, softmaxRowsKernel, softmaxStridedKernel, softmaxRowsCachedKernel, cachedVpt, type ReduceFn,
} from "../kernels/reduce.js";
import { softmaxRows4Kernel, rows4Vpt } from "../kernels/rows4.js";
import { SUMSQ_MULTI_MAX, sumsqMultiKernel, sumsqMultiPush } from "../kernels/multi-tensor.js";

/** Elements one workgroup reduces in the first pass of a whole-tensor reduction. */
const CHUNK = 8192;

/**
 * Reduces a flat buffer to one value with f32 partials: pass 1 writes one partial per
 * CHUNK elements, later passes sum partials until one remains, written into `out`.
 */
function reduceFlat(E: Engine, op: string, src: TensorData, fn: ReduceFn, scale: number, out: HeliosTensor): void {
  const n = size(src.shape);
  let rows = Math.ceil(n / CHUNK);
  const final = rows === 1;
  const first = final ? out : E.alloc([rows], "f32");
  run(E, op, { reduceRows: fn, in: src.dtype, out: first.dtype }, () => reduceRowsKernel(src.dtype, first.dtype, fn),
    REDUCE_ROWS_PUSH, { rows, len: CHUNK, n, outBase: 0, scale: final ? scale : 1 }, [src], [first], gridRows(rows));
  let cur = first;
  while (cur !== out) {
    const m = rows;
    rows = Math.ceil(m / CHUNK);
    const next = rows === 1 ? out : E.alloc([rows], "f32");
    const nextFn: ReduceFn = fn === "nonfinite" || fn === "flag" ? "flag" : "sum";
    run(E, op, { reduceRows: nextFn, in: "f32", out: next.dtype }, () => reduceRowsKernel("f32", next.dtype, nextFn),
      REDUCE_ROWS_PUSH, { rows, len: CHUNK, n: m, outBase: 0, scale: rows === 1 ? scale : 1 }, [cur], [next], gridRows(rows));
    E.release(cur);
    cur = next;
  }
}

/** `outAs`: the result's dtype (default the input's): f32 sums of f16 data without an f16 rounding. */
export function sum(E: Engine, op: string, a: TensorData, axis: number | undefined, keepdims: boolean, mean: boolean, outAs?: Dtype): HeliosTensor {
  const outDtype: Dtype = outAs ?? (a.dtype === "i32" ? "i32" : a.dtype);
  if (axis === undefined) {
    const shape = keepdims ? a.shape.map(() => 1) : [];
    const n = size(a.shape);
    if (n === 0) return E.filled(shape, outDtype, mean ? NaN : 0);
    const out = E.alloc(shape, outDtype);
    reduceFlat(E, op, a, "sum", mean ? 1 / n : 1, out);
    return out;
  }
  const ax = normalizeAxis(op, axis, a.shape.length);
  const [outer, dim, inner] = splitAxis(a.shape, ax);
  const shape = reducedShape(a.shape, ax, keepdims);
  if (size(shape) === 0) return E.alloc(shape, outDtype);
  if (dim === 0) return E.filled(shape, outDtype, mean ? NaN : 0);
  const out = E.alloc(shape, outDtype);
  const scale = mean ? 1 / dim : 1;
  if (inner === 1) {
    run(E, op, { reduceRows: "sum", in: a.dtype, out: outDtype }, () => reduceRowsKernel(a.dtype, outDtype, "sum"),
      REDUCE_ROWS_PUSH, { rows: outer, len: dim, n: outer * dim, outBase: 0, scale }, [a], [out], gridRows(outer));
  } else {
    stridedSum(E, op, a, outer, dim, inner, scale, out);
  }
  return out;
}

/** Output lines below which a long reduced axis is summed as columns (colsum, two passes). */
const FEW_LINES = 16384;
/** Reduced-axis length from which the column sum pays off. */
const SPLIT_DIM = 64;

/**
 * out[o, i] = scale * sum_j a[o, j, i]. With few output lines and a long axis (bias gradients)
 * the axis is summed as columns (ts/kernels/colsum.ts): 16-byte loads, chunks of rows summed in
 * parallel into f32 partials, then one colsum over the partials; otherwise one thread per line
 * walks the axis.
 */
export function stridedSum(
  E: Engine, op: string, a: TensorData, outer: number, dim: number, inner: number, scale: number, out: HeliosTensor,
): void {
  const lines = outer * inner;
  if (lines >= FEW_LINES || dim < SPLIT_DIM) {
    run(E, op, { reduceStrided: a.dtype, out: out.dtype }, () => reduceStridedKernel(a.dtype, out.dtype),
      REDUCE_STRIDED_PUSH, { outer, dim, inner, scale }, [a], [out], grid1d(lines));
    return;
  }
  columnSum(E, op, [a], outer, dim, inner, scale, [out]);
}

/**
 * K (1 or 2) column sums of same-shaped [outer, dim, inner] sources in one plan: one colsum when
 * the plan has one chunk, else chunk partials then one colsum folding them (both sums in one
 * dispatch each).
 */
export function columnSum(
  E: Engine, op: string, srcs: TensorData[], outer: number, dim: number, inner: number, scale: number, outs: HeliosTensor[],
): void {
  const k = srcs.length as 1 | 2;
  const dtype = srcs[0].dtype, outDtype = outs[0].dtype;
  const p = planColumns(dtype, outer, dim, inner);
  if (p.chunks === 1) {
    colsum(E, op, dtype, outDtype, k, p, { dim, inner, chunk: p.chunk, chunks: 1, scale }, srcs, outs);
    return;
  }
  const parts = srcs.map(() => E.alloc([outer, p.chunks, inner], "f32"));
  colsum(E, op, dtype, "f32", k, p, { dim, inner, chunk: p.chunk, chunks: p.chunks, scale: 1 }, srcs, parts);
  foldPartials(E, op, parts, outer, inner, scale, outs);
}

/** outs = scale * the sums over axis 1 of f32 partials [outer, chunks, inner], in one colsum. */
export function foldPartials(E: Engine, op: string, parts: HeliosTensor[], outer: number, inner: number, scale: number, outs: HeliosTensor[]): void {
  const chunks = parts[0].shape[1];
  const q = planColumns("f32", outer, chunks, inner, { maxChunks: 1 });
  colsum(E, op, "f32", outs[0].dtype, parts.length as 1 | 2, q, { dim: chunks, inner, chunk: chunks, chunks: 1, scale }, parts, outs);
  for (const t of parts) E.release(t);
}

function colsum(
  E: Engine, op: string, dtype: Dtype, outDtype: Dtype, k: 1 | 2, p: ColumnPlan, push: Record<string, number>,
  srcs: TensorData[], outs: HeliosTensor[],
): void {
  run(E, op, { colsum: dtype, out: outDtype, vec: p.vec, tx: p.tx, k }, () => colsumKernel(dtype, outDtype, p.vec, p.tx, k),
    COLSUM_PUSH, push, srcs, outs, p.groups);
}

export function sumOfSquares(E: Engine, a: TensorData): HeliosTensor {
  const out = E.alloc([], "f32");
  if (size(a.shape) === 0) return E.filled([], "f32", 0);
  reduceFlat(E, "sumOfSquares", a, "sumsq", 1, out);
  return out;
}

/**
 * One partials buffer for every tensor, then a single final reduction: one readback. The partials
 * come from one reduce_rows per tensor, or (HELIOS_MULTI_TENSOR_ADAMW, default) from sumsq_multi
 * over groups of up to SUMSQ_MULTI_MAX tensors, which writes the same partials bit for bit.
 */
export function totalSumOfSquares(E: Engine, ts: TensorData[]): HeliosTensor {
  const live = ts.filter((t) => size(t.shape) > 0);
  if (live.length === 0) return E.filled([], "f32", 0);
  const rowsOf = live.map((t) => Math.ceil(size(t.shape) / CHUNK));
  const total = rowsOf.reduce((p, q) => p + q, 0);
  const partials = E.alloc([total], "f32");
  let base = 0;
  if (E.config.multiTensorAdamw) {
    for (let at = 0; at < live.length; at += SUMSQ_MULTI_MAX) {
      const group = live.slice(at, at + SUMSQ_MULTI_MAX);
      const rows = rowsOf.slice(at, at + SUMSQ_MULTI_MAX).reduce((p, q) => p + q, 0);
      const dtypes = group.map((t) => t.dtype);
      const push: Record<string, number> = { rows, len: CHUNK, outBase: base };
      group.forEach((t, j) => (push[`n${j}`] = size(t.shape)));
      run(E, "totalSumOfSquares", { sumsqMulti: dtypes }, () => sumsqMultiKernel(dtypes), sumsqMultiPush(group.length),
        push, group, [partials], gridRows(rows));
      base += rows;
    }
  } else {
    live.forEach((t, i) => {
      run(E, "totalSumOfSquares", { reduceRows: "sumsq", in: t.dtype, out: "f32" }, () => reduceRowsKernel(t.dtype, "f32", "sumsq"),
        REDUCE_ROWS_PUSH, { rows: rowsOf[i], len: CHUNK, n: size(t.shape), outBase: base, scale: 1 }, [t], [partials], gridRows(rowsOf[i]));
      base += rowsOf[i];
    });
  }
  const out = E.alloc([], "f32");
  reduceFlat(E, "totalSumOfSquares", partials, "sum", 1, out);
  E.release(partials);
  return out;
}

export function checkFinite(E: Engine, a: TensorData): HeliosTensor {
  if (size(a.shape) === 0) return E.filled([], "f32", 0);
  if (a.dtype === "i32") return E.filled([], "f32", 0);
  const out = E.alloc([], "f32");
  reduceFlat(E, "checkFinite", a, "nonfinite", 1, out);
  return out;
}

export function softmax(E: Engine, op: string, a: TensorData, axis: number | undefined, logOut: boolean): HeliosTensor {
  if (a.dtype === "i32") fail(op, "expects a floating-point tensor, got i32");
  if (a.shape.length === 0) fail(op, "needs a tensor of rank >= 1, got a scalar");
  const ax = normalizeAxis(op, axis ?? -1, a.shape.length);
  const out = E.alloc(a.shape, a.dtype);
  const [outer, dim, inner] = splitAxis(a.shape, ax);
  if (size(a.shape) === 0) return out;
  const vpt = cachedVpt(dim);
  const v4 = rows4Vpt(dim);
  const sg = E.subgroups;
  if (inner === 1 && v4 > 0) {
    run(E, op, { softmaxRows4: a.dtype, log: logOut, v4, sg }, () => softmaxRows4Kernel(a.dtype, logOut, v4, sg),
      SOFTMAX_ROWS_PUSH, { rows: outer, dim }, [a], [out], gridRows(outer));
  } else if (inner === 1 && vpt > 0) {
    run(E, op, { softmaxRowsCached: a.dtype, log: logOut, vpt, sg }, () => softmaxRowsCachedKernel(a.dtype, logOut, vpt, sg),
      SOFTMAX_ROWS_PUSH, { rows: outer, dim }, [a], [out], gridRows(outer));
  } else if (inner === 1) {
    run(E, op, { softmaxRows: a.dtype, log: logOut }, () => softmaxRowsKernel(a.dtype, logOut),
      SOFTMAX_ROWS_PUSH, { rows: outer, dim }, [a], [out], gridRows(outer));
  } else {
    run(E, op, { softmaxStrided: a.dtype, log: logOut }, () => softmaxStridedKernel(a.dtype, logOut),
      SOFTMAX_STRIDED_PUSH, { outer, dim, inner }, [a], [out], grid1d(outer * inner));
  }
  return out;
}
