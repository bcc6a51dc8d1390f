// The matmul auto-tuner. Per (device, driver, dtype, shape class) it times the candidate variants
// with GPU timestamps, drops any that fail the correctness gate (sampled fp64 check on the tuned
// shape), and persists the winner in <cacheDir>/matmul-tune-v1.json. Without a cache entry the
// package's shipped data (shipped.ts) is consulted before tuning. HELIOS_MATMUL_VARIANT forces a
// variant; HELIOS_AUTOTUNE=0 uses the default heuristic. When the backend tunes is its own policy
// (ts/ops/matmul.ts: deferred or eager).
import { statSync } from "node:fs";
import { join } from "node:path";
import { readCacheFile, writeCacheFile } from "../../cache-file.js";
import { readMatmulConfig, type MatmulConfig } from "./config.js";
import type { MatmulDeviceInfo, MatmulRuntime } from "./device.js";
import { MatmulFixture } from "./fixture.js";
import { candidateVariants, planMatmul, unsupported, type MatmulCaps, type MatmulPlan } from "./plan.js";
import { isPlainEpilogue } from "./common.js";
import { variantByName } from "./variants.js";
import { normalize, type MatmulProblem, type NormalizedProblem } from "./problem.js";
import { tolerance } from "./reference.js";
import { precompilePlans, runPlan, timeInterleaved, type PlanBuffers } from "./run.js";
import { median } from "../../stats.js";
import { startup, type Phase } from "../../startup/index.js";
import { shippedRecord, type TuneRecord } from "./shipped.js";

export const CACHE_FILE = "matmul-tune-v1.json";

const warned = new Set<string>();
function warnOnce(msg: string): void {
  if (warned.has(msg)) return;
  warned.add(msg);
  process.emitWarning(`helios: ${msg}`);
}

export type { TuneRecord } from "./shipped.js";

type CacheData = Record<string, TuneRecord>;

/**
 * Shapes in one class share a winner: half-octave buckets of M, N, K (whole octaves put 3072 and
 * 4096 in one class, tuned at whichever came first: H100 run 4), plus layout, batching and the
 * epilogue's kind: none, the GELU gradient (its own: GPT-2's MLP backward product has the shape
 * and layout of the fc forward with its bias, whose winner it must not take as its own), or any
 * other.
 */
export function shapeClass(p: NormalizedProblem): string {
  const b = (x: number) => Math.min(28, Math.max(8, Math.round(2 * Math.log2(x))));
  const e = p.epilogue;
  return [
    `m${b(p.m)}n${b(p.n)}k${b(p.k)}`,
    p.batch > 1 ? "batched" : "single",
    `${p.transA ? "T" : "N"}${p.transB ? "T" : "N"}`,
    isPlainEpilogue(e) ? "plain" : e.geluGrad ? "dgelu" : "epi",
  ].join("/");
}

export function tuneKey(dev: MatmulDeviceInfo, p: NormalizedProblem): string {
  const driver = String(dev.driverVersion ?? dev.driverInfo ?? "?");
  const dt = `${p.dtype}${p.accF16 ? "+acc16" : ""}->${p.outDtype}`;
  return `${dev.deviceName}|${driver}|${dt}|${shapeClass(p)}`;
}

/** A tuning cache past this is not one Helios wrote (a few hundred bytes per shape class). */
const MAX_CACHE_BYTES = 64 << 20;

/**
 * The last cache file read, by its size and modification time: a lookup made inside a caller's
 * loop (prepacking's, at the first product after a sync) re-reads and re-parses the file only when
 * another process or a tuning run changed it.
 */
let lastRead: { path: string; size: number; mtimeMs: number; data: CacheData } | null = null;

