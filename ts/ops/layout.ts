// Host side of data movement: every layout op is one or more strided copies.
import type { Dtype, Shape, TensorData } from "../types.js";
import { type Engine, run } from "../engine.js";
import { HeliosTensor } from "../tensor.js";
import { broadcastStrides, checkSlice, contiguousStrides, fail, fmt, normalizeAxis, size } from "../shape.js";
import { collapse } from "../fusion/plan.js";
import { grid1d, gridRows } from "../kernels/common.js";
import { COPY_PUSH, COPY_RANK, copyStridedKernel, copyStridedV128Kernel } from "../kernels/copy.js";
import {
  CAST_T_MULTI_MAX, CAST_T_TILE, CAST_T_TILES, castTransposeMultiKernel, castTransposeMultiPush,
} from "../kernels/multi-tensor.js";

/**
 * dst[dstBase + c.t] = src[srcBase + c.s] for every coordinate c of `dims`. Dims that
 * every side walks contiguously merge, so ranks above COPY_RANK are rare; when they still
 * remain the copy splits over the leading dim.
 */
export function copyStrided(
  E: Engine, op: string, src: TensorData, dst: HeliosTensor, dims: Shape,
  srcStrides: number[], dstStrides: number[], srcBase = 0, dstBase = 0,
): void {
  const n = size(dims);
  if (n === 0) return;
  const c = collapse(dims, [srcStrides, dstStrides]);
  if (c.dims.length > COPY_RANK) {
    for (let i = 0; i < c.dims[0]; i++) {
      copyStrided(E, op, src, dst, c.dims.slice(1), c.strides[0].slice(1), c.strides[1].slice(1),
        srcBase + i * c.strides[0][0], dstBase + i * c.strides[1][0]);
    }
    return;
  }
  const st = src.dtype === "f64" ? "f32" : src.dtype;
  // 16-byte chunks when the innermost dim is contiguous on both sides and everything is
  // chunk-aligned (the head transposes of attention, slices of rows, cat along rows)
  const v = 16 / (st === "f16" ? 2 : 4);
  const last = c.dims.length - 1;
  const chunked = v > 1 && c.strides[0][last] === 1 && c.strides[1][last] === 1 && c.dims[last] % v === 0 &&
    srcBase % v === 0 && dstBase % v === 0 && c.strides.every((ss) => ss.every((x, d) => d === last || x % v === 0));
  const w = chunked ? v : 1;
  const pad = COPY_RANK - c.dims.length;
  const push: Record<string, number> = { n: n / w, srcBase: srcBase / w, dstBase: dstBase / w };
  for (let d = 0; d < COPY_RANK; d++) {
    const inside = d >= pad;
    const innermost = chunked && d - pad === last;
    push[`d${d}`] = inside ? (innermost ? c.dims[last] / w : c.dims[d - pad]) : 1;
    push[`s${d}`] = inside ? (innermost ? 1 : c.strides[0][d - pad] / w) : 0;
    push[`t${d}`] = inside ? (innermost ? 1 : c.strides[1][d - pad] / w) : 0;
  }
  if (chunked) {
    run(E, op, { copy: st, v128: true }, () => copyStridedV128Kernel(src.dtype), COPY_PUSH, push, [src], [dst], grid1d(n / w));
  } else {
    run(E, op, { copy: st }, () => copyStridedKernel(src.dtype), COPY_PUSH, push, [src], [dst], grid1d(n));
  }
}

export function transpose(E: Engine, a: TensorData, d0: number, d1: number): HeliosTensor {
  const op = "transpose";
  const nd = a.shape.length;
  const x = normalizeAxis(op, d0, nd);
  const y = normalizeAxis(op, d1, nd);
  const shape = [...a.shape];
  [shape[x], shape[y]] = [shape[y], shape[x]];
  const out = E.alloc(shape, a.dtype);
  const ss = contiguousStrides(a.shape);
  [ss[x], ss[y]] = [ss[y], ss[x]];
  copyStrided(E, op, a, out, shape, ss, contiguousStrides(shape));
  return out;
}

export function slice(E: Engine, a: TensorData, starts: number[], ends: number[]): HeliosTensor {
  const shape = checkSlice("slice", a.shape, starts, ends);
  const out = E.alloc(shape, a.dtype);
  const st = contiguousStrides(a.shape);
  const base = starts.reduce((p, s, d) => p + s * st[d], 0);
  copyStrided(E, "slice", a, out, shape, st, contiguousStrides(shape), base, 0);
  return out;
}

