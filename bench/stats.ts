// Timing statistics for the bench protocol. Pure functions over millisecond samples.

import { median } from "../ts/stats.js";

export { median };

/** Nearest-rank percentile, p in [0, 100]. */
export function percentile(xs: readonly number[], p: number): number {
  if (xs.length === 0) return NaN;
  const s = [...xs].sort((a, b) => a - b);
  const rank = Math.ceil((p / 100) * s.length);
  return s[Math.min(s.length - 1, Math.max(0, rank - 1))];
}

export function mean(xs: readonly number[]): number {
  if (xs.length === 0) return NaN;
  let t = 0;
  for (const x of xs) t += x;
  return t / xs.length;
}

/** Coefficient of variation (sample standard deviation / mean). 0 for fewer than 2 samples. */
export function cv(xs: readonly number[]): number {
  if (xs.length < 2) return 0;
  const m = mean(xs);
  let v = 0;
  for (const x of xs) v += (x - m) * (x - m);
  return Math.sqrt(v / (xs.length - 1)) / m;
}

export interface TimingSummary {
  /** Median of the per-repeat medians (the "3x median" protocol). */
  ms: number;
  p95Ms: number;
  cv: number;
  repeatMedians: number[];
  samples: number;
}

/** Summarizes `repeats` arrays of per-iteration times (ms). */
export function summarize(repeats: readonly (readonly number[])[]): TimingSummary {
  const all = repeats.flat();
  const repeatMedians = repeats.map((r) => median(r));
  return {
    ms: median(repeatMedians),
    p95Ms: percentile(all, 95),
    cv: cv(all),
    repeatMedians,
    samples: all.length,
  };
}

/** TFLOP/s of a (batch of) M×N×K matmul(s) taking `ms` milliseconds. */
export function tflops(m: number, n: number, k: number, ms: number, batch = 1): number {
  if (!(ms > 0)) return NaN;
  return (2 * m * n * k * batch) / (ms * 1e-3) / 1e12;
}