function readCache(dir: string): CacheData {
  const path = join(dir, CACHE_FILE);
  try {
    // no file (nothing tuned yet) is the common case: no exception built for it (~0.2 ms each)
    const st = statSync(path, { throwIfNoEntry: false });
    if (!st) return {};
    if (lastRead && lastRead.path === path && lastRead.size === st.size && lastRead.mtimeMs === st.mtimeMs) return lastRead.data;
    const text = readCacheFile(path, MAX_CACHE_BYTES)?.toString("utf8");
    const j = text === undefined ? {} : JSON.parse(text);
    const data = j && typeof j === "object" ? (j as CacheData) : {};
    lastRead = { path, size: st.size, mtimeMs: st.mtimeMs, data };
    return data;
  } catch {
    return {};
  }
}

function writeCache(dir: string, data: CacheData): void {
  lastRead = null;
  try {
    writeCacheFile(join(dir, CACHE_FILE), JSON.stringify(data, null, 1));
  } catch (err) {
    process.emitWarning(`helios: could not write the matmul tuning cache in ${dir}: ${String(err)}`);
  }
}

export function capsOf(dev: MatmulDeviceInfo): MatmulCaps {
  return {
    coopMatSupported: dev.coopMatSupported,
    coopMat2Supported: dev.coopMat2Supported,
    coopMatShapes: dev.coopMatShapes,
    f16Supported: dev.f16Supported,
    bf16Supported: dev.bf16Supported,
    subgroupSize: dev.subgroupSize,
    maxSharedMemoryBytes: dev.maxSharedMemoryBytes,
  };
}

export interface ChooseOptions {
  config?: MatmulConfig;
  /** Timing per candidate (kept small: tuning happens on first use). */
  warmup?: number;
  iters?: number;
  allowLowPrecisionF32?: boolean;
  /** Re-tune even when the cache has an entry. */
  force?: boolean;
  /**
   * false: never time anything now (cache hit or default). Tuning submits its own batches, so a
   * caller with a batch open (the backend while recording) passes false and tunes later.
   */
  tune?: boolean;
  onProgress?: (msg: string) => void;
  /** Called as each stage of a tuning run ends (progress lines). */
  onStage?: (stage: TuneStage, ms: number) => void;
}

export type TuneStage = "compile" | "gate" | "rounds";

/** "plain": the cached or shipped winner of the problem's class without its epilogue (see chooseMatmul). */
export type ChoiceSource = "forced" | "cache" | "shipped" | "plain" | "tuned" | "default";

