// The benchmarks' shared timing pieces: a native runtime wrapper with batch profiling switchable
// from a benchmark (while `profiling` is on, every batch the scheduler opens writes GPU timestamps
// around each dispatch and its timeline value is kept for batchProfile, as is each replay's; wrapping keeps the
// scheduler in ts/exec unaware of benchmarks), GPU busy time from those stamps, and the clock
// warm-up every timed section starts with.
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
      // a capture recorded while profiling keeps its stamps: each replay's are read by its value
      replayBatch: base.replayBatch
        ? (graph: number) => {
          const v = base.replayBatch!(graph);
          if (this.profiling) this.submitted.push(v);
          return v;
        }
        : undefined,
    };
  }

  /** Per-dispatch GPU times of each batch submitted while profiling (waits for them). */
  take(): ProfileEntry[][] {
    const vals = this.submitted;
    this.submitted = [];
    return vals.map((v) => this.batchProfile(v));
  }
}

/**
 * Per-label GPU ms and the GPU busy time of profiled batches: the length of the union of the
 * dispatches' [start, end] stamp intervals (one queue clock for every batch). Overlapping
 * dispatches count once and host-side gaps between batches not at all, which is what CUDA
 * events around the same work measure when the host keeps the GPU fed. Summing per-dispatch
 * durations instead overcounts: dispatches and batches with no barrier between them overlap,
 * and a start stamp (top of pipe) is written before the previous work drains.
 */
export function summarize(batches: ProfileEntry[][]): { spanMs: number; wallMs: number; sumMs: number; dispatches: number; byLabel: Map<string, { ms: number; count: number }> } {
  let sum = 0;
  const byLabel = new Map<string, { ms: number; count: number }>();
  const all = batches.flat();
  for (const p of all) {
    sum += p.gpuNs;
    const e = byLabel.get(p.label) ?? { ms: 0, count: 0 };
    e.ms += p.gpuNs / 1e6;
    e.count++;
    byLabel.set(p.label, e);
  }
  return { spanMs: busyNs(all) / 1e6, wallMs: batchWallNs(batches) / 1e6, sumMs: sum / 1e6, dispatches: all.length, byLabel };
}

/**
 * Summed first-start-to-last-end of each batch: the span plus the GPU-side gaps between a
 * batch's dispatches (barrier drains, launch latency), which the interval union leaves out.
 */
export function batchWallNs(batches: readonly ProfileEntry[][]): number {
  let wall = 0;
  for (const b of batches) {
    if (b.length === 0) continue;
    let lo = Infinity, hi = -Infinity;
    for (const p of b) {
      lo = Math.min(lo, p.startNs);
      hi = Math.max(hi, p.endNs);
    }
    wall += hi - lo;
  }
  return wall;
}

/** Length of the union of [startNs, endNs] intervals. */
export function busyNs(entries: readonly { startNs: number; endNs: number }[]): number {
  const iv = entries.map((p) => [p.startNs, Math.max(p.startNs, p.endNs)] as const).sort((x, y) => x[0] - y[0]);
  let busy = 0, curStart = -Infinity, curEnd = -Infinity;
  for (const [s, e] of iv) {
    if (s > curEnd) {
      if (curEnd > curStart) busy += curEnd - curStart;
      curStart = s;
      curEnd = e;
    } else if (e > curEnd) {
      curEnd = e;
    }
  }
  if (curEnd > curStart) busy += curEnd - curStart;
  return busy;
}

/**
 * Runs `fn` repeatedly for `ms` of wall-clock time: the GPU's clock governor leaves the SMs at
 * idle clocks (345 MHz on the H100 instead of 1980) through short bursts after idle time, so
 * every timed section starts after sustained load (RESULTS, run 17).
 */
export function warmFor(ms: number, fn: () => void): void {
  for (const t0 = performance.now(); performance.now() - t0 < ms; ) fn();
}
