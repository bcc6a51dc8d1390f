// Host side of matmul and its transposed variants. Same-dtype f32/f16 products go through the
// matmul planner (ts/kernels/matmul: tensor-core tiles for f16 on devices with cooperative
// matrices, its tuned SIMT kernels elsewhere); mixed dtypes and a batch-broadcast A, which the
// planner's layouts cannot express, use the backend's own SIMT kernel.
import type { Dtype, TensorData } from "../types.js";
import { type Engine, run, promote } from "../engine.js";
import type { HeliosTensor } from "../tensor.js";
import { contiguousStrides, fail, fmt, matmulGeometry, sameShape, size } from "../shape.js";
import { MATMUL_PUSH, matmulKernel, type MatmulTile } from "../kernels/matmul.js";
import { chooseMatmul, knownRecord, normalize, planMatmul, tuneKey, type MatmulCaps, type MatmulDtype, type BindingRole, type EpilogueRole, type ScratchRole, type MatmulPlan, type MatmulProblem, type MatmulStep } from "../kernels/matmul/index.js";
import type { MatmulDeviceInfo, MatmulRuntime } from "../kernels/matmul/device.js";
import { readMatmulConfig } from "../kernels/matmul/config.js";
import type { KernelDesc } from "../ir/index.js";
import type { Lease } from "../exec/lease.js";
import { broadcast } from "./layout.js";
import { PACK_MIN_GAIN_CACHED, packPays, prepackedB } from "./prepack.js";
import { splitUse, type SplitUse } from "./split-cache.js";
import { splitKey, takeAhead, type AheadUse } from "./split-ahead.js";
import type { TuneRecord } from "../kernels/matmul/autotune.js";
import { captureError } from "../exec/scheduler.js";
import { atExit, startup } from "../startup/index.js";

const capsByEngine = new WeakMap<Engine, MatmulCaps>();

const deviceByEngine = new WeakMap<Engine, MatmulDeviceInfo>();

/** The engine's device info as the tuner reads it (tuning keys, record lookups), made once. */
function tunerDevice(E: Engine): MatmulDeviceInfo {
  let d = deviceByEngine.get(E);
  if (!d) deviceByEngine.set(E, (d = { ...E.device, coopMatSupported: !!E.device.coopMatSupported }));
  return d;
}

function capsOf(E: Engine): MatmulCaps {
  let c = capsByEngine.get(E);
  if (!c) {
    const d = E.device;
    c = {
      coopMatSupported: !!d.coopMatSupported, coopMat2Supported: !!d.coopMat2Supported,
      coopMatShapes: d.coopMatShapes as MatmulCaps["coopMatShapes"], f16Supported: d.f16Supported,
      bf16Supported: d.bf16Supported as boolean | undefined, subgroupSize: d.subgroupSize, maxSharedMemoryBytes: d.maxSharedMemoryBytes,
    };
    capsByEngine.set(E, c);
  }
  return c;
}

const splitsByEngine = new WeakMap<Engine, boolean>();

/**
 * Whether f32 products on this engine's device run on split operands (the planner's default for
 * f32: bf16 tensor cores over hi/lo parts), so splitting an operand ahead (split-ahead.ts) saves
 * their split dispatches; the answer of the default plan of one aligned f32 product.
 */
export function f32ProductsSplit(E: Engine): boolean {
  let v = splitsByEngine.get(E);
  if (v === undefined) {
    const probe: MatmulProblem = { m: 1024, n: 1024, k: 1024, dtype: "f32", outDtype: "f32" };
    try {
      v = planMatmul(probe, capsOf(E)).spec.kind === "presplit";
    } catch {
      v = false;
    }
    splitsByEngine.set(E, v);
  }
  return v;
}

/** Planner descriptions are memoized objects: a small id per object keys the pipeline cache. */
const descIds = new WeakMap<KernelDesc, number>();
let nextDescId = 0;
function descId(d: KernelDesc): number {
  let id = descIds.get(d);
  if (id === undefined) descIds.set(d, (id = nextDescId++));
  return id;
}

