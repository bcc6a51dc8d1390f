// A native runtime wrapper with batch profiling switchable from a benchmark: while `profiling`
// is on, every batch the scheduler opens writes GPU timestamps around each dispatch and its
// timeline value is kept for batchProfile. Wrapping keeps the scheduler (ts/exec) unaware of
// benchmarks. Used by bench/ops and bench/train/profile-step.
import type { Runtime } from "../ts/exec/runtime.js";

export interface ProfileEntry { label: string; gpuNs: number; startNs: number; endNs: number }

/**
 * The native runtime with batch profiling switchable from here: while `profiling` is on,
 * every batch the scheduler opens writes timestamps and its timeline value is kept for
 * batchProfile. Wrapping keeps the scheduler (ts/exec) unaware of benchmarks.
 */
export class ProfilingRuntime {
  profiling = false;
  submitted: number[] = [];
  readonly rt: Runtime;
  private readonly batchProfile: (value: number) => ProfileEntry[];

  constructor(base: Runtime) {
    const bp = (base as unknown as { batchProfile?: (v: number) => ProfileEntry[] }).batchProfile;
    if (typeof bp !== "function") throw new Error("bench: the native addon lacks batchProfile (rebuild it)");
    this.batchProfile = bp;
    this.rt = {
      ...base,
      beginBatch: (opts) => base.beginBatch(this.profiling ? { ...opts, profile: true } : opts),
      submitBatch: () => {
        const v = base.submitBatch();
        if (this.profiling) this.submitted.push(v);
        return v;
      },
    };
  }

  /** Per-dispatch GPU times of each batch submitted while profiling (waits for them). */
  take(): ProfileEntry[][] {
    const vals = this.submitted;
    this.submitted = [];
    return vals.map((v) => this.batchProfile(v));
  }
}

/** Per-label GPU ms and the summed batch spans of profiled batches. */
export function summarize(batches: ProfileEntry[][]): { spanMs: number; sumMs: number; dispatches: number; byLabel: Map<string, { ms: number; count: number }> } {
  let span = 0, sum = 0, dispatches = 0;
  const byLabel = new Map<string, { ms: number; count: number }>();
  for (const prof of batches) {
    span += Math.max(0, ...prof.map((p) => p.endNs));
    for (const p of prof) {
      sum += p.gpuNs;
      dispatches++;
      const e = byLabel.get(p.label) ?? { ms: 0, count: 0 };
      e.ms += p.gpuNs / 1e6;
      e.count++;
      byLabel.set(p.label, e);
    }
  }
  return { spanMs: span / 1e6, sumMs: sum / 1e6, dispatches, byLabel };
}