/** Picks the plan for `problem`: forced variant, cached winner, fresh tuning, or the default. */
export function chooseMatmul(rt: MatmulRuntime, problem: MatmulProblem, opts: ChooseOptions = {}): { plan: MatmulPlan; source: ChoiceSource; record?: TuneRecord } {
  const cfg = opts.config ?? readMatmulConfig();
  const dev = rt.getDeviceInfo();
  const caps = capsOf(dev);
  const planOpts = { allowLowPrecisionF32: opts.allowLowPrecisionF32 };
  if (cfg.variant) {
    const forced = variantByName(cfg.variant); // an unknown name is a typo: throw
    const why = unsupported(forced, normalize(problem), caps);
    if (!why) return { plan: planMatmul(problem, caps, { ...planOpts, variant: cfg.variant }), source: "forced" };
    // A forced variant that cannot run this problem (another dtype, unaligned shape) must not break
    // every other matmul: say so once per reason and choose as if unforced.
    warnOnce(`HELIOS_MATMUL_VARIANT=${cfg.variant} ignored for ${problem.m}x${problem.n}x${problem.k} ${problem.dtype}: ${why}`);
  }
  if (!cfg.autotune) return { plan: planMatmul(problem, caps, planOpts), source: "default" };
  const p = normalize(problem);
  const key = tuneKey(dev, p);
  const cache = readCache(cfg.cacheDir);
  // a stale entry (variant renamed or no longer supported) is passed over: shipped, then tune again
  const known: [TuneRecord | undefined, "cache" | "shipped" | "plain"][] = opts.force ? [] : [[cache[key], "cache"], [shippedRecord(cfg.shippedFile, key), "shipped"]];
  if (!opts.force && (!isPlainEpilogue(p.epilogue) || p.outDtype !== p.dtype)) {
    // An epilogue class nobody tuned runs the winner of its plain class (same output dtype, else
    // the inputs' dtype: an f32-output epilogue replaces a 16-bit product and the elementwise pass
    // after it) with the epilogue added. Bias and residual cost every tile about the same (H200
    // session 10: the bias 15 µs of a 284 µs product), so the plain ranking is the best guess
    // there is; the untuned default can be far from it. The GELU gradient (the MLP backward's
    // product) reads an M×N tensor as the residual does, plus a few exp-based flops per element.
    // A plain f32 output of 16-bit operands (linear's xT weight gradients) likewise replaces the
    // 16-bit product and its cast, and its own class comes first.
    const plain = { ...p.epilogue, scale: 1, bias: false, act: "none" as const, residual: false, geluGrad: false };
    for (const outDtype of new Set([p.outDtype, p.dtype])) {
      const plainKey = tuneKey(dev, { ...p, outDtype, epilogue: plain });
      if (plainKey !== key) known.push([cache[plainKey], "plain"], [shippedRecord(cfg.shippedFile, plainKey), "plain"]);
    }
  }
  for (const [rec, source] of known) {
    if (!rec) continue;
    try {
      return { plan: planMatmul(problem, caps, { ...planOpts, variant: rec.variant }), source, record: rec };
    } catch {
      // stale: try the next
    }
  }
  if (opts.tune === false) return { plan: planMatmul(problem, caps, planOpts), source: "default" };
  const record = tune(rt, p, caps, opts);
  if (!record) return { plan: planMatmul(problem, caps, planOpts), source: "default" };
  cache[key] = record;
  writeCache(cfg.cacheDir, { ...readCache(cfg.cacheDir), [key]: record });
  return { plan: planMatmul(problem, caps, { ...planOpts, variant: record.variant }), source: "tuned", record };
}

/**
 * The tuning record chooseMatmul would plan `problem` by (the cache's, else the package's shipped
 * one), without planning it: no kernel description is built, so a decision that only compares
 * timings (prepacking, ts/ops/matmul.ts) costs a lookup, not the milliseconds of building a tile it
 * will not run. A record whose variant is unknown or cannot serve the problem does not count.
 */
export function knownRecord(rt: MatmulRuntime, problem: MatmulProblem, config?: MatmulConfig, device?: MatmulDeviceInfo): TuneRecord | undefined {
  const cfg = config ?? readMatmulConfig();
  if (!cfg.autotune) return undefined;
  // the caller's copy when it has one: the runtime builds a fresh object per call (~0.1 ms)
  const dev = device ?? rt.getDeviceInfo();
  const p = normalize(problem);
  const key = tuneKey(dev, p);
  for (const rec of [readCache(cfg.cacheDir)[key], shippedRecord(cfg.shippedFile, key)]) {
    if (!rec) continue;
    try {
      if (!unsupported(variantByName(rec.variant), p, capsOf(dev))) return rec;
    } catch {
      // a variant renamed since the record was made: the next one, as chooseMatmul does
    }
  }
  return undefined;
}

/**
 * Timing rounds of the tuner. Every round is one batch in which the candidates take turns of about
 * TURN_MS of GPU time each (timeInterleaved), passes in serpentine order, rotated: each candidate
 * runs at the clock the others run at. Separate batches of 10 products per candidate (~26 ms at
 * 8192³) were read at whatever clock the previous candidates' power draw had left: on the H200 at
 * 8192³, where the board sits at its power cap, a candidate timed after a slower, cooler one read up
 * to 5 % fast, and the tuner picked a tile that the parity suite then timed 3 % slower than its
 * stream-K twin. Turns of one product are no answer for short products: switching kernels costs a
 * few microseconds, which at 2048³ (0.05 ms) reranked the tiles by their switching cost
 * (bench/RESULTS.md, session 14). Each candidate's time is the median of its round medians.
 */
