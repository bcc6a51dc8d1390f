// Size guards. A tensor's bytes are checked against the largest buffer the device can create
// before anything is allocated (tensorBytes). Drivers drop a binding past their limit without an
// error (on the H100, a 3.3 GB f32 logits tensor read back as zeros), so every dispatch is
// checked against the binding limit before it is queued (checkBindings), and ops that could
// exceed it check up front, naming the op and the shape (checkBindable).
import type { Dtype, Shape } from "./types.js";
import { storageBytes } from "./kernels/common.js";
import { elementCount, fail, fmt, HeliosSizeError } from "./shape.js";

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

/**
 * Bytes of a tensor of `shape`/`dtype`, refused (ERR_HELIOS_OUT_OF_RANGE naming `op`, the shape and
 * the size) when the element count is not an exact JS integer or the buffer is larger than
 * `maxBytes` (the device's largest buffer, BufferPool.maxBytes). Plain arithmetic: every size
 * here may exceed 2^32.
 */
export function tensorBytes(op: string, shape: Shape, dtype: Dtype, maxBytes: number): number {
  const bytes = elementCount(op, shape) * storageBytes(dtype);
  if (bytes > maxBytes) {
    throw new HeliosSizeError(op, `tensor ${fmt(shape)} ${dtype} needs ${bytes} bytes, more than the device's largest buffer (${maxBytes} bytes, DeviceInfo.maxBufferSize)`);
  }
  return bytes;
}

/**
 * Refuses a dispatch binding a buffer past the storage-binding limit before it is queued: the
 * runtime would reject the whole packed recordDispatchMany at the next flush, dropping the
 * valid dispatches queued with it.
 */
export function checkBindings(op: string, buffers: readonly { bytes: number }[], limit: number): void {
  for (let i = 0; i < buffers.length; i++) {
    const bytes = buffers[i].bytes;
    if (bytes > limit) {
      throw new HeliosSizeError(op, `binding ${i} is a ${bytes}-byte buffer, over the device's ${limit}-byte storage-binding limit (DeviceInfo.maxBindingBytes)`);
    }
  }
}