export function scatterSlice(E: Engine, g: TensorData, orig: Shape, starts: number[], ends: number[]): HeliosTensor {
  const op = "scatterSlice";
  const shape = checkSlice(op, orig, starts, ends);
  if (shape.join() !== g.shape.join()) fail(op, `grad ${fmt(g.shape)} does not match the slice ${fmt(shape)} of ${fmt(orig)}`);
  const out = E.filled(orig, g.dtype, 0);
  const st = contiguousStrides(orig);
  const base = starts.reduce((p, s, d) => p + s * st[d], 0);
  copyStrided(E, op, g, out, shape, contiguousStrides(shape), st, 0, base);
  return out;
}

export function sliceQkv(E: Engine, a: TensorData): [HeliosTensor, HeliosTensor, HeliosTensor] {
  const op = "sliceQkv";
  if (a.shape.length !== 2 || a.shape[1] % 3 !== 0) fail(op, `expects [rows, 3*D], got ${fmt(a.shape)}`);
  const [rows, w] = a.shape;
  const D = w / 3;
  return [0, 1, 2].map((p) => {
    const out = E.alloc([rows, D], a.dtype);
    copyStrided(E, op, a, out, [rows, D], [w, 1], [D, 1], p * D, 0);
    return out;
  }) as [HeliosTensor, HeliosTensor, HeliosTensor];
}

export function cat(E: Engine, ts: TensorData[], axis: number): HeliosTensor {
  const op = "cat";
  if (!Array.isArray(ts) || ts.length === 0) fail(op, "needs at least one tensor");
  const nd = ts[0].shape.length;
  const ax = normalizeAxis(op, axis, nd);
  const shape = [...ts[0].shape];
  for (let t = 1; t < ts.length; t++) {
    const s = ts[t].shape;
    if (s.length !== nd) fail(op, `rank mismatch: ${fmt(ts[0].shape)} vs ${fmt(s)}`);
    if (ts[t].dtype !== ts[0].dtype) fail(op, `dtype mismatch: ${ts[0].dtype} vs ${ts[t].dtype}`);
    for (let d = 0; d < nd; d++) {
      if (d === ax) shape[d] += s[d];
      else if (s[d] !== shape[d]) fail(op, `shapes ${fmt(ts[0].shape)} and ${fmt(s)} differ at dim ${d}`);
    }
  }
  const out = E.alloc(shape, ts[0].dtype);
  const ost = contiguousStrides(shape);
  let off = 0;
  for (const t of ts) {
    copyStrided(E, op, t, out, t.shape, contiguousStrides(t.shape), ost, 0, off * ost[ax]);
    off += t.shape[ax];
  }
  return out;
}

/** dst[offset + i] = src[i] over src's elements, in place (dst a device tensor of the same dtype). */
export function copyInto(E: Engine, dst: TensorData, offset: number, src: TensorData): void {
  const op = "copyInto";
  if (!(dst instanceof HeliosTensor)) fail(op, "the destination must be a tensor of this backend");
  if (dst.dtype !== src.dtype) fail(op, `dtype mismatch: ${dst.dtype} vs ${src.dtype}`);
  const n = size(src.shape);
  if (!Number.isSafeInteger(offset) || offset < 0 || offset + n > size(dst.shape)) {
    fail(op, `elements ${offset}..${offset + n} lie outside the destination ${fmt(dst.shape)}`);
  }
  E.materialize(dst);
  copyStrided(E, op, src, dst, [n], [1], [1], 0, offset);
}

export function broadcast(E: Engine, a: TensorData, target: Shape): HeliosTensor {
  const op = "broadcast";
  const st = broadcastStrides(op, a.shape, target);
  const out = E.alloc(target, a.dtype);
  copyStrided(E, op, a, out, target, st, contiguousStrides(target));
  return out;
}

export function clone(E: Engine, a: TensorData): HeliosTensor {
  // floats: a pending copy (fuses into its reader, or takes the buffer over if the source is
  // released first: Engine.materialize); i32 goes through f32 in fused kernels, so it copies now
  if (a.dtype !== "i32") return E.unary("clone", a, "copy");
  const out = E.alloc(a.shape, a.dtype);
  copyStrided(E, "clone", a, out, a.shape, contiguousStrides(a.shape), contiguousStrides(a.shape));
  return out;
}