export const TUNE_ROUNDS = 4;

/** GPU time per turn: one product at 8192³ on the H200 (2.6 ms), 8 products at 3072³ and below. */
export const TURN_MS = 2;

/** Products per turn for a product of `ms`: enough for TURN_MS, at most `iters`. */
export function turnLength(ms: number, iters: number): number {
  return Math.max(1, Math.min(iters, Math.ceil(TURN_MS / Math.max(ms, 1e-6))));
}

/**
 * Each entry's per-round GPU ms over TUNE_ROUNDS rounds, each round `warmup` untimed and then enough
 * timed passes over all entries (passOrder) for `iters` products each, after 100 ms of such passes (a
 * GPU timed right after an idle gap runs at idle clocks). Every entry first runs once on its own:
 * one whose run throws goes to `failed` and is left out (without `failed` the error propagates).
 * `entry(i)` gives the plan and its buffers; they are fetched once every entry has run, because a
 * fixture's scratch only grows and a later entry's bigger workspace may replace an earlier one's.
 */
export function timeInRounds(
  rt: MatmulRuntime, entries: (() => { plan: MatmulPlan; bufs: PlanBuffers })[], t: { warmup?: number; iters?: number },
  failed?: (i: number, err: unknown) => void,
): number[][] {
  const rounds: number[][] = entries.map(() => []);
  const live: number[] = [];
  entries.forEach((entry, i) => {
    try {
      const { plan, bufs } = entry();
      runPlan(rt, plan, bufs);
      live.push(i);
    } catch (err) {
      if (!failed) throw err;
      failed(i, err);
    }
  });
  if (live.length === 0) return rounds;
  try {
    const items = live.map((i) => entries[i]());
    const n = items.length;
    const iters = Math.max(1, t.iters ?? 8);
    let probe: number[][] = [];
    for (const w0 = performance.now(); probe.length === 0 || performance.now() - w0 < 100; ) {
      probe = timeInterleaved(rt, items, { warmup: 0, iters: 1, order: (p) => passOrder(n, p) });
    }
    const turn = turnLength(median(probe.map((ms) => ms[0])), iters);
    for (let r = 0; r < TUNE_ROUNDS; r++) {
      const ms = timeInterleaved(rt, items, { warmup: t.warmup ?? 2, iters: Math.ceil(iters / turn), turn, order: (p) => passOrder(n, r + p) });
      ms.forEach((xs, j) => rounds[live[j]].push(median(xs)));
    }
  } catch (err) {
    if (!failed) throw err;
    for (const i of live) failed(i, err);
  }
  return rounds;
}

/** The position of each candidate in round r (serpentine: odd rounds run backwards). */
export function roundOrder(n: number, r: number): number[] {
  const fwd = Array.from({ length: n }, (_, i) => i);
  return r % 2 ? fwd.reverse() : fwd;
}

/**
 * The order of pass p of a round: serpentine (roundOrder), rotated by ⌊p / 2⌋, so no candidate
 * always follows the same one and each takes every position in turn.
 */
export function passOrder(n: number, p: number): number[] {
  const o = roundOrder(n, p);
  const k = Math.floor(p / 2) % n;
  return [...o.slice(k), ...o.slice(0, k)];
}

/**
 * Candidates whose plan dispatches exactly the kernels, grids and push constants of an earlier one
 * (name → that one's name).
 */
export function duplicatePlans(names: string[], plans: (MatmulPlan | Error)[]): Map<string, string> {
  const first = new Map<string, string>();
  const dup = new Map<string, string>();
  plans.forEach((plan, i) => {
    if (plan instanceof Error) return;
    const key = JSON.stringify(plan.steps.map((st) => [st.desc.name, st.groups, st.pushValues]));
    const f = first.get(key);
    if (f === undefined) first.set(key, names[i]);
    else dup.set(names[i], f);
  });
  return dup;
}