const plansByEngine = new WeakMap<Engine, Map<string, MatmulPlan>>();

/**
 * The plan for a product: HELIOS_MATMUL_VARIANT when it can serve, the tuner's cached winner, the
 * package's shipped winner, or the planner's default. A shape class met untuned on a GPU is tuned
 * by policy (HELIOS_AUTOTUNE): "deferred" queues it for tunePendingMatmuls and runs the default at
 * once, so no product call ever times candidates; "eager" tunes it here, the first time it runs
 * outside a capture (the tuner submits its own batches, so the work queued so far is submitted
 * first). Memoized per problem, so the tuning cache file is read once per shape.
 */
function choosePlan(E: Engine, problem: MatmulProblem): MatmulPlan {
  let memo = plansByEngine.get(E);
  if (!memo) plansByEngine.set(E, (memo = new Map()));
  const key = JSON.stringify(problem);
  const hit = memo.get(key);
  if (hit) return hit;
  const rt = tunerRuntime(E);
  if (!rt) {
    const plan = planMatmul(problem, capsOf(E));
    memo.set(key, plan);
    return plan;
  }
  const known = chooseMatmul(rt, problem, { tune: false });
  const untuned = known.source === "default" && tunesOnDevice(E);
  const mode = readMatmulConfig().tuneMode;
  if (untuned && mode === "eager") {
    // a default chosen inside a capture is not final: tune when it next runs eagerly
    if (E.capture) return known.plan;
    E.sched.submit();
    const tuned = chooseMatmul(rt, problem, { tune: true }).plan;
    memo.set(key, tuned);
    return tuned;
  }
  if (untuned) queueUntuned(E, rt, problem);
  memo.set(key, known.plan);
  return known.plan;
}

/** Shape classes each engine met untuned (deferred tuning), by tuning-cache key. */
const pendingByEngine = new WeakMap<Engine, Map<string, MatmulProblem>>();
/** The same keys over every engine: what the exit note counts. */
const pendingKeys = new Set<string>();

function queueUntuned(E: Engine, rt: MatmulRuntime, problem: MatmulProblem): void {
  let q = pendingByEngine.get(E);
  if (!q) pendingByEngine.set(E, (q = new Map()));
  const key = tuneKey(rt.getDeviceInfo(), normalize(problem));
  if (q.has(key)) return;
  q.set(key, problem);
  if (pendingKeys.size === 0 && !exitNoted) noteAtExit();
  pendingKeys.add(key);
}

let exitNoted = false;

/** At exit, says how many classes ran untuned and how to tune them (silent under HELIOS_PROGRESS=0). */
function noteAtExit(): void {
  exitNoted = true;
  atExit(() => pendingKeys.size === 0 ? null :
    `${pendingKeys.size} matmul shape class(es) ran on the planner's default, untuned (HELIOS_AUTOTUNE=deferred); ` +
    "`helios warmup` with this model's flags, or HeliosBackend.tunePending() at a point of your choosing, tunes them once for this machine");
}

export interface TunePendingResult {
  /** Classes that were pending. */
  classes: number;
  /** Of those, classes the tuner found a winner for (the rest have one candidate or none passed). */
  tuned: number;
  ms: number;
}

/**
 * Tunes the shape classes this engine met untuned, persisting the winners in the tuning cache;
 * products recorded after this take them. Submits the work recorded so far (the tuner runs its
 * own batches). Refused inside a capture (ERR_HELIOS_CAPTURE): the capture could not hold the
 * tuner's batches.
 */
export function tunePendingMatmuls(E: Engine): TunePendingResult {
  if (E.capture) throw captureError("tunePending", "cannot tune inside a capture: call it before beginCapture or after endCapture");
  const q = pendingByEngine.get(E);
  const rt = tunerRuntime(E);
  const t0 = performance.now();
  if (!q || q.size === 0 || !rt) return { classes: 0, tuned: 0, ms: 0 };
  E.sched.submit();
  const list = [...q];
  q.clear();
  const { progress } = startup();
  const what = "tuning matmul shape classes";
  progress?.begin(what, list.length);
  let tuned = 0;
  list.forEach(([key, problem], i) => {
    const label = `${problem.dtype} ${problem.m}x${problem.n}x${problem.k}`;
    const onStage = (stage: string, ms: number) => progress?.unit(what, `${label}: ${stage}`, ms, { n: i + 1, total: list.length });
    if (chooseMatmul(rt, problem, { tune: true, onStage }).source === "tuned") tuned++;
    pendingKeys.delete(key);
  });
  progress?.end();
  plansByEngine.delete(E); // later products plan again and find the winners
  return { classes: list.length, tuned, ms: performance.now() - t0 };
}

