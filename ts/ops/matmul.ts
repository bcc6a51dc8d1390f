// Host side of matmul and its transposed variants. Same-dtype f32/f16 products go through the
// matmul planner (ts/kernels/matmul: tensor-core tiles for f16 on devices with cooperative
// matrices, its tuned SIMT kernels elsewhere); mixed dtypes and a batch-broadcast A, which the
// planner's layouts cannot express, use the backend's own SIMT kernel.
import type { Dtype, TensorData } from "../types.js";
import { type Engine, run, promote } from "../engine.js";
import type { HeliosTensor } from "../tensor.js";
import { contiguousStrides, fail, matmulGeometry, size } from "../shape.js";
import { MATMUL_PUSH, matmulKernel, type MatmulTile } from "../kernels/matmul.js";
import { chooseMatmul, planMatmul, type MatmulCaps, type MatmulDtype, type BindingRole, type ScratchRole, type MatmulPlan, type MatmulProblem } from "../kernels/matmul/index.js";
import type { MatmulRuntime } from "../kernels/matmul/device.js";
import { readMatmulConfig } from "../kernels/matmul/config.js";
import type { KernelDesc } from "../ir/index.js";
import type { Lease } from "../exec/lease.js";
import { broadcast } from "./layout.js";
import { packPays, prepackedB } from "./prepack.js";
import { racePlans } from "../kernels/matmul/race.js";

const capsByEngine = new WeakMap<Engine, MatmulCaps>();

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
 * The plan for a product: HELIOS_MATMUL_VARIANT when it can serve, the tuner's cached winner,
 * or — the first time a shape class runs eagerly (not inside a capture) where tunesOnDevice —
 * a fresh tuning run (the tuner submits its own batches, so the work queued so far is submitted
 * first); the planner's default otherwise. Memoized per problem, so the tuning cache file is read
 * once per shape.
 */
function choosePlan(E: Engine, problem: MatmulProblem): MatmulPlan {
  let memo = plansByEngine.get(E);
  if (!memo) plansByEngine.set(E, (memo = new Map()));
  const key = JSON.stringify(problem);
  const hit = memo.get(key);
  if (hit) return hit;
  const rt = tunerRuntime(E);
  let plan: MatmulPlan;
  if (!rt) {
    plan = planMatmul(problem, capsOf(E));
  } else {
    const cached = chooseMatmul(rt, problem, { tune: false });
    const tunable = cached.source === "default" && tunesOnDevice(E);
    if (tunable && !E.capture) {
      E.sched.submit();
      plan = chooseMatmul(rt, problem, { tune: true }).plan;
    } else {
      plan = cached.plan;
    }
    // a default chosen inside a capture is not final: tune when it next runs eagerly
    if (tunable && E.capture) return plan;
  }
  memo.set(key, plan);
  return plan;
}

/** A GPU (not a CPU device such as lavapipe) with HELIOS_AUTOTUNE on. */
function tunesOnDevice(E: Engine): boolean {
  return E.device.deviceType !== "cpu" && readMatmulConfig().autotune;
}

/** Whether the backend tunes matmul shape classes on this engine (see choosePlan). */
export function matmulTunesHere(E: Engine): boolean {
  return tunesOnDevice(E) && tunerRuntime(E) !== null;
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

const layoutRaces = new WeakMap<Engine, Map<string, [number, number]>>();

/**
 * Whether `flipped` (the product with B in its other layout) repays a copy of B over `uses`
 * products (packPays): both layouts' tuned plans (tuned now where missing) raced head to head,
 * once per problem. Never on devices that do not tune (nothing measured there) or in a capture.
 */
function packedLayoutPays(E: Engine, flipped: MatmulProblem, bytes: number, uses: number): boolean {
  const rt = tunerRuntime(E);
  if (!rt || !tunesOnDevice(E) || E.capture) return false;
  let memo = layoutRaces.get(E);
  if (!memo) layoutRaces.set(E, (memo = new Map()));
  const key = JSON.stringify(flipped);
  let ms = memo.get(key);
  if (!ms) {
    const plain = { ...flipped, transB: !flipped.transB };
    const plans = [choosePlan(E, plain), choosePlan(E, flipped)];
    E.sched.submit();
    const [msPlain, msPacked] = racePlans(rt, [{ problem: plain, plan: plans[0] }, { problem: flipped, plan: plans[1] }]);
    memo.set(key, (ms = [msPlain, msPacked]));
  }
  return packPays(ms[0], ms[1], bytes, uses);
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
  recordPlan(E, op, A, B, out, problem);
  return true;
}

/** Records the chosen plan's steps for `problem` over these operands. */
function recordPlan(E: Engine, op: string, A: TensorData, B: TensorData, out: HeliosTensor, problem: MatmulProblem): void {
  const plan = choosePlan(E, problem);
  const pipes = plan.steps.map((s) => E.kernel({ matmulPlan: descId(s.desc) }, () => s.desc));
  E.withInputs(op, [A, B], ([la, lb]) => {
    const scratch = (Object.entries(plan.scratch) as [ScratchRole, number][]).map(([role, bytes]) => [role, E.pool.lease(bytes)] as const);
    try {
      const roles: Partial<Record<BindingRole, Lease | null>> = { A: la, B: lb, C: out.lease, ...Object.fromEntries(scratch) };
      plan.steps.forEach((s, i) => {
        const bufs = s.bindings.map((r) => roles[r] ?? null);
        E.dispatch(pipes[i], bufs, s.groups, s.pushFields, s.pushValues, [out]);
      });
    } finally {
      // the runtime keeps a released buffer out of circulation until the GPU is done with it
      for (const [, lease] of scratch) lease.release();
    }
  });
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
    recordPlan(E, op, A, use.B, out, use.transB === transB ? problem : { ...problem, transB: use.transB });
    for (const t of temps) E.release(t);
    return out;
  }
  // 128-wide tiles (8x8 per thread) once the output fills enough of them to occupy the GPU
  const tile: MatmulTile = g.m >= 128 && g.n >= 128 && g.m * g.n * g.batch >= 512 * 512 ? 128 : 64;
  const variant = { aDtype: A.dtype, bDtype: B.dtype, outDtype, transA, transB, tile };
  run(E, op, { matmul: variant }, () => matmulKernel(variant), MATMUL_PUSH,
    { M: g.m, N: g.n, K: g.k, strideA: sa, strideB: sb }, [A, B], [out],
    [Math.ceil(g.n / tile), Math.ceil(g.m / tile), g.batch]);
  for (const t of temps) E.release(t);
  void contiguousStrides;
  return out;
}