function tune(rt: MatmulRuntime, p: NormalizedProblem, caps: MatmulCaps, opts: ChooseOptions): TuneRecord | null {
  const cands = candidateVariants(p, caps, { allowLowPrecisionF32: opts.allowLowPrecisionF32 });
  if (cands.length <= 1) return null;
  const fx = new MatmulFixture(rt, p, 11);
  const results: TuneRecord["candidates"] = [];
  try {
    const plans = cands.map((v) => {
      try {
        return planMatmul(p, caps, { variant: v.name });
      } catch (err) {
        return err instanceof Error ? err : new Error(String(err));
      }
    });
    try {
      stage(opts, "tune-compile", "compile", `${cands.length} candidates`, () => precompilePlans(rt, plans.filter((x): x is MatmulPlan => !(x instanceof Error))));
    } catch {
      // a candidate that does not compile fails below, on its own
    }
    // 1. the correctness gate, every candidate once; a twin whose form does not apply to this
    // problem (pair staging, a second stage, stream-K on edge tiles) plans the kernels of another
    // candidate and is not timed again
    const timed: { name: string; plan: MatmulPlan; relErr: number }[] = [];
    const dup = duplicatePlans(cands.map((v) => v.name), plans);
    stage(opts, "tune-gate", "gate", shapeClass(p), () => cands.forEach((v, i) => {
      try {
        const plan = plans[i];
        if (plan instanceof Error) throw plan;
        const first = dup.get(v.name);
        if (first !== undefined) {
          results.push({ variant: v.name, ms: null, relErr: null, error: `runs the kernels of ${first}` });
          return;
        }
        fx.poisonC();
        runPlan(rt, plan, fx.buffers(plan));
        const relErr = fx.spotError(32);
        const tol = tolerance(p, plan.lowPrecision);
        if (!(relErr <= tol)) {
          results.push({ variant: v.name, ms: null, relErr, error: `failed the gate (${relErr.toExponential(2)} > ${tol})` });
          return;
        }
        timed.push({ name: v.name, plan, relErr });
      } catch (err) {
        results.push({ variant: v.name, ms: null, relErr: null, error: err instanceof Error ? err.message : String(err) });
      }
    }));
    // 2. interleaved timing rounds
    const failed = new Set<number>();
    const rounds = stage(opts, "tune-rounds", "rounds", shapeClass(p), () => timeInRounds(rt, timed.map((c) => () => ({ plan: c.plan, bufs: fx.buffers(c.plan) })), opts, (i, err) => {
      failed.add(i);
      results.push({ variant: timed[i].name, ms: null, relErr: timed[i].relErr, error: err instanceof Error ? err.message : String(err) });
    }));
    timed.forEach((c, i) => {
      if (failed.has(i)) return;
      const ms = median(rounds[i]);
      results.push({ variant: c.name, ms, relErr: c.relErr });
      opts.onProgress?.(`tune ${p.m}x${p.n}x${p.k} ${c.name}: ${ms.toFixed(4)} ms (rounds ${rounds[i].map((x) => x.toFixed(4)).join(", ")})`);
    });
  } finally {
    fx.destroy();
  }
  const ok = results.filter((r) => r.ms !== null).sort((a, b) => (a.ms as number) - (b.ms as number));
  if (ok.length === 0) return null;
  return {
    variant: ok[0].variant,
    ms: ok[0].ms as number,
    tunedShape: `${p.batch}x${p.m}x${p.n}x${p.k}`,
    at: new Date().toISOString(),
    candidates: results,
  };
}

/** Runs one stage of a tuning run: timed under the startup trace, reported to onStage. */
function stage<T>(opts: ChooseOptions, phase: Phase, name: TuneStage, label: string, fn: () => T): T {
  const { trace } = startup();
  const t = performance.now();
  try {
    return trace ? trace.time(phase, label, fn) : fn();
  } finally {
    opts.onStage?.(name, performance.now() - t);
  }
}