/** A GPU (not a CPU device such as lavapipe) with HELIOS_AUTOTUNE on. */
function tunesOnDevice(E: Engine): boolean {
  return E.device.deviceType !== "cpu" && readMatmulConfig().autotune;
}

/** Whether products tune their shape class on first eager use here (HELIOS_AUTOTUNE=eager on a GPU). */
export function matmulTunesHere(E: Engine): boolean {
  return tunesOnDevice(E) && readMatmulConfig().tuneMode === "eager" && tunerRuntime(E) !== null;
}

/** The runtime as the tuner needs it (the full native API; the test mock lacks it). */
function tunerRuntime(E: Engine): MatmulRuntime | null {
  const r = E.rt as unknown as Partial<MatmulRuntime>;
  const needs: (keyof MatmulRuntime)[] = ["createBuffer", "destroyBuffer", "batchProfile", "recordDispatch", "readBuffer"];
  return needs.every((k) => typeof r[k] === "function") ? (r as MatmulRuntime) : null;
}

/** Storage dtype the planner sees (f64 tensors live as f32), or null when it cannot serve. */
function plannerDtype(a: Dtype, b: Dtype): MatmulDtype | null {
  const s = (d: Dtype) => (d === "f64" ? "f32" : d);
  const x = s(a);
  if (x !== s(b) || (x !== "f32" && x !== "f16")) return null;
  return x;
}

/** The planner's problem for these operands, or null when the planner cannot take them. */
function plannerProblem(
  A: TensorData, B: TensorData, out: TensorData, g: { m: number; n: number; k: number; batch: number },
  transA: boolean, transB: boolean, broadcastB: boolean, extra: { scale?: number } = {},
): MatmulProblem | null {
  const dtype = plannerDtype(A.dtype, B.dtype);
  const outDtype = plannerDtype(out.dtype, out.dtype);
  if (!dtype || !outDtype || (outDtype !== dtype && outDtype !== "f32")) return null;
  const epilogue = extra.scale !== undefined && extra.scale !== 1 ? { scale: extra.scale } : undefined;
  return { m: g.m, n: g.n, k: g.k, batch: g.batch, transA, transB, broadcastB, dtype, outDtype, epilogue };
}

/**
 * Whether `flipped` (the product with B in its other layout) repays a copy of B over `uses`
 * products, judged from the tuning cache: both layouts' tuned records, scaled to this problem's
 * size, must show a gain that clears the noise between separate tuning runs (packPays with
 * PACK_MIN_GAIN_CACHED). No tuning or timing runs here: this is asked in the middle of the
 * caller's work (a timed loop included), where a race would cost more than any pack repays.
 * A layout that was never tuned is never packed to.
 */
function packedLayoutPays(E: Engine, flipped: MatmulProblem, bytes: number, uses: number): boolean {
  const rt = tunerRuntime(E);
  if (!rt || !tunesOnDevice(E) || E.capture) return false;
  const plain = { ...flipped, transB: !flipped.transB };
  const [a, b] = [plain, flipped].map((p) => knownRecord(rt, p, undefined, tunerDevice(E)));
  if (!a || !b) return false;
  const flops = 2 * plain.m * plain.n * plain.k * (plain.batch ?? 1);
  const msOf = (r: TuneRecord) => (r.ms * flops) / tunedFlops(r.tunedShape);
  return packPays(msOf(a), msOf(b), bytes, uses, PACK_MIN_GAIN_CACHED);
}

