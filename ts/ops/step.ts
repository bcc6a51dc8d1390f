// Host side of the per-step ops whose scalars live in device tensors (kernels/step.ts): what a
// captured training step needs so that each replay uses the current step's values.
import type { Shape, TensorData } from "../types.js";
import { type Engine, run } from "../engine.js";
import { HeliosTensor } from "../tensor.js";
import { checkShape, fail, fmt, size } from "../shape.js";
import { grid1d } from "../kernels/common.js";
import { ADAMW_DEVICE_PUSH, ADAMW_HYPER, DROPOUT_AT_PUSH, adamwDeviceKernel, dropoutMaskAtKernel } from "../kernels/step.js";

export function deviceTensor(op: string, what: string, t: TensorData): HeliosTensor {
  if (!(t instanceof HeliosTensor)) fail(op, `${what} must be a device tensor (it is updated in place)`);
  if (t.released) fail(op, `${what} ${fmt(t.shape)} was already released (releaseGpuTensor)`);
  return t;
}

/**
 * AdamW updating params, m and v in place, with lr, the bias corrections, gradScale and a skip
 * flag read from `hyper` (f32 [5]). Expressions recorded earlier that read params, m or v must
 * have been materialized (the trainer's are): the buffers change under them.
 */
export function adamwStepDevice(
  E: Engine, p: TensorData, g: TensorData, m: TensorData, v: TensorData, hyper: TensorData,
  beta1: number, beta2: number, eps: number, wd: number,
): void {
  const op = "adamwStepDevice";
  const n = size(p.shape);
  for (const [what, t] of [["grads", g], ["m", m], ["v", v]] as const) {
    if (size(t.shape) !== n) fail(op, `${what} ${fmt(t.shape)} does not match params ${fmt(p.shape)}`);
  }
  if (m.dtype !== "f32" || v.dtype !== "f32") fail(op, `m and v must be f32, got ${m.dtype} and ${v.dtype}`);
  if (p.dtype === "i32" || g.dtype === "i32") fail(op, "params and grads must be floating point");
  if (hyper.dtype !== "f32" || size(hyper.shape) !== ADAMW_HYPER) {
    fail(op, `hyper must be f32 [${ADAMW_HYPER}] (lr, bc1, bc2, gradScale, skip), got ${hyper.dtype} ${fmt(hyper.shape)}`);
  }
  const ps = [deviceTensor(op, "params", p), deviceTensor(op, "m", m), deviceTensor(op, "v", v)];
  if (n === 0) return;
  for (const t of ps) E.materialize(t);
  const pipeline = E.kernel({ adamwDevice: [p.dtype, g.dtype] }, () => adamwDeviceKernel(p.dtype, g.dtype));
  E.withInputs(op, [p, g, m, v, hyper], ([bp, bg, bm, bv, bh]) => {
    E.dispatch(pipeline, [bp, bg, bm, bv, bh], grid1d(n), ADAMW_DEVICE_PUSH, { n, beta1, beta2, eps, wd }, ps);
  });
}

/** dropoutMask with counter = counter[0] + offset, counter an i32 [1] device tensor. */
export function dropoutMaskAt(E: Engine, shape: Shape, seed: number, counter: TensorData, offset: number, p: number): HeliosTensor {
  const op = "dropoutMaskAt";
  checkShape(op, shape);
  if (!(p >= 0 && p < 1)) fail(op, `p=${p} must be in [0, 1)`);
  if (counter.dtype !== "i32" || size(counter.shape) !== 1) fail(op, `counter must be i32 [1], got ${counter.dtype} ${fmt(counter.shape)}`);
  if (!Number.isInteger(offset) || offset < 0) fail(op, `offset ${offset} must be a non-negative integer`);
  const out = E.alloc(shape, "f32");
  const n = size(shape);
  if (n === 0) return out;
  const threshold = Math.min(0xffffffff, Math.floor(p * 4294967296));
  // (seed + offset * 2654435761) mod 2^32, exactly: Math.imul wraps the product to 32 bits.
  const folded = ((seed | 0) + Math.imul(offset | 0, 2654435761 | 0)) >>> 0;
  run(E, op, { dropoutAt: 1 }, dropoutMaskAtKernel, DROPOUT_AT_PUSH, { n, seed: folded, threshold, keep: Math.fround(1 / (1 - p)) }, [counter], [out], grid1d(n));
  return out;
}
