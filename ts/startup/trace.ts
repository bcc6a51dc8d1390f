// The startup trace (HELIOS_STARTUP_TRACE): where a cold start's time goes, per phase. Each
// phase sums the intervals recorded under it; the events keep each interval (label, start, ms)
// for a timeline. Written at process exit: a table on stderr, or JSON to a file.

/** The phases a cold start spends its time in, and what each covers. */
export const PHASES = {
  spirv: "SPIR-V assembly: kernel IR decoded, validated and lowered (native kernelSpirv)",
  pipeline: "driver pipeline compiles of the kernels ops use (vkCreateComputePipelines through the pipeline cache): one interval per parallel compile of those queued work needs, or per kernel with HELIOS_COMPILE_THREADS=1",
  "tune-compile": "matmul tuner: candidate kernels assembled and compiled on several threads",
  "tune-gate": "matmul tuner: correctness gate (every candidate once, fp64 spot check)",
  "tune-rounds": "matmul tuner: interleaved timing rounds",
  prepack: "prepacked weight copies (layout transposes recorded)",
} as const;

export type Phase = keyof typeof PHASES;

export interface TraceEvent {
  phase: Phase;
  label: string;
  /** ms since the trace began. */
  start: number;
  ms: number;
}

/** Events kept for the timeline; phase sums keep counting past it. */
const MAX_EVENTS = 20000;

export class StartupTrace {
  readonly phases = new Map<Phase, { count: number; ms: number; maxMs: number }>();
  readonly events: TraceEvent[] = [];
  /** Where the driver's pipeline cache started from at initDevice (DeviceInfo.pipelineCacheSource). */
  pipelineCacheSource: string | null = null;
  private readonly t0: number;

  constructor(private readonly clock: () => number = () => performance.now()) {
    this.t0 = clock();
  }

  setPipelineCacheSource(source: string): void {
    this.pipelineCacheSource = source;
  }

  now(): number {
    return this.clock();
  }

  /** Records an interval of `phase` that began at `start` (this trace's clock) and took `ms`. */
  add(phase: Phase, label: string, start: number, ms: number): void {
    const p = this.phases.get(phase) ?? { count: 0, ms: 0, maxMs: 0 };
    p.count++;
    p.ms += ms;
    p.maxMs = Math.max(p.maxMs, ms);
    this.phases.set(phase, p);
    if (this.events.length < MAX_EVENTS) this.events.push({ phase, label, start: start - this.t0, ms });
  }

  /** Runs `fn` as an interval of `phase`. */
  time<T>(phase: Phase, label: string, fn: () => T): T {
    const t = this.clock();
    try {
      return fn();
    } finally {
      this.add(phase, label, t, this.clock() - t);
    }
  }

  /** One line per phase with its count, total and longest interval. */
  table(): string {
    const rows = [...this.phases].map(([ph, p]) =>
      `  ${ph.padEnd(13)} ${String(p.count).padStart(6)} × ${(p.ms / 1000).toFixed(3).padStart(9)} s  (longest ${p.maxMs.toFixed(1)} ms)  ${PHASES[ph]}`);
    const source = this.pipelineCacheSource === null ? [] : [`  pipeline cache started from: ${this.pipelineCacheSource} (own file, shipped seed or empty)`];
    return ["helios startup trace (phase, count, total, longest):", ...rows, ...source].join("\n") + "\n";
  }

  toJSON(): { phases: Record<string, { count: number; ms: number; maxMs: number }>; events: TraceEvent[]; pipelineCacheSource: string | null } {
    return { phases: Object.fromEntries(this.phases), events: this.events, pipelineCacheSource: this.pipelineCacheSource };
  }
}