/** FLOPs of a tuning record's shape ("batch x m x n x k"). */
function tunedFlops(shape: string): number {
  const [batch, m, n, k] = shape.split("x").map(Number);
  return 2 * batch * m * n * k;
}

/**
 * Records planMatmul's steps for C = scale · op(A) op(B) over `batch` contiguous batches (B
 * shared by every batch when broadcastB), written in `out`'s dtype (the inputs' or f32).
 * Returns false when the planner cannot take the problem.
 */
export function planned(
  E: Engine, op: string, A: TensorData, B: TensorData, out: HeliosTensor,
  g: { m: number; n: number; k: number; batch: number }, transA: boolean, transB: boolean, broadcastB: boolean,
  extra: { scale?: number } = {},
): boolean {
  const problem = plannerProblem(A, B, out, g, transA, transB, broadcastB, extra);
  if (!problem) return false;
  recordPlan(E, op, { A, B }, out, problem);
  return true;
}

/** Products recorded per engine, by the kind of kernel that ran them (getMatmulCoopStats). */
export interface MatmulCounts {
  total: number;
  /** On tensor cores (cooperative-matrix tiles; f32 operands through the bf16 hi/lo split). */
  coop: number;
  /** f32 operands split into bf16 hi/lo parts for the tensor cores (counted in coop too). */
  presplit: number;
  /** On the SIMT kernels (f32 tiles, mixed dtypes, devices without cooperative matrices). */
  simt: number;
}

const countsByEngine = new WeakMap<Engine, MatmulCounts>();

export function matmulCounts(E: Engine): MatmulCounts {
  let c = countsByEngine.get(E);
  if (!c) countsByEngine.set(E, (c = { total: 0, coop: 0, presplit: 0, simt: 0 }));
  return c;
}

function countProduct(E: Engine, kind: "coop" | "presplit" | "simt"): void {
  const c = matmulCounts(E);
  c.total++;
  if (kind === "simt") c.simt++;
  else c.coop++;
  if (kind === "presplit") c.presplit++;
}

/** The tensors a plan reads: the operands, and the epilogue's when it has them (by binding role). */
interface PlanInputs extends Partial<Record<EpilogueRole, TensorData | null>> {
  A: TensorData;
  B: TensorData;
}

const EPILOGUE_ROLES: readonly EpilogueRole[] = ["bias", "residual", "preact"];

/** Records the chosen plan's steps for `problem` over these operands. */
function recordPlan(E: Engine, op: string, inputs: PlanInputs, out: HeliosTensor, problem: MatmulProblem): void {
  const plan = choosePlan(E, problem);
  countProduct(E, plan.spec.kind);
  const pipes = plan.steps.map((s) => E.kernel({ matmulPlan: descId(s.desc) }, () => s.desc));
  const { A, B } = inputs;
  const epi = EPILOGUE_ROLES.flatMap((role) => (inputs[role] ? [[role, inputs[role]] as const] : []));
  // an f32 operand split ahead (ts/ops/split-ahead.ts): its split step is skipped, and the operand
  // itself is not bound (a pending one stays pending)
  const ahead = plan.spec.kind === "presplit" ? aheadUses(E, plan, { A, B }) : new Map<ScratchRole, AheadUse>();
  const skipA = ahead.has("splitA"), skipB = ahead.has("splitB");
  const bound = [...(skipA ? [] : [A]), ...(skipB ? [] : [B]), ...epi.map(([, t]) => t)];
  try {
    E.withInputs(op, bound, (got) => {
      const la = skipA ? null : got.shift() ?? null;
      const lb = skipB ? null : got.shift() ?? null;
      // an f32 operand's split: a kept copy of it is read instead (ts/ops/split-cache.ts)
      const splits = plan.spec.kind === "presplit" ? splitUses(E, plan, { A: [A, la], B: [B, lb] }, ahead) : new Map<ScratchRole, SplitUse>();
      const scratch = (Object.entries(plan.scratch) as [ScratchRole, number][])
        .filter(([role]) => !splits.get(role)?.copy && !ahead.has(role))
        .map(([role, bytes]) => [role, E.pool.lease(bytes)] as const);
      const kept = new Set<Lease>();
      try {
        const roles: Partial<Record<BindingRole, Lease | null>> = { A: la, B: lb, C: out.lease, ...Object.fromEntries(scratch) };
        for (const [role, use] of splits) if (use.copy) roles[role] = use.copy;
        for (const [role, use] of ahead) roles[role] = use.split.lease;
        epi.forEach(([role], i) => (roles[role] = got[i]));
        plan.steps.forEach((s, i) => {
          const to = s.bindings[1] as ScratchRole;
          const split = isSplitStep(s.bindings);
          if (split && ahead.has(to)) return;
          const use = split ? splits.get(to) : undefined;
          if (use?.copy) return;
          const bufs = s.bindings.map((r) => roles[r] ?? null);
          E.dispatch(pipes[i], bufs, s.groups, s.pushFields, s.pushValues, [out]);
          const written = roles[to];
          if (use && written && use.keep(written)) kept.add(written);
        });
      } finally {
        // the runtime keeps a released buffer out of circulation until the GPU is done with it
        for (const [, lease] of scratch) if (!kept.has(lease)) lease.release();
      }
    });
  } finally {
    for (const [, use] of ahead) use.done();
  }
}

