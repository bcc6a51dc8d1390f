// `helios bench --suite=cuda`: Helios matmul (GPU timestamps) against PyTorch/cuBLAS (CUDA events)
// on the same shapes, dtype and iteration counts. runCudaSuite is what Alpha's CLI delegates to.
import { spawnSync } from "node:child_process";
import { mkdirSync, writeFileSync } from "node:fs";
import { dirname } from "node:path";
import { fileURLToPath } from "node:url";
import type { CudaSuiteOptions, EpilogueArg, Shape } from "./args.js";
import { shapeName } from "./args.js";
import { fmtNum, formatTable, makeRow, type BenchMeta, type BenchReport, type BenchRow, type CheckResult } from "./report.js";
import { summarize } from "./stats.js";
import { renderSvg } from "./svg.js";
import { runTorchReference, type TorchResult } from "./torch.js";
import { chooseMatmul, capsOf } from "../ts/kernels/matmul/autotune.js";
import { readMatmulConfig } from "../ts/kernels/matmul/config.js";
import type { MatmulRuntime } from "../ts/kernels/matmul/device.js";
import { MatmulFixture } from "../ts/kernels/matmul/fixture.js";
import { planMatmul } from "../ts/kernels/matmul/plan.js";
import { normalize, type Epilogue, type MatmulDtype, type MatmulProblem } from "../ts/kernels/matmul/problem.js";
import { tolerance } from "../ts/kernels/matmul/reference.js";
import { runPlan, timePlan } from "../ts/kernels/matmul/run.js";

export class CheckFailed extends Error {
  readonly code = "ERR_HELIOS_CHECK_FAILED";
  constructor(readonly results: CheckResult[]) {
    super(`correctness gate failed: ${results.filter((r) => !r.pass).map((r) => `${r.variant} @ ${r.shape}: rel err ${r.relErr.toExponential(3)} > ${r.tolerance}`).join("; ")}`);
  }
}

export function dtypeOf(d: CudaSuiteOptions["dtype"]): MatmulDtype {
  return d === "float16" ? "f16" : d === "bfloat16" ? "bf16" : "f32";
}

export function epilogueOf(e: EpilogueArg): Epilogue {
  if (e === "none") return {};
  if (e === "bias") return { bias: true };
  return { bias: true, act: e.slice(5) as Epilogue["act"] };
}

function gitCommit(): string {
  const here = dirname(fileURLToPath(import.meta.url));
  const r = spawnSync("git", ["rev-parse", "HEAD"], { cwd: here, encoding: "utf8" });
  return r.status === 0 ? r.stdout.trim() : process.env.HELIOS_GIT_COMMIT ?? "unknown";
}

export function envFlags(env: NodeJS.ProcessEnv = process.env): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [k, v] of Object.entries(env)) {
    if (v !== undefined && (k.startsWith("HELIOS_") || k === "VK_ICD_FILENAMES" || k === "CUDA_VISIBLE_DEVICES")) out[k] = v;
  }
  return out;
}

export interface SuiteDeps {
  runtime: MatmulRuntime;
  log?: (msg: string) => void;
  /** Injected for tests; defaults to the python3 subprocess. */
  torch?: (o: CudaSuiteOptions) => TorchResult;
}

function problemFor(o: CudaSuiteOptions, s: Shape): MatmulProblem {
  return { m: s.m, n: s.n, k: s.k, dtype: dtypeOf(o.dtype), accF16: o.accF16, epilogue: epilogueOf(o.epilogue) };
}

/** The timing protocol in words, as meta.protocol records it. */
export function protocolOf(o: CudaSuiteOptions): string {
  const load = `${o.warmup} warmup and ${o.warmMs} ms of sustained load`;
  const before = o.rest > 0
    ? `each repeat after ${o.rest} s idle, then ${load} (a rested board: the rate of a short burst)`
    : `after ${load} (GPU clocks ramped: the sustained rate)`;
  return `median of ${o.repeats} per-repeat medians of ${o.iters} iterations, ${before}; Helios: GPU timestamps per dispatch; CUDA: torch.cuda.Event per iteration (torch.matmul, TF32 off for float32)`;
}

/** `repeats` timings of one repeat each, every one after `rest` seconds of idle GPU. */
async function timeRested(o: CudaSuiteOptions, timeOnce: (first: boolean) => number[][]): Promise<number[][]> {
  const out: number[][] = [];
  for (let r = 0; r < o.repeats; r++) {
    await new Promise((done) => setTimeout(done, o.rest * 1000));
    out.push(...timeOnce(r === 0));
  }
  return out;
}

