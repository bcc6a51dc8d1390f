// AdamW (decoupled weight decay, bias correction) over Backend.adamwStep, with global-norm
// clipping folded into adamwStep's gradScale and a non-finite guard that skips the update. On a
// backend with the multi-tensor path on (HELIOS_MULTI_TENSOR_ADAMW), one adamwStepMulti call
// updates every parameter in a few dispatches instead.
import type { TensorData } from "../ts/types.js";
import type { OptimConfig } from "./config.js";
import { multiTensor, scalar, type TrainBackend } from "./backend.js";
import type { AdamwTensors } from "../ts/ops/optim.js";
import type { ParamSpec, Params } from "./params.js";

export interface OptimState {
  /** Updates applied so far (bias correction uses step + 1 for the next one). */
  step: number;
  readonly m: Map<string, TensorData>;
  readonly v: Map<string, TensorData>;
}

export function initOptimState(B: TrainBackend, specs: ParamSpec[]): OptimState {
  const m = new Map<string, TensorData>(), v = new Map<string, TensorData>();
  for (const s of specs) {
    m.set(s.name, B.zeros(s.shape, "f32"));
    v.set(s.name, B.zeros(s.shape, "f32"));
  }
  return { step: 0, m, v };
}

/** Linear warmup to lr, then cosine to minLr over decaySteps (constant when decaySteps = 0). */
export function learningRate(o: OptimConfig, step: number): number {
  if (o.warmup > 0 && step < o.warmup) return (o.lr * (step + 1)) / o.warmup;
  if (o.decaySteps <= 0) return o.lr;
  const t = Math.min(1, (step - o.warmup) / o.decaySteps);
  return o.minLr + 0.5 * (o.lr - o.minLr) * (1 + Math.cos(Math.PI * t));
}

export interface UpdateResult {
  gradNorm: number;
  /** False when the gradients held a NaN/Inf: nothing was updated. */
  applied: boolean;
  lr: number;
}

/**
 * One AdamW update of every parameter. The gradient norm is the one value read back per step
 * (it decides the clip factor and the finite guard: a sum of squares is finite iff every
 * gradient is finite, barring overflow, which checkFinite on the sum also catches).
 */
export function adamwUpdate(
  B: TrainBackend, o: OptimConfig, specs: ParamSpec[], params: Params, grads: Map<string, TensorData>, st: OptimState,
  lossScale = 1,
): UpdateResult {
  const list = specs.map((s) => {
    const g = grads.get(s.name);
    if (!g) throw new Error(`no gradient for ${s.name}`);
    return g;
  });
  const ss = B.totalSumOfSquares(list);
  const bad = B.checkFinite(ss);
  const sumSq = scalar(ss);
  const nonFinite = scalar(bad) !== 0 || !Number.isFinite(sumSq);
  B.releaseGpuTensor?.(ss);
  B.releaseGpuTensor?.(bad);
  // Gradients arrive multiplied by lossScale (16-bit matmuls); the norm and update undo it.
  const gradNorm = Math.sqrt(sumSq) / lossScale;
  const lr = learningRate(o, st.step);
  if (nonFinite) return { gradNorm, applied: false, lr };
  const gradScale = (o.clip > 0 && gradNorm > o.clip ? o.clip / (gradNorm + 1e-6) : 1) / lossScale;
  const t = st.step + 1;
  const bc1 = 1 - o.beta1 ** t, bc2 = 1 - o.beta2 ** t;
  if (multiTensor(B)) {
    B.adamwStepMulti(adamwSets(o, specs, params, grads, st), { lr, bc1, bc2, gradScale }, o.beta1, o.beta2, o.eps);
  } else {
    for (const s of specs) {
      const p = params.get(s.name)!, g = grads.get(s.name)!;
      const wd = s.decay ? o.weightDecay : 0;
      B.adamwStep(p, g, st.m.get(s.name)!, st.v.get(s.name)!, lr, o.beta1, o.beta2, o.eps, wd, bc1, bc2, gradScale);
    }
  }
  st.step = t;
  return { gradNorm, applied: true, lr };
}

/** Every parameter with its gradient, AdamW state and weight decay, for adamwStepMulti. */
export function adamwSets(o: OptimConfig, specs: ParamSpec[], params: Params, grads: Map<string, TensorData>, st: OptimState): AdamwTensors[] {
  return specs.map((s) => ({
    params: params.get(s.name)!, grads: grads.get(s.name)!, m: st.m.get(s.name)!, v: st.v.get(s.name)!,
    weightDecay: s.decay ? o.weightDecay : 0,
  }));
}