/** A presplit plan's split steps read an operand (A or B) and write its scratch (splitA, splitB). */
function isSplitStep(bindings: readonly BindingRole[]): boolean {
  return bindings.length === 2 && (bindings[0] === "A" || bindings[0] === "B") && (bindings[1] === "splitA" || bindings[1] === "splitB");
}

/** A split step's layout key: the kernel (layout) and the split's geometry. */
function stepSplitKey(s: MatmulStep): string {
  return splitKey(s.desc.name, s.pushValues.n, s.pushValues.seg);
}

/** The splits made ahead that this plan's split steps can read instead, by the scratch role each writes. */
function aheadUses(E: Engine, plan: MatmulPlan, src: Record<"A" | "B", TensorData>): Map<ScratchRole, AheadUse> {
  const uses = new Map<ScratchRole, AheadUse>();
  for (const s of plan.steps) {
    if (!isSplitStep(s.bindings)) continue;
    const use = takeAhead(E, src[s.bindings[0] as "A" | "B"], stepSplitKey(s));
    if (use) uses.set(s.bindings[1] as ScratchRole, use);
  }
  return uses;
}

/** Each split step's use of the split cache (those not split ahead), by the scratch role it writes. */
function splitUses(E: Engine, plan: MatmulPlan, src: Record<"A" | "B", [TensorData, Lease | null]>, ahead: Map<ScratchRole, AheadUse>): Map<ScratchRole, SplitUse> {
  const uses = new Map<ScratchRole, SplitUse>();
  for (const s of plan.steps) {
    if (!isSplitStep(s.bindings) || ahead.has(s.bindings[1] as ScratchRole)) continue;
    const [t, lease] = src[s.bindings[0] as "A" | "B"];
    uses.set(s.bindings[1] as ScratchRole, splitUse(E, t, lease, stepSplitKey(s)));
  }
  return uses;
}

