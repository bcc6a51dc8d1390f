// `helios bench --suite=train`: GPT-2 training throughput in Helios against PyTorch on the same
// GPU, from the same initial weights (init.safetensors, written once here and loaded by both)
// on the same batches (batches.safetensors), with the same optimizer. Reports tokens/s, ms/step
// (median of steps 10-50), the first step's time (a cold start's compiles and, with
// HELIOS_AUTOTUNE=eager, tuning; PyTorch's torch.compile), peak device memory, the first 20 losses side by side, and a parity
// check: Helios (f32) within 1% of PyTorch f32 (TF32 off) at each of the first 20 steps.
import { spawnSync } from "node:child_process";
import { mkdirSync, readFileSync, writeFileSync, existsSync } from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import type { GPTConfig, OptimConfig } from "../../train/config.js";
import { DEFAULT_OPTIM, GPT2_124M } from "../../train/config.js";
import { asTrainBackend, type TrainBackend } from "../../train/backend.js";
import { HeliosBackend } from "../../ts/backend.js";
import { Trainer } from "../../train/trainer.js";
import { initHostParams, paramCount, paramSpecs } from "../../train/params.js";
import { readSafetensors, writeSafetensors, type STensor } from "../../train/safetensors.js";
import { Rng } from "../../train/rng.js";
import { estimateLiveSet } from "../../train/memory.js";
import { DEFAULT_TEXT } from "../../train/demo.js";
import type { ProcessGroup } from "../../ts/distributed/group.js";
import { joinJob, relaunch, shardBatch, takeGpus } from "../../train/dist.js";

export const TINY_SUITE: GPTConfig = { vocab: 512, blockSize: 32, layers: 2, heads: 2, dim: 32, dropout: 0 };

export interface TrainSuiteOptions {
  model: GPTConfig;
  batch: number;
  seq: number;
  steps: number;
  /** Helios stops early (with a note) past this many seconds of training. */
  maxSeconds: number;
  seed: number;
  /** Where init.safetensors, batches.safetensors and torch.json go. */
  workDir: string;
  out: string | null;
  python: string;
  /** Skip the PyTorch side (Helios-only rows). */
  torch: boolean;
  torchModes: string;
  /** Helios configurations to run: "f32" (the parity run) and/or "matmul16" (16-bit matmul operands). */
  heliosModes: string;
  optim: OptimConfig;
  log: (s: string) => void;
  /**
   * Data parallelism (--gpus=N): `batch` is the global batch, each rank trains on its rows and
   * rank 0 reports total and per-rank tokens/s (the PyTorch side is not run).
   */
  dist?: ProcessGroup | null;
}

const here = path.dirname(fileURLToPath(import.meta.url));

export function defaultSuiteOptions(tiny: boolean): TrainSuiteOptions {
  return {
    model: tiny ? TINY_SUITE : GPT2_124M,
    batch: tiny ? 2 : 16,
    seq: tiny ? 32 : 1024,
    steps: tiny ? 12 : 50,
    maxSeconds: tiny ? 60 : 120,
    seed: 1337,
    workDir: path.resolve("perf/train"),
    out: null,
    python: "python3",
    torch: true,
    torchModes: "f32_strict,f32,bf16,compile",
    heliosModes: "f32,matmul16",
    optim: { ...DEFAULT_OPTIM, lr: 6e-4, warmup: 0, decaySteps: 0 },
    log: console.log,
  };
}

export interface SideResult {
  losses: number[];
  ms: number[];
  medianMs: number | null;
  /** The first step's wall time (ms[0]): what a fresh process waits before training runs. */
  firstStepMs: number | null;
  tokensPerSec: number | null;
  peakBytes: number;
  /**
   * Helios only: the pool's live-set peak (leased bytes, bucket-rounded) and the model's live-set
   * estimate (train/memory.ts); peakBytes is what the pool held from the driver.
   */
  peakLiveBytes?: number;
  estimateBytes?: number;
  /** Data parallel: each rank's tokens/s (its rows over its median step); tokensPerSec is the total. */
  perRankTokensPerSec?: number[];
  error?: string;
}

export interface TrainSuiteResult {
  meta: Record<string, unknown>;
  helios: Record<string, SideResult>;
  torch: Record<string, SideResult>;
  parity: { ok: boolean | null; steps: number; worstRelErr: number | null; against: string; note?: string };
}

