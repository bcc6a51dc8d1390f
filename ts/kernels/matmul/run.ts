// Records, runs and times matmul plans on a MatmulRuntime. Used by the tuner, the bench and the
// GPU-host correctness script; the backend records plans through its own batch (recordPlan).
import type { MatmulPlan } from "./plan.js";
import type { BindingRole } from "./common.js";
import type { MatmulRuntime } from "./device.js";

export type PlanBuffers = Partial<Record<BindingRole, number>>;

import type { KernelDesc } from "../../ir/index.js";

interface PipelineCache {
  /** By description object: the planner memoizes them, so this is the common hit. */
  byDesc: WeakMap<KernelDesc, number>;
  /** By content, for equal descriptions built as distinct objects. */
  byJson: Map<string, number>;
}

const pipelines = new WeakMap<object, PipelineCache>();

/**
 * Compiles (once per runtime and kernel description) the pipelines of a plan. A hit costs one
 * WeakMap lookup: serializing a coopmat description (~200 KB of JSON, ~1 ms) on every record
 * left the GPU idle most of the tuner's and bench's warm-up, and its clocks fell (RESULTS.md).
 */
function cacheOf(rt: MatmulRuntime): PipelineCache {
  let cache = pipelines.get(rt);
  if (!cache) {
    cache = { byDesc: new WeakMap(), byJson: new Map() };
    pipelines.set(rt, cache);
  }
  return cache;
}

/**
 * Compiles the pipelines of many plans in one compileKernels call (the driver builds them on
 * several threads: a coopmat tile takes 0.2-1 s alone, and the tuner and the check phase need
 * dozens). Without compileKernels (the test interpreter) it does nothing: pipelinesOf compiles
 * each on first use. Throws if any description fails to compile.
 */
export function precompilePlans(rt: MatmulRuntime, plans: MatmulPlan[]): void {
  if (!rt.compileKernels) return;
  const c = cacheOf(rt);
  const pending = new Map<string, KernelDesc[]>();
  for (const plan of plans) {
    for (const s of plan.steps) {
      if (c.byDesc.has(s.desc)) continue;
      const json = JSON.stringify(s.desc);
      const h = c.byJson.get(json);
      if (h !== undefined) c.byDesc.set(s.desc, h);
      else pending.set(json, [...(pending.get(json) ?? []), s.desc]);
    }
  }
  if (pending.size === 0) return;
  const jsons = [...pending.keys()];
  const handles = rt.compileKernels(jsons);
  jsons.forEach((json, i) => {
    c.byJson.set(json, handles[i]);
    for (const d of pending.get(json) ?? []) c.byDesc.set(d, handles[i]);
  });
}

export function pipelinesOf(rt: MatmulRuntime, plan: MatmulPlan): number[] {
  const c = cacheOf(rt);
  return plan.steps.map((s) => {
    let h = c.byDesc.get(s.desc);
    if (h !== undefined) return h;
    const json = JSON.stringify(s.desc);
    h = c.byJson.get(json);
    if (h === undefined) {
      h = rt.compileKernel(json);
      c.byJson.set(json, h);
    }
    c.byDesc.set(s.desc, h);
    return h;
  });
}

/** Records the plan's dispatches into the open batch. */
export function recordPlan(rt: MatmulRuntime, plan: MatmulPlan, bufs: PlanBuffers): void {
  const pipes = pipelinesOf(rt, plan);
  plan.steps.forEach((s, i) => {
    const handles = s.bindings.map((role) => {
      const h = bufs[role];
      if (h === undefined) throw new Error(`matmul ${plan.variant}: no buffer bound for '${role}'`);
      return h;
    });
    rt.recordDispatch(pipes[i], handles, s.groups, new Uint8Array(s.push));
  });
}

/**
 * Runs `record` inside its own batch. Pipelines are compiled before the batch opens, and a batch
 * left open by a failing record is submitted (with what was recorded) so the caller's next batch
 * can begin.
 */