export function matmul(E: Engine, op: string, a: TensorData, b: TensorData, transA: boolean, transB: boolean): HeliosTensor {
  if (a.dtype === "i32" || b.dtype === "i32") fail(op, `expects floating-point operands, got ${a.dtype} x ${b.dtype}`);
  const g = matmulGeometry(op, a.shape, b.shape, transA, transB);
  const outDtype: Dtype = promote(a.dtype, b.dtype);
  const out = E.alloc(g.outShape, outDtype);
  if (size(g.outShape) === 0) return out;
  if (g.k === 0) return E.filled(g.outShape, outDtype, 0);
  let A = a, B = b;
  let sa = g.batchStrideA, sb = g.batchStrideB;
  const temps: HeliosTensor[] = [];
  if (g.batchIndex) {
    // Batch broadcasting that one stride cannot express: expand operands to the full batch.
    const bs = g.batchIndex.shape;
    const ea = broadcast(E, a, [...bs, ...a.shape.slice(-2)]);
    const eb = broadcast(E, b, [...bs, ...b.shape.slice(-2)]);
    temps.push(ea, eb);
    A = ea;
    B = eb;
    sa = g.m * g.k;
    sb = g.k * g.n;
  }
  if (g.batch > 65535) fail(op, `batch ${g.batch} exceeds 65535`);
  const plainA = g.batch === 1 || sa === g.m * g.k;
  const plainB = g.batch === 1 || sb === g.k * g.n;
  const problem = plainA && (plainB || sb === 0) ? plannerProblem(A, B, out, g, transA, transB, g.batch > 1 && !plainB) : null;
  if (problem) {
    const use = prepackedB(E, B, problem, (flipped, bytes, uses) => packedLayoutPays(E, flipped, bytes, uses));
    recordPlan(E, op, { A, B: use.B }, out, use.transB === transB ? problem : { ...problem, transB: use.transB });
    for (const t of temps) E.release(t);
    return out;
  }
  // 128-wide tiles (8x8 per thread) once the output fills enough of them to occupy the GPU
  const tile: MatmulTile = g.m >= 128 && g.n >= 128 && g.m * g.n * g.batch >= 512 * 512 ? 128 : 64;
  const variant = { aDtype: A.dtype, bDtype: B.dtype, outDtype, transA, transB, tile };
  countProduct(E, "simt");
  run(E, op, { matmul: variant }, () => matmulKernel(variant), MATMUL_PUSH,
    { M: g.m, N: g.n, K: g.k, strideA: sa, strideB: sb }, [A, B], [out],
    [Math.ceil(g.n / tile), Math.ceil(g.m / tile), g.batch]);
  for (const t of temps) E.release(t);
  void contiguousStrides;
  return out;
}

export interface LinearOptions {
  /** W stored [in, out] (y = x·W + bias) instead of nn.Linear's [out, in] (y = x·Wᵀ + bias). */
  inOut?: boolean;
  /**
   * x stored [K, M] and used transposed (y = xᵀ·Wᵀ + bias, xᵀ·W with inOut): a weight gradient
   * dW = dyᵀ·x [out, in] is linear(dy, x, null, { xT: true, inOut: true, outDtype: "f32" }) for
   * dy [tokens, out] and x [tokens, in], written in f32 by the product's kernel (no f16 product
   * and cast pass). The epilogue's terms keep their [M, N] shapes.
   */
  xT?: boolean;
  /** Added last: [M, N] in the output dtype. */
  residual?: TensorData | null;
  /**
   * Multiplies x·Wᵀ + bias by GELU's derivative at this [M, N] tensor (output dtype) before the
   * residual: the backward of y = gelu(f) through a product, df = (dy·W) ⊙ gelu'(f), with no dy·W
   * written (the formula of geluBackward).
   */
  geluGradOf?: TensorData | null;
  /** The output dtype: x's and W's (the default) or f32. */
  outDtype?: Dtype;
}

/**
 * y = (x·Wᵀ + bias) ⊙ gelu'(geluGradOf) + residual for x [M, K] ([K, M] with xT, used as xᵀ) and
 * W [N, K] ([K, N] with inOut), each term optional, written as `outDtype`. Through the matmul
 * planner (x and W of one float dtype, residual and geluGradOf in the output dtype) the terms are
 * the kernel's epilogue, applied to the f32 accumulator and rounded once at the store. Otherwise
 * the product, then one fused elementwise kernel for the terms (computed in f32; the product
 * rounded to its own dtype first, as matmul writes it).
 */