/** Median of steps 10..50 (1-based), or of what there is when the run was shorter. */
export function medianWindow(ms: number[]): number | null {
  const w = ms.length >= 12 ? ms.slice(9, 50) : ms.slice(Math.min(2, Math.max(0, ms.length - 1)));
  if (w.length === 0) return null;
  const s = [...w].sort((a, b) => a - b);
  return s.length % 2 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
}

function side(losses: number[], ms: number[], peak: number, tokens: number): SideResult {
  const med = medianWindow(ms);
  return { losses, ms, medianMs: med, firstStepMs: ms[0] ?? null, tokensPerSec: med ? tokens / (med / 1000) : null, peakBytes: peak };
}

function inputPaths(o: TrainSuiteOptions): { init: string; batches: string } {
  return { init: path.join(o.workDir, "init.safetensors"), batches: path.join(o.workDir, "batches.safetensors") };
}

/** The same batches for both sides: windows of the shipped text's bytes (token ids < 256). */
function writeInputs(o: TrainSuiteOptions): { init: string; batches: string } {
  mkdirSync(o.workDir, { recursive: true });
  const { init, batches } = inputPaths(o);
  const host = initHostParams(o.model, o.seed);
  const t = new Map<string, STensor>();
  for (const s of paramSpecs(o.model)) t.set(s.name, { shape: s.shape, data: host.get(s.name)! });
  writeSafetensors(init, t, { config: JSON.stringify(o.model), optim: JSON.stringify(o.optim), seed: String(o.seed) });
  const text = new Uint8Array(readFileSync(DEFAULT_TEXT));
  const rng = new Rng(o.seed ^ 0xba7c4);
  const W = o.seq + 1;
  const tok = new Int32Array(o.steps * o.batch * W);
  for (let r = 0; r < o.steps * o.batch; r++) {
    const off = rng.int(text.length - W);
    for (let j = 0; j < W; j++) tok[r * W + j] = text[off + j];
  }
  writeSafetensors(batches, new Map([["tokens", { shape: [o.steps, o.batch, W], data: tok }]]));
  return { init, batches };
}

type Stats = {
  stats?: () => { pool: { peakBytes: number; peakLeasedBytes?: number; inBatchReuses?: number }; matmulPrepacks?: number };
  purgeBufferPools?: () => void;
};

