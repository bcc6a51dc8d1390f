// The bench report: row/meta shapes (the JSON contract Alpha's CLI reads), console table.
import type { BenchDtype, Shape } from "./args.js";
import { shapeName } from "./args.js";
import type { TimingSummary } from "./stats.js";
import { tflops } from "./stats.js";

export interface BenchRow {
  shape: string;
  m: number;
  n: number;
  k: number;
  batch: number;
  dtype: BenchDtype;
  heliosMs: number;
  heliosP95Ms: number;
  heliosCv: number;
  heliosTflops: number;
  cudaMs: number | null;
  cudaTflops: number | null;
  /** cudaMs / heliosMs: > 1 means Helios is faster. null without a CUDA reference. */
  ratio: number | null;
  variant: string;
  /** Relative Frobenius error of sampled output entries against fp64 on this very shape. */
  spotCheckRelErr?: number;
  heliosRepeatMedians: number[];
  cudaRepeatMedians?: number[];
}

export interface BenchMeta {
  suite: "cuda";
  device: string;
  driver: string;
  vulkanApi?: string;
  coopMat?: boolean;
  coopMat2?: boolean;
  cudaDevice?: string;
  torch?: string;
  cudaVersion?: string;
  gitCommit: string;
  env: Record<string, string>;
  timestamp: string;
  dtype: BenchDtype;
  accF16: boolean;
  epilogue: string;
  iters: number;
  warmup: number;
  repeats: number;
  /** Sustained load before timing (ms) and idle seconds before each repeat (CudaSuiteOptions). */
  warmMs: number;
  rest: number;
  protocol: string;
  /** Set when no CUDA reference ran, saying why. */
  note?: string;
  check?: CheckResult[];
}

export interface CheckResult {
  variant: string;
  shape: string;
  relErr: number;
  tolerance: number;
  pass: boolean;
}

export interface BenchReport {
  meta: BenchMeta;
  rows: BenchRow[];
}

export function makeRow(
  shape: Shape,
  batch: number,
  dtype: BenchDtype,
  variant: string,
  helios: TimingSummary,
  cuda: TimingSummary | null,
): BenchRow {
  const cudaMs = cuda ? cuda.ms : null;
  return {
    shape: shapeName(shape),
    m: shape.m,
    n: shape.n,
    k: shape.k,
    batch,
    dtype,
    heliosMs: helios.ms,
    heliosP95Ms: helios.p95Ms,
    heliosCv: helios.cv,
    heliosTflops: tflops(shape.m, shape.n, shape.k, helios.ms, batch),
    cudaMs,
    cudaTflops: cudaMs === null ? null : tflops(shape.m, shape.n, shape.k, cudaMs, batch),
    ratio: cudaMs === null ? null : cudaMs / helios.ms,
    variant,
    heliosRepeatMedians: helios.repeatMedians,
    cudaRepeatMedians: cuda?.repeatMedians,
  };
}

function fmt(x: number | null | undefined, digits: number): string {
  if (x === null || x === undefined || !Number.isFinite(x)) return "-";
  // tiny values (a CPU device's TFLOP/s) keep three significant digits instead of printing 0.0
  return Math.abs(x) > 0 && Math.abs(x) < 10 ** -digits * 10 ? x.toPrecision(3) : x.toFixed(digits);
}

export const fmtNum = fmt;

export function formatTable(rows: readonly BenchRow[]): string {
  const head = ["shape", "helios ms", "p95", "cv", "TFLOP/s", "cuda ms", "TFLOP/s", "ratio", "variant"];
  const body = rows.map((r) => [
    r.shape,
    fmt(r.heliosMs, 4),
    fmt(r.heliosP95Ms, 4),
    fmt(r.heliosCv, 3),
    fmt(r.heliosTflops, 1),
    fmt(r.cudaMs, 4),
    fmt(r.cudaTflops, 1),
    fmt(r.ratio, 3),
    r.variant,
  ]);
  const widths = head.map((h, i) => Math.max(h.length, ...body.map((b) => b[i].length)));
  const line = (cells: string[]) => cells.map((c, i) => c.padEnd(widths[i])).join("  ");
  return [line(head), line(widths.map((w) => "-".repeat(w))), ...body.map(line)].join("\n");
}
