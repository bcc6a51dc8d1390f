// In-place ops: computed out of place, then the target tensor is rebound to the result
// (Engine.rebind), so fused expressions recorded earlier still read the old values.
// Plain host tensors (TensorData objects the caller made) are updated in their device copy
// (ts/resident.ts); only one whose `data` cannot be redefined is updated through its array, a
// GPU round trip counted as a CPU fallback ("hostInplace") in stats().
import type { TensorData } from "../types.js";
import { type Engine, run } from "../engine.js";
import { HeliosTensor } from "../tensor.js";
import { fail, fmt, size } from "../shape.js";
import { grid1d, gridRows } from "../kernels/common.js";
import { ADAMW_PUSH, adamwKernel } from "../kernels/optim.js";
import { markDeviceNewer, residentDevice } from "../resident.js";
import { ADAMW_BLOCK, ADAMW_MULTI_MAX, adamwMultiKernel, adamwMultiPush } from "../kernels/multi-tensor.js";
import { ADAMW_HYPER } from "../kernels/step.js";
import { deviceTensor } from "./step.js";
import type { Lease } from "../exec/lease.js";

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

/** One parameter tensor of adamwStepMulti, with its gradient, AdamW state and weight decay. */
export interface AdamwTensors {
  params: TensorData;
  grads: TensorData;
  m: TensorData;
  v: TensorData;
  weightDecay: number;
}

/** The per-step scalars of adamwStepMulti when the host knows them (an eager step). */
export interface AdamwStepScalars {
  lr: number;
  bc1: number;
  bc2: number;
  gradScale: number;
}

/**
 * AdamW over many tensors in place, up to ADAMW_MULTI_MAX tensors per dispatch (adamw_multi, its
 * vec4 form for tensors whose sizes divide by 4: adamwGroups), with adamwStep's arithmetic. `hyper` holds lr, bc1, bc2 and gradScale: host numbers, or a
 * device tensor f32 [5] = [lr, bc1, bc2, gradScale, skip] as in adamwStepDevice (skip != 0 leaves
 * everything untouched; a captured step's values). As with adamwStepDevice, params, m and v are
 * device tensors updated in their buffers: expressions recorded earlier that read them must have
 * been materialized.
 */
export function adamwStepMulti(
  E: Engine, sets: AdamwTensors[], hyper: TensorData | AdamwStepScalars, beta1: number, beta2: number, eps: number,
): void {
  const op = "adamwStepMulti";
  const onDevice = "shape" in hyper;
  if (onDevice && (hyper.dtype !== "f32" || size(hyper.shape) !== ADAMW_HYPER)) {
    fail(op, `hyper must be f32 [${ADAMW_HYPER}] (lr, bc1, bc2, gradScale, skip), got ${hyper.dtype} ${fmt(hyper.shape)}`);
  }
  const mode = onDevice ? "device" : "push";
  for (const { vec4, group } of adamwGroups(checkSets(E, op, sets))) {
    const types = group.map(({ s }) => ({ p: s.params.dtype, g: s.grads.dtype }));
    const blocks = group.reduce((b, x) => b + Math.ceil(x.n / ADAMW_BLOCK), 0);
    const push: Record<string, number> = { blocks, beta1, beta2, eps };
    if (!onDevice) Object.assign(push, { lr: hyper.lr, bc1: hyper.bc1, bc2: hyper.bc2, gradScale: hyper.gradScale });
    group.forEach(({ s, n }, j) => {
      push[`n${j}`] = n;
      push[`wd${j}`] = s.weightDecay;
    });
    const pipeline = E.kernel({ adamwMulti: types, hyper: mode, vec4 }, () => adamwMultiKernel(types, mode, vec4));
    const inputs = group.flatMap(({ s }) => [s.params, s.grads, s.m, s.v]);
    if (onDevice) inputs.push(hyper);
    E.withInputs(op, inputs, (bufs) => {
      E.dispatch(pipeline, bufs, gridRows(blocks), adamwMultiPush(group.length, mode), push, group.flatMap((x) => x.out));
    });
  }
}

/**
 * adamw_multi dispatches: up to ADAMW_MULTI_MAX tensors each, the vec4 kernel for tensors whose
 * element counts divide by 4 (in their order) and the scalar kernel for the rest, so that one odd
 * tensor does not hold back the others' quads. Reordering is safe: every tensor's update is
 * independent of the others' (checkSets refuses shared buffers).
 */
export function adamwGroups<T extends { n: number }>(live: T[]): { vec4: boolean; group: T[] }[] {
  const out: { vec4: boolean; group: T[] }[] = [];
  for (const vec4 of [true, false]) {
    const part = live.filter((x) => (x.n % 4 === 0) === vec4);
    for (let at = 0; at < part.length; at += ADAMW_MULTI_MAX) out.push({ vec4, group: part.slice(at, at + ADAMW_MULTI_MAX) });
  }
  return out;
}

/**
 * Checks every set as adamwStepDevice checks its tensors, and that no buffer is updated twice or
 * also read as a gradient (one dispatch updates a group's tensors together); returns the
 * non-empty sets with their element counts and their tensors to update, materialized.
 */
function checkSets(E: Engine, op: string, sets: AdamwTensors[]): { s: AdamwTensors; n: number; out: HeliosTensor[] }[] {
  const live: { s: AdamwTensors; n: number; out: HeliosTensor[] }[] = [];
  const written = new Set<HeliosTensor>();
  sets.forEach((s, at) => {
    const n = size(s.params.shape);
    for (const [what, t] of [["grads", s.grads], ["m", s.m], ["v", s.v]] as const) {
      if (size(t.shape) !== n) fail(op, `tensor ${at}: ${what} ${fmt(t.shape)} does not match params ${fmt(s.params.shape)}`);
    }
    if (s.m.dtype !== "f32" || s.v.dtype !== "f32") fail(op, `tensor ${at}: m and v must be f32, got ${s.m.dtype} and ${s.v.dtype}`);
    if (s.params.dtype === "i32" || s.grads.dtype === "i32") fail(op, `tensor ${at}: params and grads must be floating point`);
    if (!Number.isFinite(s.weightDecay)) fail(op, `tensor ${at}: weightDecay ${s.weightDecay} must be finite`);
    const out = (["params", "m", "v"] as const).map((k) => deviceTensor(op, `tensor ${at}: ${k}`, s[k]));
    for (const t of out) {
      if (written.has(t)) fail(op, `tensor ${at}: ${fmt(t.shape)} is updated twice (params, m and v must be distinct tensors)`);
      written.add(t);
    }
    if (n > 0) live.push({ s, n, out });
  });
  const leases = new Set<Lease>();
  for (const { out } of live) {
    for (const t of out) {
      E.materialize(t);
      if (leases.has(t.lease!)) fail(op, "two of the updated tensors share a buffer (views of one tensor)");
      leases.add(t.lease!);
    }
  }
  for (const { s } of live) {
    if (s.grads instanceof HeliosTensor && s.grads.lease && leases.has(s.grads.lease)) fail(op, "a gradient shares a buffer with an updated tensor");
  }
  return live;
}
