// Shape rules shared by every op: broadcasting (NumPy), axis normalization, contiguous
// strides, and the errors that name the op and the shapes. No GPU knowledge here.

import type { Shape } from "./types.js";

export class HeliosShapeError extends Error {
  readonly code = "ERR_HELIOS_SHAPE";
  constructor(op: string, detail: string) {
    super(`${op}: ${detail}`);
    this.name = "HeliosShapeError";
  }
}

/**
 * A size past what this device or JS arithmetic can hold (elements beyond 2^53 - 1, bytes beyond
 * the largest buffer or binding, a u32 push constant that would wrap). Same code as the
 * runtime's own size refusals.
 */
export class HeliosSizeError extends Error {
  readonly code = "ERR_HELIOS_OUT_OF_RANGE";
  constructor(op: string, detail: string) {
    super(`${op}: ${detail}`);
    this.name = "HeliosSizeError";
  }
}

export function fmt(shape: Shape): string {
  return `[${shape.join(", ")}]`;
}

export function fail(op: string, detail: string): never {
  throw new HeliosShapeError(op, detail);
}

export function checkShape(op: string, shape: Shape, what = "shape"): void {
  if (!Array.isArray(shape) && !ArrayBuffer.isView(shape)) fail(op, `${what} must be an array`);
  for (const d of shape) {
    if (!Number.isInteger(d) || d < 0) fail(op, `${what} ${fmt(shape)} has a dimension that is not a non-negative integer`);
  }
  elementCount(op, shape);
}

/** The element count of `shape`, refused when it is not an exact JS integer (past 2^53 - 1). */
export function elementCount(op: string, shape: Shape): number {
  const n = size(shape);
  if (!Number.isSafeInteger(n)) {
    throw new HeliosSizeError(op, `shape ${fmt(shape)} has ${n} elements, more than 2^53 - 1 (Number.MAX_SAFE_INTEGER)`);
  }
  return n;
}

export function size(shape: Shape): number {
  let n = 1;
  for (const d of shape) n *= d;
  return n;
}

export function contiguousStrides(shape: Shape): number[] {
  const s = new Array<number>(shape.length);
  let acc = 1;
  for (let i = shape.length - 1; i >= 0; i--) {
    s[i] = acc;
    acc *= shape[i];
  }
  return s;
}

export function sameShape(a: Shape, b: Shape): boolean {
  if (a.length !== b.length) return false;
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return false;
  return true;
}

/** NumPy broadcast of two shapes; throws naming the op when they are incompatible. */
export function broadcastShape(op: string, a: Shape, b: Shape): number[] {
  const n = Math.max(a.length, b.length);
  const out = new Array<number>(n);
  for (let i = 0; i < n; i++) {
    const da = i < n - a.length ? 1 : a[i - (n - a.length)];
    const db = i < n - b.length ? 1 : b[i - (n - b.length)];
    if (da !== db && da !== 1 && db !== 1) {
      fail(op, `shapes ${fmt(a)} and ${fmt(b)} cannot be broadcast together (dim ${i}: ${da} vs ${db})`);
    }
    out[i] = da === 1 ? db : da;
  }
  return out;
}

/**
 * Element strides of `from` viewed as `to` (right-aligned); broadcast dimensions get 0.
 * Throws when `from` cannot broadcast to `to`.
 */
export function broadcastStrides(op: string, from: Shape, to: Shape): number[] {
  if (from.length > to.length) fail(op, `cannot broadcast ${fmt(from)} to ${fmt(to)}`);
  const src = contiguousStrides(from);
  const out = new Array<number>(to.length).fill(0);
  const off = to.length - from.length;
  for (let i = 0; i < from.length; i++) {
    if (from[i] === to[i + off]) out[i + off] = from[i] === 1 ? 0 : src[i];
    else if (from[i] === 1) out[i + off] = 0;
    else fail(op, `cannot broadcast ${fmt(from)} to ${fmt(to)}`);
  }
  return out;
}

export function normalizeAxis(op: string, axis: number, ndim: number): number {
  if (!Number.isInteger(axis)) fail(op, `axis ${axis} is not an integer`);
  const a = axis < 0 ? axis + ndim : axis;
  if (a < 0 || a >= ndim) fail(op, `axis ${axis} is out of range for a tensor of rank ${ndim}`);
  return a;
}

