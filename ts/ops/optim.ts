// In-place ops: computed out of place, then the target tensor is rebound to the result
// (Engine.rebind), so fused expressions recorded earlier still read the old values.
// Plain host tensors (TensorData objects the caller made) are updated in their device copy
// (ts/resident.ts); only one whose `data` cannot be redefined is updated through its array, a
// GPU round trip counted as a CPU fallback ("hostInplace") in stats().
import type { TensorData } from "../types.js";
import { type Engine, run } from "../engine.js";
import { HeliosTensor } from "../tensor.js";
import { fail, fmt, size } from "../shape.js";
import { grid1d } from "../kernels/common.js";
import { ADAMW_PUSH, adamwKernel } from "../kernels/optim.js";
import { markDeviceNewer, residentDevice } from "../resident.js";

function assign(E: Engine, op: string, target: TensorData, next: HeliosTensor): void {
  if (target instanceof HeliosTensor) {
    if (target.released) fail(op, `tensor ${fmt(target.shape)} was already released (releaseGpuTensor)`);
    E.materialize(next);
    E.rebind(target, next);
    return;
  }
  // a plain host tensor: its device copy is updated, the host array refreshed when read
  const resident = residentDevice(E, target);
  if (resident) {
    E.materialize(next);
    E.rebind(resident, next);
    markDeviceNewer(target);
    return;
  }
  E.countFallback("hostInplace");
  (target.data as Float32Array).set(next.data as Float32Array);
  E.release(next);
}

export function addInplace(E: Engine, a: TensorData, b: TensorData): void {
  const r = E.binary("addInplace", a, b, "add", [], a.dtype);
  if (r.shape.join() !== a.shape.join()) fail("addInplace", `b ${fmt(b.shape)} must broadcast to a ${fmt(a.shape)}`);
  assign(E, "addInplace", a, r);
}

export function scaleInplace(E: Engine, a: TensorData, s: number): void {
  assign(E, "scaleInplace", a, E.unary("scaleInplace", a, "scale", [s]));
}

export function adamwStep(
  E: Engine, p: TensorData, g: TensorData, m: TensorData, v: TensorData,
  lr: number, beta1: number, beta2: number, eps: number, wd: number, bc1: number, bc2: number, gradScale = 1,
): void {
  const op = "adamwStep";
  const n = size(p.shape);
  for (const [what, t] of [["grads", g], ["m", m], ["v", v]] as const) {
    if (size(t.shape) !== n) fail(op, `${what} ${fmt(t.shape)} does not match params ${fmt(p.shape)}`);
  }
  if (m.dtype !== "f32" || v.dtype !== "f32") fail(op, `m and v must be f32, got ${m.dtype} and ${v.dtype}`);
  if (p.dtype === "i32" || g.dtype === "i32") fail(op, "params and grads must be floating point");
  if (n === 0) return;
  const p2 = E.alloc(p.shape, p.dtype), m2 = E.alloc(m.shape, "f32"), v2 = E.alloc(v.shape, "f32");
  run(E, op, { adamw: [p.dtype, g.dtype] }, () => adamwKernel(p.dtype, g.dtype), ADAMW_PUSH,
    { n, lr, beta1, beta2, eps, wd, bc1, bc2, gradScale }, [p, g, m, v], [p2, m2, v2], grid1d(n));
  assign(E, op, p, p2);
  assign(E, op, m, m2);
  assign(E, op, v, v2);
}
