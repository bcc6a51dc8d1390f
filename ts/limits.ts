// Size guard for tensors a kernel binds as one storage buffer. Drivers drop a binding past
// their limit without an error (on the H100, a 3.3 GB f32 logits tensor read back as zeros),
// and the runtime refuses such dispatches by pipeline label; this names the op and the shape.
import type { Dtype, Shape } from "./types.js";
import { storageBytes } from "./kernels/common.js";
import { fail, fmt } from "./shape.js";

/** The device's binding limit in bytes (DeviceInfo.maxBindingBytes; unlimited when absent). */
export function bindingLimit(info: object): number {
  const v = (info as { maxBindingBytes?: unknown }).maxBindingBytes;
  return typeof v === "number" && v > 0 ? v : Infinity;
}

/** Throws when a tensor of `shape`/`dtype` that `op` binds is over `limit` bytes. */
export function checkBindable(op: string, what: string, shape: Shape, dtype: Dtype, limit: number): void {
  if (limit === Infinity) return;
  let n = 1;
  for (const d of shape) n *= d;
  const bytes = n * storageBytes(dtype);
  if (bytes > limit) {
    fail(op, `${what} ${fmt(shape)} ${dtype} is ${bytes} bytes, over the device's ${limit}-byte storage-binding limit (DeviceInfo.maxBindingBytes): split the work, e.g. in row chunks`);
  }
}

/** Output shape of a (possibly batched) matmul, for the guard. */
export function matmulOutShape(a: Shape, b: Shape, transA: boolean, transB: boolean): Shape {
  const m = transA ? a[a.length - 1] : a[a.length - 2];
  const n = transB ? b[b.length - 2] : b[b.length - 1];
  const batch = (a.length >= b.length ? a : b).slice(0, -2);
  return [...batch, m ?? 1, n ?? 1];
}
