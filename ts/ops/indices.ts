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