function runHelios(B: TrainBackend & Stats, o: TrainSuiteOptions, initPath: string, batchesPath: string, mode: string): SideResult {
  const { tensors } = readSafetensors(initPath);
  const init = new Map<string, Float32Array>();
  for (const [k, v] of tensors) init.set(k, v.data as Float32Array);
  // Return what an earlier mode left in the pool to the driver: the pool's peaks restart at a
  // trim, so this mode's figures are its own (parameters and optimizer state included).
  B.purgeBufferPools?.();
  const pg = o.dist ?? null;
  const tr = new Trainer(B, o.model, o.optim, { init, seed: o.seed, matmul16: mode === "matmul16", dist: pg ?? undefined });
  o.log(`helios ${mode}: ${tr.capturing ? "captured step replayed (HELIOS_CAPTURE=1)" : "eager step"}`);
  const tok = readSafetensors(batchesPath).tensors.get("tokens")!.data as Int32Array;
  const W = o.seq + 1, n = o.batch * o.seq;
  const losses: number[] = [], ms: number[] = [];
  const t0 = performance.now();
  let error: string | undefined;
  for (let s = 0; s < o.steps; s++) {
    const idx = new Int32Array(n), targets = new Int32Array(n);
    for (let b = 0; b < o.batch; b++) {
      const base = (s * o.batch + b) * W;
      idx.set(tok.subarray(base, base + o.seq), b * o.seq);
      targets.set(tok.subarray(base + 1, base + W), b * o.seq);
    }
    const r = tr.step(shardBatch({ idx, targets, B: o.batch, T: o.seq }, pg?.rank ?? 0, pg?.worldSize ?? 1));
    losses.push(r.loss);
    ms.push(r.ms);
    if (o.steps > 1 && (s < 3 || (s + 1) % 10 === 0)) o.log(`helios ${mode} step ${s + 1}: loss ${r.loss.toFixed(4)}  ${r.ms.toFixed(1)} ms`);
    // Ranks stop together: the slowest one's time decides, every 10 steps.
    const elapsed = (performance.now() - t0) / 1000;
    const late = tr.ddp ? (s + 1) % 10 === 0 && tr.ddp.combine("suite time", [elapsed], ["max"])[0] > o.maxSeconds : elapsed > o.maxSeconds;
    if (late && s + 1 < o.steps) {
      error = `stopped after ${s + 1} of ${o.steps} steps (--max-seconds=${o.maxSeconds})`;
      break;
    }
  }
  const stats = B.stats?.();
  const pool = stats?.pool;
  if (tr.ddp && pg) {
    // the global loss of each step (the mean over ranks), and each rank's throughput
    const all = pg.allGatherNumbers("suite losses", [...losses, medianWindow(ms) ?? NaN]);
    for (let i = 0; i < losses.length; i++) losses[i] = all.reduce((a, r) => a + r[i], 0) / all.length;
    const perRank = all.map((r) => ((o.batch / pg.worldSize) * o.seq) / (r[losses.length] / 1000));
    o.log(`helios ${mode}: ${pg.worldSize} ranks, tokens/s per rank ${perRank.map((x) => x.toFixed(0)).join(", ")}`);
    tr.ddp.destroy();
    const res = side(losses, ms, pool?.peakBytes ?? 0, n);
    res.perRankTokensPerSec = perRank;
    for (const t of [...tr.params.values(), ...tr.opt.m.values(), ...tr.opt.v.values()]) B.releaseGpuTensor?.(t);
    if (error) res.error = error;
    return res;
  }
  const res = side(losses, ms, pool?.peakBytes ?? 0, n);
  res.peakLiveBytes = pool?.peakLeasedBytes;
  res.estimateBytes = estimateLiveSet(o.model, o.batch, o.seq, tr.model.matmul16, tr.model.headRows(n), tr.model.heads !== null, tr.model.f32Fused).peak;
  if (pool) {
    const mib = (b: number | undefined) => (b === undefined ? "?" : (b / 2 ** 20).toFixed(1));
    o.log(`helios ${mode} memory: pool peak ${mib(pool.peakBytes)} MiB, live-set peak ${mib(pool.peakLeasedBytes)} MiB, ` +
      `model estimate ${mib(res.estimateBytes)} MiB, in-batch reuses ${pool.inBatchReuses ?? "?"}, weights prepacked ${stats?.matmulPrepacks ?? "?"}`);
  }
  // The capture pins every buffer it uses: free it before the next mode.
  tr.dropCapture();
  for (const t of [...tr.params.values(), ...tr.opt.m.values(), ...tr.opt.v.values()]) B.releaseGpuTensor?.(t);
  if (error) res.error = error;
  return res;
}

function runTorch(o: TrainSuiteOptions, initPath: string, batchesPath: string): Record<string, SideResult> {
  const out = path.join(o.workDir, "torch.json");
  const script = path.resolve(here, "../../../bench/train/torch_gpt.py");
  const p = spawnSync(o.python, [script, "--init", initPath, "--batches", batchesPath, "--steps", String(o.steps), "--modes", o.torchModes, "--out", out], {
    stdio: ["ignore", "inherit", "inherit"],
    timeout: 420_000,
  });
  if (p.status !== 0 || !existsSync(out)) {
    const why = p.error ? p.error.message : `exit ${p.status}`;
    return { unavailable: { losses: [], ms: [], medianMs: null, firstStepMs: null, tokensPerSec: null, peakBytes: 0, error: `PyTorch reference did not run (${why})` } };
  }
  const j = JSON.parse(readFileSync(out, "utf8")) as { modes: Record<string, { losses?: number[]; ms?: number[]; peak_bytes?: number; error?: string }> };
  const res: Record<string, SideResult> = {};
  for (const [m, r] of Object.entries(j.modes)) {
    res[m] = r.error ? { losses: [], ms: [], medianMs: null, firstStepMs: null, tokensPerSec: null, peakBytes: 0, error: r.error } : side(r.losses ?? [], r.ms ?? [], r.peak_bytes ?? 0, o.batch * o.seq);
  }
  return res;
}

function parity(h: SideResult, t: Record<string, SideResult>): TrainSuiteResult["parity"] {
  const ref = t.f32_strict ?? t.f32;
  const against = t.f32_strict ? "torch f32 (TF32 off)" : "torch f32";
  if (!ref || ref.losses.length === 0) return { ok: null, steps: 0, worstRelErr: null, against, note: "no PyTorch f32 losses" };
  const n = Math.min(20, h.losses.length, ref.losses.length);
  let worst = 0;
  for (let i = 0; i < n; i++) worst = Math.max(worst, Math.abs(h.losses[i] - ref.losses[i]) / Math.abs(ref.losses[i]));
  return { ok: n > 0 && worst <= 0.01, steps: n, worstRelErr: worst, against: `helios f32 vs ${against}` };
}

