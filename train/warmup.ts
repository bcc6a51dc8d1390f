// `helios warmup`: pays a model's cold start once, so fleet images and CI can bake the caches
// (HELIOS_CACHE_DIR: the matmul tuning cache, the SPIR-V cache and the driver's pipeline cache).
// It runs one training step of the trainer's GPT (train/) on random tokens (every kernel the step needs is
// compiled; each matmul shape class is met), tunes the classes that ran untuned
// (HeliosBackend.tunePending), then runs a second step, which compiles the winners' kernels into
// the pipeline cache. A later process with the same cache dir starts on tuned plans and cached
// pipelines. --export-pipeline-seed=DIR then writes the driver's pipeline cache as a seed for the
// package's data/pipeline-cache: machines with the same GPU model and driver build start from it.
import type { GPTConfig } from "./config.js";
import { checkGPTConfig, DEFAULT_OPTIM, GPT2_124M } from "./config.js";
import { asTrainBackend, type TrainBackend } from "./backend.js";
import { Trainer } from "./trainer.js";
import { existsSync, statSync } from "node:fs";
import { HeliosBackend } from "../ts/backend.js";
import { exportPipelineSeed } from "../ts/device.js";
import { readMatmulConfig } from "../ts/kernels/matmul/config.js";
import { Rng } from "./rng.js";

export interface WarmupOptions {
  model: GPTConfig;
  batch: number;
  seq: number;
  /** 16-bit matmul operands (the trainer's matmul16 mode): other shape classes than f32's. */
  matmul16: boolean;
  /** After the second step, write the pipeline cache as a seed in this directory (exportPipelineSeed). */
  exportPipelineSeed?: string;
  log: (s: string) => void;
}

export interface WarmupResult {
  /** Wall ms of the first step (compiles, default plans), the tuning, and the second step. */
  firstStepMs: number;
  tuneMs: number;
  secondStepMs: number;
  /** Shape classes that ran untuned, and those the tuner found a winner for. */
  classes: number;
  tuned: number;
  /** The seed file written (--export-pipeline-seed). */
  pipelineSeed?: string;
}

export const WARMUP_USAGE = `usage: helios warmup [options]   precompile and tune for a model, baking HELIOS_CACHE_DIR (train/warmup.ts)
  --layers=12 --dim=768 --heads=12 --vocab=50304   GPT shape (the trainer's; GPT-2 124M by default)
  --batch=16 --seq=1024                  step shape
  --matmul16                             16-bit matmul operands (run once per mode the trainer uses)
  --export-pipeline-seed=DIR             then write the pipeline cache as a seed for data/pipeline-cache
  Alpha's trainer flags name two of these differently: --block (= --seq), --vocabSize (= --vocab)`;

/** Parses warmup's flags; throws with the option and value named. */
export function parseWarmupArgs(args: string[]): Omit<WarmupOptions, "log"> {
  const model = { ...GPT2_124M };
  let batch = 16, seq = 1024, matmul16 = false;
  let exportPipelineSeed: string | undefined;
  for (const a of args) {
    if (a === "--matmul16" || a === "--matmul16=true") { matmul16 = true; continue; }
    if (a.startsWith("--export-pipeline-seed=")) { exportPipelineSeed = seedDir(a.slice(23)); continue; }
    const m = /^--(layers|dim|heads|vocab|vocabSize|batch|seq|block)=(.*)$/.exec(a);
    if (!m) throw new Error(`unknown option ${a}`);
    // Alpha's trainer names (alpha train --block=512 --vocabSize=...): the same shape
    if (m[1] === "block") m[1] = "seq";
    if (m[1] === "vocabSize") m[1] = "vocab";
    const n = Number(m[2]);
    if (!/^\d+$/.test(m[2]) || !Number.isSafeInteger(n) || n < 1) throw new Error(`--${m[1]}=${m[2]}: expected a positive integer`);
    if (m[1] === "batch") batch = n;
    else if (m[1] === "seq") seq = n;
    else model[m[1] as "layers" | "dim" | "heads" | "vocab"] = n;
  }
  model.blockSize = Math.max(model.blockSize, seq);
  checkGPTConfig(model);
  return { model, batch, seq, matmul16, ...(exportPipelineSeed === undefined ? {} : { exportPipelineSeed }) };
}

/** A directory the seed can go to: checked before the warmup's work (the native export checks again). */
function seedDir(dir: string): string {
  if (dir === "" || dir.includes("\0")) throw new Error(`--export-pipeline-seed=${dir}: expected a directory`);
  if (existsSync(dir) && !statSync(dir).isDirectory()) throw new Error(`--export-pipeline-seed=${dir}: not a directory`);
  return dir;
}

/** Random tokens below the vocabulary: the kernels and shapes are what matter, not the text. */
function randomBatch(o: Omit<WarmupOptions, "log">, rng: Rng) {
  const n = o.batch * o.seq;
  const idx = new Int32Array(n), targets = new Int32Array(n);
  for (let i = 0; i < n; i++) {
    idx[i] = rng.int(o.model.vocab);
    targets[i] = rng.int(o.model.vocab);
  }
  return { idx, targets, B: o.batch, T: o.seq };
}

/** One step, tunePending, a second step (see the header); `backend` defaults to the native device. */
export function runWarmup(o: WarmupOptions, backend?: HeliosBackend): WarmupResult {
  const H = backend ?? new HeliosBackend();
  const B: TrainBackend = asTrainBackend(H);
  const info = H.getDeviceInfo();
  const m = o.model;
  o.log(`warmup: ${m.layers}L/${m.dim}/${m.heads}h vocab ${m.vocab}, B ${o.batch}, T ${o.seq}, ${o.matmul16 ? "matmul16" : "f32"} on ${info.deviceName}; cache ${readMatmulConfig().cacheDir} (pipeline cache from ${info.pipelineCacheSource ?? "?"})`);
  const rng = new Rng(0x3a7);
  const tr = new Trainer(B, m, { ...DEFAULT_OPTIM, warmup: 0 }, { seed: 1, matmul16: o.matmul16 });
  try {
    const t0 = performance.now();
    tr.step(randomBatch(o, rng));
    const firstStepMs = performance.now() - t0;
    o.log(`warmup: step 1 ${(firstStepMs / 1000).toFixed(1)} s`);
    const r = H.tunePending();
    o.log(`warmup: ${r.classes} matmul shape class(es) ran untuned; ${r.tuned} tuned in ${(r.ms / 1000).toFixed(1)} s` +
      (info.deviceType === "cpu" ? " (a CPU device never tunes)" : ""));
    tr.dropCapture(); // the next step records the winners
    const t1 = performance.now();
    tr.step(randomBatch(o, rng));
    const secondStepMs = performance.now() - t1;
    o.log(`warmup: step 2 ${(secondStepMs / 1000).toFixed(1)} s (tuned plans, their pipelines compiled)`);
    const res: WarmupResult = { firstStepMs, tuneMs: r.ms, secondStepMs, classes: r.classes, tuned: r.tuned };
    if (o.exportPipelineSeed !== undefined) {
      res.pipelineSeed = exportPipelineSeed(o.exportPipelineSeed);
      o.log(`warmup: pipeline-cache seed ${res.pipelineSeed} (ship it in the package's data/pipeline-cache)`);
    }
    return res;
  } finally {
    tr.dropCapture();
    for (const t of [...tr.params.values(), ...tr.opt.m.values(), ...tr.opt.v.values()]) H.releaseGpuTensor(t);
  }
}