export function linear(E: Engine, op: string, x: TensorData, W: TensorData, bias: TensorData | null, o: LinearOptions = {}): HeliosTensor {
  const { M, N, K, outDtype } = checkLinear(op, x, W, bias, o);
  const residual = o.residual ?? null;
  const preact = o.geluGradOf ?? null;
  const out = E.alloc([M, N], outDtype);
  if (M * N === 0) return out;
  const xT = o.xT ?? false, inOut = o.inOut ?? false;
  const problem = K > 0 ? linearProblem(x, W, { bias, residual, preact }, out, xT, inOut, { m: M, n: N, k: K }) : null;
  if (problem) {
    recordPlan(E, op, { A: x, B: W, bias, residual, preact }, out, problem);
    return out;
  }
  E.release(out);
  const xw = matmul(E, op, x, W, xT, !inOut);
  const parts: HeliosTensor[] = [xw];
  let y = xw;
  // f32 until the last term, which writes outDtype
  const last = residual ? "residual" : preact ? "preact" : "bias";
  const dt = (term: string): Dtype => (term === last ? outDtype : "f32");
  if (bias) parts.push((y = E.binary(op, y, bias, "add", [], dt("bias"))));
  if (preact) parts.push((y = E.binary(op, preact, y, "geluBwd", [], dt("preact"))));
  if (residual) parts.push((y = E.binary(op, y, residual, "add", [], outDtype)));
  if (y.dtype !== outDtype) parts.push((y = E.unary(op, y, "copy", [], outDtype)));
  // a 16-bit result is stored now (as castDtype does): a pending one would skip its rounding
  if (outDtype === "f16") E.materialize(y);
  for (const t of parts) if (t !== y) E.release(t);
  return y;
}

function checkLinear(op: string, x: TensorData, W: TensorData, bias: TensorData | null, o: LinearOptions) {
  const float = (t: TensorData, what: string) => {
    if (t.dtype === "i32") fail(op, `${what} must be a floating-point tensor, got i32`);
  };
  float(x, "x");
  float(W, "W");
  if (x.shape.length !== 2) fail(op, `x must be ${o.xT ? "[K, M] (xT)" : "[M, K]"}, got ${fmt(x.shape)}`);
  if (W.shape.length !== 2) fail(op, `W must be 2-D, got ${fmt(W.shape)}`);
  const [M, K] = o.xT ? [x.shape[1], x.shape[0]] : x.shape;
  const [N, kW] = o.inOut ? [W.shape[1], W.shape[0]] : W.shape;
  if (kW !== K) fail(op, `x ${fmt(x.shape)}${o.xT ? " ([K, M], xT)" : ""} and W ${fmt(W.shape)} (${o.inOut ? "[in, out]" : "[out, in]"}) disagree on K`);
  if (bias) {
    float(bias, "bias");
    if (bias.shape.length !== 1 || bias.shape[0] !== N) fail(op, `bias ${fmt(bias.shape)} must be [${N}]`);
  }
  const outDtype = o.outDtype ?? promote(x.dtype, W.dtype);
  if (outDtype === "i32") fail(op, "outDtype must be a floating-point dtype");
  for (const [what, t] of [["residual", o.residual], ["geluGradOf", o.geluGradOf]] as const) {
    if (!t) continue;
    if (!sameShape(t.shape, [M, N])) fail(op, `${what} ${fmt(t.shape)} must be [${M}, ${N}]`);
    if (t.dtype !== outDtype) fail(op, `${what} dtype ${t.dtype} must be the output dtype ${outDtype}`);
  }
  return { M, N, K, outDtype };
}

/** The planner's problem with the epilogue's tensors, or null when it cannot take them. */
function linearProblem(
  x: TensorData, W: TensorData, epi: Record<EpilogueRole, TensorData | null>, out: TensorData, xT: boolean, inOut: boolean,
  g: { m: number; n: number; k: number },
): MatmulProblem | null {
  const problem = plannerProblem(x, W, out, { ...g, batch: 1 }, xT, !inOut, false);
  if (!problem) return null;
  const { bias, residual, preact } = epi;
  // f64 tensors are stored as f32: the storage dtype is what the kernel reads
  const biasDtype = bias ? plannerDtype(bias.dtype, bias.dtype) : null;
  if (bias && !biasDtype) return null;
  if ([residual, preact].some((t) => t && plannerDtype(t.dtype, t.dtype) !== problem.outDtype)) return null;
  return { ...problem, epilogue: { bias: !!bias, biasDtype: biasDtype ?? undefined, residual: !!residual, geluGrad: !!preact } };
}