function fmtRow(name: string, r: SideResult): string {
  const mib = r.peakBytes ? (r.peakBytes / 2 ** 20).toFixed(0) + " MiB" : "-";
  if (r.error && r.losses.length === 0) return `${name.padEnd(16)} ${r.error}`;
  const first = r.firstStepMs === null ? "-" : `${(r.firstStepMs / 1000).toFixed(2)} s`;
  return `${name.padEnd(16)} ${(r.tokensPerSec ?? 0).toFixed(0).padStart(10)} tok/s ${(r.medianMs ?? 0).toFixed(1).padStart(9)} ms/step  first step ${first.padStart(8)}  peak ${mib}${r.error ? "  (" + r.error + ")" : ""}`;
}

export interface TrainSuiteInput extends Partial<TrainSuiteOptions> {
  /** The tiny configuration's defaults (seconds-long smoke run) instead of GPT-2 124M's. */
  tiny?: boolean;
  /** Backend to train on; a new HeliosBackend on the default device when absent. */
  backend?: TrainBackend;
}

/** Entry point for `helios bench --suite=train` (options as parsed by parseTrainSuiteArgs). */
export function runTrainSuite(input: TrainSuiteInput = {}): TrainSuiteResult {
  const { tiny, backend, ...rest } = input;
  const o: TrainSuiteOptions = { ...defaultSuiteOptions(tiny ?? false), ...rest };
  if (o.dist && o.dist.rank !== 0) o.log = () => {};
  if (o.dist && o.torch) {
    o.log("train suite: data parallel runs Helios only (the PyTorch side is bench/torch_ddp.py)");
    o.torch = false;
  }
  const B = backend ?? asTrainBackend(new HeliosBackend());
  const info = deviceInfo(B);
  if (info) o.log(`device: ${info.deviceName} (${info.deviceType ?? "?"}), pipeline cache from ${info.pipelineCacheSource ?? "?"}`);
  return runSuite(B, o);
}

function deviceInfo(B: TrainBackend): { deviceName: string; deviceType?: string; pipelineCacheSource?: string } | undefined {
  return (B as { getDeviceInfo?: () => { deviceName: string; deviceType?: string; pipelineCacheSource?: string } }).getDeviceInfo?.();
}

/** Parses `--tiny --steps=N --batch=B --seq=T --layers=L --dim=C --heads=H --vocab=V --max-seconds=S
 * --no-torch --torch-modes=a,b --helios-modes=f32,matmul16 --python=P --work-dir=D --out=F` (--gpus=N:
 * trainSuiteCommand). */
export function parseTrainSuiteArgs(args: string[]): TrainSuiteInput {
  const tiny = args.includes("--tiny");
  const d = defaultSuiteOptions(tiny);
  const o: TrainSuiteInput = { tiny };
  const model = { ...d.model };
  for (const a of args) {
    if (a === "--tiny") continue;
    if (a === "--no-torch") { o.torch = false; continue; }
    const m = /^--([a-z-]+)=(.*)$/.exec(a);
    if (!m) throw new Error(`train suite: unexpected argument ${a}`);
    const [, k, v] = m;
    const n = Number(v);
    switch (k) {
      case "steps": o.steps = n; break;
      case "batch": o.batch = n; break;
      case "seq": o.seq = n; model.blockSize = Math.max(model.blockSize, n); break;
      case "layers": model.layers = n; break;
      case "dim": model.dim = n; break;
      case "heads": model.heads = n; break;
      case "vocab": model.vocab = n; break;
      case "max-seconds": o.maxSeconds = n; break;
      case "torch-modes": o.torchModes = v; break;
      case "helios-modes": o.heliosModes = v; break;
      case "python": o.python = v; break;
      case "work-dir": o.workDir = v; break;
      case "out": o.out = v; break;
      default: throw new Error(`train suite: unknown option --${k}`);
    }
  }
  o.model = model;
  return o;
}