/** Runs the suite; throws CheckFailed (no timings) when a variant fails the gate. */
export async function runCudaSuite(o: CudaSuiteOptions, deps: SuiteDeps): Promise<BenchReport> {
  const rt = deps.runtime;
  const log = deps.log ?? ((m: string) => { if (!o.quiet) process.stderr.write(`[helios bench] ${m}\n`); });
  const dev = rt.initDevice();
  const info = rt.getDeviceInfo();
  const cfg = { ...readMatmulConfig(), ...(o.variant ? { variant: o.variant } : {}) };
  log(`device: ${info.deviceName} (${info.driverName ?? "?"} ${info.driverVersion ?? ""}), coopmat ${info.coopMatSupported}`);
  void dev;

  // 1. Choose a plan per shape (tuning on first use), so the gate checks exactly what is timed.
  const plans = o.shapes.map((s) => {
    log(`plan ${shapeName(s)} ...`);
    const ch = chooseMatmul(rt, problemFor(o, s), { config: cfg, onProgress: log });
    log(`plan ${shapeName(s)}: ${ch.plan.variant} (${ch.source})`);
    return ch.plan;
  });

  // 2. Correctness gate: every chosen variant at checkShape against a full fp64 reference.
  const checks: CheckResult[] = [];
  if (o.check) {
    const caps = capsOf(info);
    for (const variant of [...new Set(plans.map((p) => p.variant))]) {
      const prob = problemFor(o, o.checkShape);
      const plan = planMatmul(prob, caps, { variant });
      const fx = new MatmulFixture(rt, plan.problem, 3);
      try {
        fx.poisonC();
        runPlan(rt, plan, fx.buffers(plan));
        const relErr = fx.fullError();
        const tol = tolerance(plan.problem, plan.lowPrecision);
        checks.push({ variant, shape: shapeName(o.checkShape), relErr, tolerance: tol, pass: relErr <= tol });
        log(`check ${variant} @ ${shapeName(o.checkShape)}: rel err ${relErr.toExponential(3)} (tol ${tol}) ${relErr <= tol ? "ok" : "FAIL"}`);
      } finally {
        fx.destroy();
      }
    }
    if (checks.some((c) => !c.pass)) throw new CheckFailed(checks);
  }

  // 3. The CUDA reference (its own process; it frees the GPU when it exits).
  let torch: TorchResult = { ok: false, note: "PyTorch reference disabled (--torch=false)", byShape: new Map() };
  if (o.torch) {
    log(`PyTorch reference (${o.python}) ...`);
    torch = (deps.torch ?? ((x) => runTorchReference({ ...x, epilogue: x.epilogue })))(o);
    if (!torch.ok) log(torch.note ?? "no CUDA reference");
  }

  // 4. Helios timings.
  const rows: BenchRow[] = [];
  for (let i = 0; i < o.shapes.length; i++) {
    const s = o.shapes[i];
    const plan = plans[i];
    log(`time ${shapeName(s)} ${plan.variant} (${o.repeats}x${o.iters} iters, ${o.warmup} warmup${o.rest > 0 ? `, ${o.rest} s idle before each` : ""}) ...`);
    const fx = new MatmulFixture(rt, normalize(problemFor(o, s)), 5);
    try {
      const bufs = fx.buffers(plan);
      log(`  inputs ready`);
      const onWarm = (n: number, ms: number) => log(`  warm-up: ${n} batches of ${Math.max(1, o.warmup)} in ${ms.toFixed(0)} ms`);
      const reps = o.rest > 0
        ? await timeRested(o, (onWarmOnce) => timePlan(rt, plan, bufs, { warmup: o.warmup, iters: o.iters, repeats: 1, warmMs: o.warmMs, onWarm: onWarmOnce ? onWarm : undefined }))
        : timePlan(rt, plan, bufs, { warmup: o.warmup, iters: o.iters, repeats: o.repeats, warmMs: o.warmMs, onWarm });
      const row = makeRow(s, 1, o.dtype, plan.variant, summarize(reps), torch.byShape.get(shapeName(s)) ?? null);
      if (o.check) {
        // the timed kernel itself, on 64 sampled outputs against fp64: forms that only whole tiles
        // take (pair staging, two-stage twins, stream-K) do not run at an unaligned checkShape
        row.spotCheckRelErr = fx.spotError(64);
        const tol = tolerance(plan.problem, plan.lowPrecision);
        if (!(row.spotCheckRelErr <= tol)) {
          throw new CheckFailed([...checks, { variant: plan.variant, shape: `${shapeName(s)} (64 sampled outputs)`, relErr: row.spotCheckRelErr, tolerance: tol, pass: false }]);
        }
      }
      rows.push(row);
      log(`  ${row.heliosMs.toFixed(4)} ms = ${fmtNum(row.heliosTflops, 1)} TFLOP/s` + (row.ratio !== null ? `, cuda ${row.cudaMs?.toFixed(4)} ms, ratio ${row.ratio.toFixed(3)}` : ""));
    } finally {
      fx.destroy();
    }
  }

  const meta: BenchMeta = {
    suite: "cuda",
    device: info.deviceName,
    driver: `${info.driverName ?? ""} ${info.driverInfo ?? ""} ${info.driverVersion ?? ""}`.trim(),
    vulkanApi: info.apiVersion === undefined ? undefined : String(info.apiVersion),
    coopMat: info.coopMatSupported,
    coopMat2: info.coopMat2Supported,
    cudaDevice: torch.device,
    torch: torch.torch,
    cudaVersion: torch.cuda,
    gitCommit: gitCommit(),
    env: envFlags(),
    timestamp: new Date().toISOString(),
    dtype: o.dtype,
    accF16: o.accF16,
    epilogue: o.epilogue,
    iters: o.iters,
    warmup: o.warmup,
    repeats: o.repeats,
    warmMs: o.warmMs,
    rest: o.rest,
    protocol: protocolOf(o),
    note: torch.ok ? undefined : `Helios-only rows: ${torch.note ?? "no CUDA reference"}`,
    check: o.check ? checks : undefined,
  };
  const report: BenchReport = { meta, rows };
  if (o.out) {
    mkdirSync(dirname(o.out), { recursive: true });
    writeFileSync(o.out, JSON.stringify(report, null, 2) + "\n");
  }
  if (o.plot) {
    mkdirSync(dirname(o.plot), { recursive: true });
    writeFileSync(o.plot, renderSvg(report));
  }
  return report;
}

export { formatTable };