export function inBatch(rt: MatmulRuntime, opts: { profile?: boolean } | undefined, record: () => void): number {
  rt.beginBatch(opts);
  try {
    record();
  } catch (err) {
    try {
      rt.waitTimeline(rt.submitBatch());
    } catch {
      // the original error is the one to report
    }
    throw err;
  }
  const tl = rt.submitBatch();
  rt.waitTimeline(tl);
  return tl;
}

export function runPlan(rt: MatmulRuntime, plan: MatmulPlan, bufs: PlanBuffers): void {
  pipelinesOf(rt, plan);
  inBatch(rt, undefined, () => recordPlan(rt, plan, bufs));
}

export interface TimingOptions {
  warmup: number;
  /**
   * Keep the GPU busy this long (ms, wall clock) before timing: after idle time the clock
   * governor runs short bursts at idle SM clocks (345 MHz on the H100 instead of 1980).
   */
  warmMs?: number;
  iters: number;
  repeats: number;
  /** Told how the warm-up went: batches submitted and their wall-clock ms. */
  onWarm?: (batches: number, wallMs: number) => void;
}

/**
 * GPU time per iteration (ms; the sum of the plan's dispatches), `repeats` arrays of `iters`,
 * from timestamps written around each dispatch (beginBatch({profile: true}) + batchProfile).
 */
export function timePlan(rt: MatmulRuntime, plan: MatmulPlan, bufs: PlanBuffers, t: TimingOptions): number[][] {
  pipelinesOf(rt, plan);
  if (t.warmup > 0) inBatch(rt, undefined, () => { for (let i = 0; i < t.warmup; i++) recordPlan(rt, plan, bufs); });
  let batches = 0;
  const w0 = performance.now();
  for (; performance.now() - w0 < (t.warmMs ?? 0); batches++) {
    inBatch(rt, undefined, () => { for (let i = 0; i < Math.max(1, t.warmup); i++) recordPlan(rt, plan, bufs); });
  }
  t.onWarm?.(batches, performance.now() - w0);
  // each repeat one profiled batch of the plan alone
  const alone = [{ plan, bufs }];
  return Array.from({ length: t.repeats }, () => timeInterleaved(rt, alone, { warmup: 0, iters: t.iters, order: () => [0] })[0]);
}

export interface TimedItem {
  plan: MatmulPlan;
  bufs: PlanBuffers;
}

/**
 * GPU ms per product of several plans timed in one batch, in turns: pass p gives every item, in the
 * order `order(p)`, a turn of `turn` products; the first `warmup` passes are not timed. Each plan
 * then runs at the clock the others run at, so a clock that the board's power cap moves within
 * milliseconds (H200 at 8192³) shifts them alike. Returns each item's timed products' ms.
 */
export function timeInterleaved(rt: MatmulRuntime, items: readonly TimedItem[], t: { warmup: number; iters: number; turn?: number; order: (pass: number) => number[] }): number[][] {
  for (const it of items) pipelinesOf(rt, it.plan);
  const turn = Math.max(1, t.turn ?? 1);
  const seq: { item: number; timed: boolean }[] = [];
  const tl = inBatch(rt, { profile: true }, () => {
    for (let p = 0; p < t.warmup + t.iters; p++) {
      for (const i of t.order(p)) {
        for (let j = 0; j < turn; j++) {
          recordPlan(rt, items[i].plan, items[i].bufs);
          seq.push({ item: i, timed: p >= t.warmup });
        }
      }
    }
  });
  const prof = rt.batchProfile(tl);
  const dispatches = seq.reduce((n, e) => n + items[e.item].plan.steps.length, 0);
  if (prof.length !== dispatches) {
    throw new Error(`matmul timing: batchProfile returned ${prof.length} entries for ${dispatches} dispatches`);
  }
  const out: number[][] = items.map(() => []);
  let at = 0;
  for (const e of seq) {
    const steps = items[e.item].plan.steps.length;
    let ns = 0;
    for (let s = 0; s < steps; s++) ns += prof[at + s].gpuNs;
    at += steps;
    if (e.timed) out[e.item].push(ns / 1e6);
  }
  return out;
}
