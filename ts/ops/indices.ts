// Index tensors: host-visible indices are range-checked before the GPU sees them (an Error
// naming the op and the shapes); device-only ones are clamped in-kernel and reported.
import type { TensorData } from "../types.js";
import { HeliosTensor } from "../tensor.js";
import { fail, fmt } from "../shape.js";
import { currentHostValues } from "../resident.js";

/** The host copy of an index tensor, or null when it only lives on the device. */
export function hostIndices(t: TensorData): ArrayLike<number> | null {
  if (t instanceof HeliosTensor) return t.currentHost;
  return currentHostValues(t);
}

export function checkIndices(op: string, idx: TensorData, hi: number, what: string): void {
  if (idx.dtype !== "i32") fail(op, `${what} must be i32, got ${idx.dtype} ${fmt(idx.shape)}`);
  const h = hostIndices(idx);
  if (!h) return;
  for (let i = 0; i < h.length; i++) {
    const v = h[i];
    if (!(v >= 0 && v < hi)) fail(op, `${what}[${i}] = ${v} is out of range [0, ${hi}) (${what} ${fmt(idx.shape)})`);
  }
}

/** Per-value position lists of an index array (CSR): positions of value v are positions[offsets[v] .. offsets[v + 1]). */
export interface IndexCsr {
  /** [hi + 1]: offsets[0] = 0, offsets[hi] = the index count. */
  offsets: Int32Array;
  /** [count]: each value's positions in increasing order. */
  positions: Int32Array;
}

/**
 * Counting sort of `host` (values in [0, hi)) into per-value position lists, each in increasing
 * position order: the summation order of the CSR embedding backward. A value out of range is an
 * Error naming `op` and the position.
 */
export function indexCsr(op: string, host: ArrayLike<number>, hi: number): IndexCsr {
  const count = host.length;
  const offsets = new Int32Array(hi + 1);
  for (let i = 0; i < count; i++) {
    const v = host[i];
    if (!(v >= 0 && v < hi)) fail(op, `indices[${i}] = ${v} is out of range [0, ${hi})`);
    offsets[v + 1]++;
  }
  for (let v = 0; v < hi; v++) offsets[v + 1] += offsets[v];
  const fill = offsets.slice(0, hi);
  const positions = new Int32Array(count);
  for (let i = 0; i < count; i++) positions[fill[host[i]]++] = i;
  return { offsets, positions };
}