export function reshape(E: Engine, a: TensorData, shape: Shape): HeliosTensor {
  const op = "reshape";
  let inferred = [...shape];
  const neg = inferred.filter((d) => d === -1).length;
  if (neg > 1) fail(op, `at most one -1 in ${fmt(shape)}`);
  if (neg === 1) {
    const known = inferred.filter((d) => d !== -1).reduce((p, q) => p * q, 1);
    inferred = inferred.map((d) => (d === -1 ? (known === 0 ? 0 : size(a.shape) / known) : d));
  }
  for (const d of inferred) if (!Number.isInteger(d) || d < 0) fail(op, `cannot reshape ${fmt(a.shape)} to ${fmt(shape)}`);
  if (size(inferred) !== size(a.shape)) fail(op, `cannot reshape ${fmt(a.shape)} to ${fmt(shape)}: size mismatch`);
  return E.viewOrUpload(op, a, inferred);
}

export function castDtype(E: Engine, a: TensorData, dtype: Dtype): TensorData {
  if (a.dtype === dtype) return a;
  const out = E.unary("castDtype", a, "copy", [], dtype);
  // A narrowing cast is stored now: fused expressions compute in f32 (a pending f16 cast read
  // by a later expression would skip the rounding), and a pending cast would keep the wider
  // source alive (Alpha casts activations to f16 to halve their memory).
  if (dtype === "f16") E.materialize(out);
  return out;
}

/** A matrix in another dtype and its transpose in that dtype (castTransposeMulti). */
export interface CastPair {
  cast: TensorData;
  transposed: TensorData;
}

/**
 * For each 2-D tensor W [r, k]: W as `dtype` and its transpose [k, r] as `dtype`, new tensors
 * equal bit for bit to castDtype(W, dtype) and transpose(castDtype(W, dtype), 0, 1) (the
 * trainer's per-step f16 weight copies). HELIOS_MULTI_TENSOR_CAST (default on): both copies of up
 * to CAST_T_MULTI_MAX tensors per cast_transpose_multi dispatch; off: those two ops per tensor.
 */
export function castTransposeMulti(E: Engine, ws: TensorData[], dtype: Dtype): CastPair[] {
  const op = "castTransposeMulti";
  if (!Array.isArray(ws)) fail(op, "expects an array of tensors");
  if (dtype === "i32") fail(op, "dtype must be a floating-point dtype, got i32");
  ws.forEach((w, i) => {
    if (w.shape.length !== 2) fail(op, `tensor ${i}: expects a 2-D tensor, got ${fmt(w.shape)}`);
    if (w.dtype === "i32") fail(op, `tensor ${i}: expects a floating-point tensor, got i32`);
  });
  if (!E.config.multiTensorCast) {
    return ws.map((w) => {
      const cast = w.dtype === dtype ? clone(E, w) : castDtype(E, w, dtype);
      return { cast, transposed: transpose(E, cast, 0, 1) };
    });
  }
  const pairs = ws.map((w) => ({ cast: E.alloc(w.shape, dtype, op), transposed: E.alloc([w.shape[1], w.shape[0]], dtype, op) }));
  const live = ws.map((w, i) => ({ w, p: pairs[i] })).filter(({ w }) => size(w.shape) > 0);
  for (let at = 0; at < live.length; at += CAST_T_MULTI_MAX) {
    const group = live.slice(at, at + CAST_T_MULTI_MAX);
    const dtypes = group.map(({ w }) => w.dtype);
    const push: Record<string, number> = { blocks: 0 };
    group.forEach(({ w }, j) => {
      const [r, k] = w.shape;
      push[`r${j}`] = r;
      push[`k${j}`] = k;
      push.blocks += Math.ceil((Math.ceil(r / CAST_T_TILE) * Math.ceil(k / CAST_T_TILE)) / CAST_T_TILES);
    });
    run(E, op, { castTransposeMulti: dtypes, out: dtype }, () => castTransposeMultiKernel(dtypes, dtype),
      castTransposeMultiPush(group.length), push, group.map(({ w }) => w),
      [...group.map(({ p }) => p.cast), ...group.map(({ p }) => p.transposed)], gridRows(push.blocks));
  }
  return pairs;
}