function runSuite(B: TrainBackend, o: TrainSuiteOptions): TrainSuiteResult {
  o.log(`train suite: ${o.model.layers}L/${o.model.dim}/${o.model.heads}h vocab ${o.model.vocab}, ${(paramCount(o.model) / 1e6).toFixed(1)}M params, B ${o.batch}, T ${o.seq}, ${o.steps} steps`);
  // One rank writes the shared inputs; the others wait for them.
  const paths = !o.dist || o.dist.rank === 0 ? writeInputs(o) : inputPaths(o);
  o.dist?.barrier();
  const { init, batches } = paths;
  // PyTorch first: it runs in a subprocess that frees the GPU when it exits, while Helios' pool
  // (and a captured step's pinned buffers) stay allocated until this process ends.
  const torch = o.torch ? runTorch(o, init, batches) : {};
  const helios: Record<string, SideResult> = {};
  for (const mode of o.heliosModes.split(",").filter(Boolean)) {
    if (mode !== "f32" && mode !== "matmul16") throw new Error(`train suite: unknown Helios mode ${mode} (f32, matmul16)`);
    try {
      helios[mode] = runHelios(B, o, init, batches, mode);
    } catch (e) {
      // a lost rank ends the job: no table from what is left
      if ((e as { code?: string }).code === "ERR_HELIOS_DIST_ABORTED") throw e;
      helios[mode] = { losses: [], ms: [], medianMs: null, firstStepMs: null, tokensPerSec: null, peakBytes: 0, error: String(e instanceof Error ? e.message : e) };
    }
  }
  const hf32 = helios.f32 ?? Object.values(helios)[0];
  const par = hf32 ? parity(hf32, torch) : { ok: null, steps: 0, worstRelErr: null, against: "", note: "no Helios run" };
  o.log("");
  for (const [m, r] of Object.entries(helios)) o.log(fmtRow(`helios ${m}`, r));
  for (const [m, r] of Object.entries(torch)) o.log(fmtRow(`torch ${m}`, r));
  const cols = [...Object.entries(helios).map(([m, r]) => [`h:${m}`, r] as const), ...Object.entries(torch).map(([m, r]) => [`t:${m}`, r] as const)];
  o.log("\nstep  " + cols.map(([m]) => m.padEnd(12)).join(""));
  for (let i = 0; i < Math.min(20, o.steps); i++) {
    o.log(`${String(i + 1).padStart(4)}  ` + cols.map(([, r]) => (r.losses[i]?.toFixed(5) ?? "-").padEnd(12)).join(""));
  }
  o.log(`\nparity (${par.against}, first ${par.steps} steps, <= 1%): ${par.ok === null ? "not checked: " + par.note : par.ok ? "PASS" : "FAIL"}` +
    (par.worstRelErr !== null ? ` (worst ${(par.worstRelErr * 100).toFixed(3)}%)` : ""));
  const result: TrainSuiteResult = {
    meta: {
      model: o.model, batch: o.batch, seq: o.seq, steps: o.steps, optim: o.optim, seed: o.seed,
      helios: "f32: f32 storage and compute. matmul16: f16 matmul operands (weights cast once per step), f32 accumulation, f32 master weights, LayerNorm, attention and loss; dynamic loss scaling from 1024",
      // own file, shipped seed or empty: what the first step's pipeline compiles started from
      pipelineCacheSource: deviceInfo(B)?.pipelineCacheSource ?? null,
      timestamp: new Date().toISOString(),
    },
    helios, torch, parity: par,
  };
  if (o.out && (!o.dist || o.dist.rank === 0)) {
    mkdirSync(path.dirname(path.resolve(o.out)), { recursive: true });
    writeFileSync(o.out, JSON.stringify(result, null, 1));
    o.log(`wrote ${o.out}`);
  }
  return result;
}

/**
 * The suite as a command (`helios bench --suite=train`, bench/train/cli.ts): with --gpus=N outside
 * a job, the same command as N ranks through the launcher; inside one, this rank's part. Resolves
 * with the exit status (1 when the parity check ran and failed).
 */
export async function trainSuiteCommand(args: string[]): Promise<number> {
  const { gpus, rest } = takeGpus(args);
  const input = parseTrainSuiteArgs(rest);
  const launched = await relaunch(gpus, args);
  if (launched !== null) return launched;
  const dist = joinJob(gpus);
  try {
    return runTrainSuite({ ...input, dist }).parity.ok === false ? 1 : 0;
  } finally {
    dist?.destroy();
  }
}