/**
 * Splits a shape around `axis` into [outer, dim, inner]: element (o, j, i) sits at
 * o*dim*inner + j*inner + i. Reductions and softmax over any axis use this view.
 */
export function splitAxis(shape: Shape, axis: number): [number, number, number] {
  let outer = 1;
  let inner = 1;
  for (let i = 0; i < axis; i++) outer *= shape[i];
  for (let i = axis + 1; i < shape.length; i++) inner *= shape[i];
  return [outer, shape[axis], inner];
}

export function reducedShape(shape: Shape, axis: number, keepdims: boolean): number[] {
  const out: number[] = [];
  for (let i = 0; i < shape.length; i++) {
    if (i !== axis) out.push(shape[i]);
    else if (keepdims) out.push(1);
  }
  return out;
}

/** Validates slice bounds; unlike Alpha's reference, out-of-range bounds are errors. */
export function checkSlice(op: string, shape: Shape, starts: readonly number[], ends: readonly number[]): number[] {
  if (starts.length !== shape.length || ends.length !== shape.length) {
    fail(op, `starts [${starts}] and ends [${ends}] must both have rank ${shape.length} for shape ${fmt(shape)}`);
  }
  const out = new Array<number>(shape.length);
  for (let d = 0; d < shape.length; d++) {
    const s = starts[d];
    const e = ends[d];
    if (!Number.isInteger(s) || !Number.isInteger(e) || s < 0 || e < s || e > shape[d]) {
      fail(op, `bounds [${s}, ${e}) at dim ${d} are outside shape ${fmt(shape)}`);
    }
    out[d] = e - s;
  }
  return out;
}

/** Batched-matmul shape: [...batch, M, K] x [...batch, K, N] with broadcast batch dims. */
export interface MatmulGeometry {
  readonly outShape: number[];
  readonly batch: number;
  readonly m: number;
  readonly n: number;
  readonly k: number;
  /** Element offset between consecutive batches of each operand (0 when broadcast). */
  readonly batchStrideA: number;
  readonly batchStrideB: number;
  /** Non-null when batch broadcasting is not expressible as one stride per operand. */
  readonly batchIndex: null | { shape: number[]; stridesA: number[]; stridesB: number[] };
}

/**
 * transA/transB say whether the stored operand is the transpose of the logical one:
 * transB means b is stored [..., N, K] (matmulTransposed), transA means a is stored
 * [..., K, M] (matmulTransposedA).
 */
export function matmulGeometry(op: string, a: Shape, b: Shape, transA: boolean, transB: boolean): MatmulGeometry {
  if (a.length < 2 || b.length < 2) fail(op, `needs tensors of rank >= 2, got ${fmt(a)} x ${fmt(b)}`);
  const m = transA ? a[a.length - 1] : a[a.length - 2];
  const ka = transA ? a[a.length - 2] : a[a.length - 1];
  const kb = transB ? b[b.length - 1] : b[b.length - 2];
  const n = transB ? b[b.length - 2] : b[b.length - 1];
  if (ka !== kb) fail(op, `inner dimensions differ: ${fmt(a)} x ${fmt(b)} (${ka} vs ${kb})`);
  const ba = a.slice(0, -2);
  const bb = b.slice(0, -2);
  const batchShape = broadcastShape(op, ba, bb);
  const batch = size(batchShape);
  const sa = broadcastStrides(op, ba, batchShape).map((s) => s * m * ka);
  const sb = broadcastStrides(op, bb, batchShape).map((s) => s * kb * n);
  const flat = collapseBatch(batchShape, sa, sb);
  return {
    outShape: [...batchShape, m, n],
    batch, m, n, k: ka,
    batchStrideA: flat ? flat[0] : 0,
    batchStrideB: flat ? flat[1] : 0,
    batchIndex: flat ? null : { shape: batchShape, stridesA: sa, stridesB: sb },
  };
}

/** One stride per operand when the batch dims flatten to a single linear index. */
function collapseBatch(shape: number[], sa: number[], sb: number[]): [number, number] | null {
  const dims = shape.map((d, i) => [d, sa[i], sb[i]] as const).filter(([d]) => d !== 1);
  if (dims.length === 0) return [0, 0];
  let [, strideA, strideB] = dims[dims.length - 1];
  let span = 1;
  for (let i = dims.length - 1; i >= 0; i--) {
    const [d, a, b] = dims[i];
    if (a !== strideA * span || b !== strideB * span) return null;
    span *= d;
  }
  return [strideA, strideB];
}
