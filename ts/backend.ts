// HeliosBackend: Alpha's Backend interface on the Vulkan runtime. This class only checks
// arguments and routes each op to ts/ops (shape rules and dispatch) or to the fused
// elementwise path in the engine; it holds no kernel logic itself.
import type { Backend, Dtype, Shape, TensorData } from "./types.js";
import { readConfig, type HeliosConfig } from "./config.js";
import { Engine, type EngineStats } from "./engine.js";
import { HeliosTensor } from "./tensor.js";
import { openDevice, runtime } from "./device.js";
import type { DeviceInfo, PoolStats, Runtime } from "./exec/runtime.js";
import { checkShape, fail, fmt, sameShape, size } from "./shape.js";
import { toF16Array, fromF16Array } from "./f16.js";
import * as R from "./ops/reduce.js";
import * as NN from "./ops/nn.js";
import * as L from "./ops/layout.js";
import * as S from "./ops/select.js";
import * as MM from "./ops/matmul.js";
import * as FA from "./ops/attention.js";
import * as OPT from "./ops/optim.js";
import { prepackCounts } from "./ops/prepack.js";
import { dropSplitCopies, splitCacheCounts } from "./ops/split-cache.js";
import { splitAhead, splitAheadCounts, type SplitLayout } from "./ops/split-ahead.js";
import { bindingLimit, checkBindable, matmulOutShape } from "./limits.js";
import * as STEP from "./ops/step.js";
import * as CAP from "./exec/capture.js";
import { Mulberry32 } from "./random.js";
import * as RND from "./ops/random.js";
import { evict } from "./resident.js";
import { WG, storageBytes } from "./kernels/common.js";

export type { CapturedBatch } from "./exec/capture.js";
export type { AdamwTensors, AdamwStepScalars } from "./ops/optim.js";
export type { CastPair } from "./ops/layout.js";

export interface HeliosBackendOptions {
  /** Overrides for the HELIOS_* environment (tests use this to compare fusion on/off). */
  config?: Partial<HeliosConfig>;
  validation?: boolean;
  device?: number | string;
  /** Injected runtime (tests); defaults to the native addon. */
  runtime?: Runtime;
  seed?: number;
}

export interface HeliosStats extends EngineStats {
  /** Weights copied into their faster layout (HELIOS_MATMUL_PREPACK), and products that read such a copy. */
  matmulPrepacks: number;
  matmulPrepackedReads: number;
  /** f32 operand splits kept for reuse (ts/ops/split-cache.ts), products that read one, and their bytes now. */
  matmulSplitsKept: number;
  matmulSplitReads: number;
  matmulSplitBytes: number;
  /** f32 operand splits made ahead (splitOperand), and products or attention calls that read one. */
  matmulSplitsAhead: number;
  matmulSplitAheadReads: number;
  pool: PoolStats;
  /** 1 when an index that never reached the host was out of range and clamped (since last stats()). */
  clampedIndices: number;
}

export class HeliosBackend implements Backend {
  readonly name = "helios";
  private readonly E: Engine;
  private readonly rt: Runtime;
  private rng: Mulberry32;
  /** Largest tensor a kernel may bind (bytes): ops that could exceed it check (ts/limits.ts). */
  private readonly maxBind: number;
  /** The engine's dispatch count at the last resetStepOps. */
  private stepStart = 0;

  constructor(opts: HeliosBackendOptions = {}) {
    this.rt = opts.runtime ?? runtime();
    this.maxBind = bindingLimit(openDevice(this.rt, { device: opts.device, validation: opts.validation }));
    this.E = new Engine(this.rt, { ...readConfig(), ...opts.config });
    this.rng = new Mulberry32(opts.seed ?? 42);
  }

  // ---- trainer-facing extras

  /** Dispatches recorded since the trainer's last resetStepOps (Alpha's trainer reports them per step). */
  get gpuOpsThisStep(): number {
    return this.E.dispatched - this.stepStart;
  }
  resetStepOps(): void {
    this.stepStart = this.E.dispatched;
  }
  /** Submits recorded work without waiting. */
  flush(): void {
    this.E.sched.submit();
  }
  /**
   * Submits recorded work and returns the compute timeline value it signals: a collective that
   * waits for it sees every write recorded so far (ts/distributed/nccl.ts).
   */
  submitted(): number {
    this.E.sched.submit();
    return this.E.sched.lastValue;
  }
  /** A tensor over a buffer the pool does not own (a buffer shared with CUDA); `free` runs at its release. */
  adoptBuffer(handle: number, bytes: number, shape: Shape, dtype: Dtype, free: (handle: number) => void): TensorData {
    return this.E.adopt(handle, bytes, shape, dtype, free);
  }
  /** Copies `src` (flattened) into `dst` starting at element `offset`, in place (gradient buckets). */
  copyInto(dst: TensorData, offset: number, src: TensorData): void {
    L.copyInto(this.E, dst, offset, src);
  }
  /** Submits and waits for everything recorded so far; released tensors' buffers go back to the pool. */
  syncGpu(): void {
    this.E.sched.drain();
    this.E.roundTrips++;
    this.E.recycleReleased();
  }
  /** Drops kept operand splits, waits for the GPU, then returns the pool's free buffers to the driver (trainer hook). */
  purgeBufferPools(): void {
    dropSplitCopies(this.E);
    this.E.sched.drain();
    this.E.recycleReleased();
    const trim = (this.rt as unknown as { trimPool?: () => void }).trimPool;
    if (typeof trim === "function") trim.call(this.rt);
  }
  /** Dispatches pending fused expressions of `ts` now (benchmarks; reads do it implicitly). */
  evaluate(...ts: TensorData[]): void {
    for (const t of ts) if (t instanceof HeliosTensor && !t.released) this.E.materialize(t);
  }
  /**
   * Ends a tensor's use as an op input and lets its buffer be reused: a large one at once, a small
   * one (a loss) at the next syncGpu or host read, staying readable until then (Engine,
   * "release"); a plain host tensor gets its current values back in `data` and its device copy
   * is freed.
   */
  releaseGpuTensor(t: TensorData): void {
    if (t instanceof HeliosTensor) this.E.releaseByCaller(t);
    else if (t && typeof t === "object") evict(t);
  }

  /**
   * Whether matmuls tune their shape class on first eager use here (a GPU, HELIOS_AUTOTUNE=eager).
   * Tuning cannot happen inside a capture, so a caller about to capture runs once eagerly first.
   * Under the default (deferred) no product tunes: see tunePending.
   */
  get tunesMatmuls(): boolean {
    return MM.matmulTunesHere(this.E);
  }
  /**
   * Tunes the matmul shape classes that ran untuned so far (HELIOS_AUTOTUNE=deferred, a GPU) and
   * persists the winners; later products (and later captures) use them. Call it where a pause is
   * fine: `helios warmup` does, after one training step. Refused inside a capture.
   */
  tunePending(): MM.TunePendingResult {
    return MM.tunePendingMatmuls(this.E);
  }

  // ---- captured batches (ts/exec/capture.ts has the rules)

  /** Whether beginCapture can work here (the runtime has captured batches and HELIOS_CAPTURE is on). */
  get canCapture(): boolean {
    return this.E.config.capture && typeof this.rt.captureBatch === "function";
  }
  /** Submits what was recorded, then records everything until endCapture into one kept batch. */
  beginCapture(): void {
    CAP.beginCapture(this.E);
  }
  /** Ends the capture (nothing runs yet); `outputs` are materialized into it first. */
  endCapture(...outputs: TensorData[]): CAP.CapturedBatch {
    for (const t of outputs) if (t instanceof HeliosTensor && !t.released) this.E.materialize(t);
    return CAP.endCapture(this.E);
  }
  /** Drops an open capture after a refused op; nothing recorded in it runs. */
  abortCapture(): void {
    CAP.abortCapture(this.E);
  }
  replay(c: CAP.CapturedBatch): void {
    c.replay();
  }
  destroyCapture(c: CAP.CapturedBatch): void {
    c.destroy();
  }
  /** Overwrites a device tensor's contents in place (its buffer, which captures may bind, stays). */
  writeTensor(t: TensorData, data: ArrayLike<number>): void {
    if (!(t instanceof HeliosTensor)) fail("writeTensor", "expects a tensor of this backend");
    this.E.writeTensor(t, data);
  }
  /**
   * The device, plus the fields Alpha reads from the upstream Helios: `workgroupSize` (the
   * elementwise kernels' workgroup) and `minGpuSize` (always 0: every op runs on the GPU).
   */
  getDeviceInfo(): DeviceInfo & { workgroupSize: number; minGpuSize: number } {
    return { ...this.rt.getDeviceInfo(), workgroupSize: WG, minGpuSize: 0 };
  }

  // ---- the rest of the upstream Helios surface Alpha probes for (docs/backend.md, "Alpha")

  /**
   * The upstream backend ran ops smaller than `n` elements on the CPU. Helios has no CPU path:
   * small ops fuse into their neighbours' kernels instead, so there is no threshold to move.
   * The call is accepted (Alpha's CLI makes it on every run) and says so once on stderr.
   */
  setMinGpuSize(n: number): void {
    if (!Number.isInteger(n) || n < 0) fail("setMinGpuSize", `expects an integer >= 0, got ${n}`);
    if (n > 0 && !minGpuSizeNoted) {
      minGpuSizeNoted = true;
      process.stderr.write(`helios: setMinGpuSize(${n}) has no effect: Helios runs ops of every size on the GPU\n`);
    }
  }

  /**
   * Upstream paused its f16 tensor-core matmul for f32 operands during backward (it rounded
   * them to f16). Helios's f32 products keep f32 accuracy on every path (SIMT, or tensor cores
   * through a bf16 hi/lo split), so there is nothing to pause: the flag is kept for callers and
   * changes no kernel.
   */
  coopMatmulPaused = false;

  /** Products so far by kernel kind, in the upstream's field names (docs/backend.md). */
  getMatmulCoopStats(): {
    totalMatmulDispatches: number; coopDispatches: number; coopDirectDispatches: number; coopPadded2DDispatches: number;
    coopPaddedBatchedDispatches: number; coopTransposedARewriteDispatches: number; coopHitRate: number;
    presplitDispatches: number; simtDispatches: number;
  } {
    const c = MM.matmulCounts(this.E);
    return {
      totalMatmulDispatches: c.total,
      coopDispatches: c.coop,
      // Helios's tiles handle edges and transposes in-kernel: no padded copies, no rewrites
      coopDirectDispatches: c.coop,
      coopPadded2DDispatches: 0,
      coopPaddedBatchedDispatches: 0,
      coopTransposedARewriteDispatches: 0,
      coopHitRate: c.total > 0 ? c.coop / c.total : 0,
      presplitDispatches: c.presplit,
      simtDispatches: c.simt,
    };
  }

  /**
   * Memory figures in the upstream's field names where they carry over: device bytes leased by
   * live tensors and idle in the pool, live leases, released tensors still held for reads.
   * There is no separate output pool or deferred-destroy queue (both 0).
   */
  gpuMemStats(): Record<string, number> {
    const pool = this.rt.poolStats();
    const p = this.E.pool;
    return {
      bufferPoolEntries: pool.freeBuffers ?? 0,
      bufferPoolBytes: pool.freeBytes,
      leasedBytes: pool.leasedBytes,
      peakBytes: pool.peakBytes,
      outputPoolEntries: 0,
      outputPoolBytes: 0,
      outputPoolSizeClasses: 0,
      deferredReleases: this.E.heldReleased,
      pendingDestroys: 0,
      liveAllocs: p.leases - p.frees,
      totalAllocs: pool.allocations,
      totalAllocMB: Math.round((pool.leasedBytes + pool.freeBytes + (pool.aheadBytes ?? 0)) / (1 << 20)),
      poolReuses: pool.reuses,
      allocatedAhead: pool.allocatedAhead ?? 0,
      aheadBytes: pool.aheadBytes ?? 0,
    };
  }

  /** Live leased buffers by size, the `topN` largest totals first: "4.0MB×12, 1.5KB×3". */
  poolBreakdown(topN = 10): string {
    const fmtBytes = (b: number) => (b >= 1 << 20 ? `${(b / (1 << 20)).toFixed(1)}MB` : `${(b / 1024).toFixed(1)}KB`);
    return this.E.pool.liveBySize().slice(0, topN).map(([bytes, count]) => `${fmtBytes(bytes)}×${count}`).join(", ");
  }

  /**
   * Upstream's cooperative-matrix flash attention (no soft cap). Helios's flashAttention already
   * picks tensor-core kernels where the device has them, so this is flashAttention(..., 0).
   */
  flashAttentionCoop(Q: TensorData, K: TensorData, V: TensorData, T: number, scale: number) {
    return FA.flashAttention(this.E, Q, K, V, T, scale, 0);
  }

  /** The kernel that served the last flashAttention, and its problem (null before the first). */
  getLastFlashDispatchDebug(): FA.FlashDispatch | null {
    return FA.lastFlashForward(this.E);
  }

  /**
   * GPU time of one elementwise op on `a` (and `opts.b`), in the upstream's terms: `kernelName`
   * is an op name ("add", "mul", "exp", "scale", ...; a "_vec4" suffix is accepted: Helios
   * picks 4-wide access itself). The mean of `iters` dispatches in one timestamped batch.
   */
  profileOp(a: TensorData, kernelName: string, opts: { b?: TensorData; scalar?: number; iters?: number } = {}) {
    const op = "profileOp";
    const name = kernelName.replace(/_vec4$/, "");
    const iters = opts.iters ?? 10;
    if (!Number.isInteger(iters) || iters < 1 || iters > 10000) fail(op, `iters must be an integer in [1, 10000], got ${iters}`);
    const batchProfile = (this.rt as unknown as { batchProfile?: (v: number) => { gpuNs: number }[] }).batchProfile;
    if (typeof batchProfile !== "function") fail(op, "this runtime has no GPU timestamps (batchProfile)");
    const make = profiledOp(this, op, name, a, opts);
    this.evaluate(a);
    const warm = make();
    this.evaluate(warm);
    this.releaseGpuTensor(warm);
    const outs: TensorData[] = [];
    const value = this.E.sched.profiled(op, () => {
      for (let i = 0; i < iters; i++) {
        const t = make();
        this.evaluate(t);
        outs.push(t);
      }
    });
    const entries = batchProfile.call(this.rt, value);
    for (const t of outs) this.E.release(t as HeliosTensor);
    const gpuNs = entries.reduce((s, e) => s + e.gpuNs, 0) / Math.max(1, entries.length);
    const n = size(a.shape);
    const bytes = n * storageBytes(a.dtype) * (opts.b ? 3 : 2);
    const gpuTimeUs = gpuNs / 1e3;
    return { gpuTimeUs, throughputGBps: bytes / Math.max(gpuNs, 1), elementsPerSec: n / (gpuNs * 1e-9) };
  }
  /** Counters, pool figures, and whether a device-only index was clamped (reads back). */
  stats(): HeliosStats {
    return { ...this.E.stats(), ...prepackCounts(this.E), ...splitCacheCounts(this.E), ...splitAheadCounts(this.E), pool: this.rt.poolStats(), clampedIndices: this.E.takeClampedIndices() };
  }

  /** Adds two small tensors on the GPU, checks the sum, and measures an add's bandwidth. */
  smokeTest(benchElements = 1 << 20): { verified: boolean; throughputGBps: number } {
    const n = 4099;
    const a = Float32Array.from({ length: n }, (_, i) => (i % 97) * 0.5);
    const b = Float32Array.from({ length: n }, (_, i) => 1 + (i % 13));
    const c = this.add(this.fromArray([...a], [n]), this.fromArray([...b], [n])).data as Float32Array;
    let verified = c.length === n;
    for (let i = 0; verified && i < n; i++) verified = c[i] === a[i] + b[i];
    const big = benchElements;
    const x = this.full([big], 1), y = this.full([big], 2);
    this.syncGpu();
    const reps = 10;
    const t0 = performance.now();
    let last: TensorData | null = null;
    for (let i = 0; i < reps; i++) {
      if (last) this.releaseGpuTensor(last);
      last = this.add(x, y);
      this.evaluate(last);
    }
    this.syncGpu();
    const ms = performance.now() - t0;
    for (const t of [x, y, last]) if (t) this.releaseGpuTensor(t);
    return { verified, throughputGBps: (reps * big * 12) / (ms * 1e6) };
  }

  // ---- creation

  zeros(shape: Shape, dtype: Dtype = "f32"): TensorData {
    checkShape("zeros", shape);
    return this.E.filled(shape, dtype, 0, "zeros");
  }
  ones(shape: Shape, dtype: Dtype = "f32"): TensorData {
    checkShape("ones", shape);
    return this.E.filled(shape, dtype, 1, "ones");
  }
  full(shape: Shape, value: number, dtype: Dtype = "f32"): TensorData {
    checkShape("full", shape);
    return this.E.filled(shape, dtype, value);
  }
  /**
   * Standard normals, reproducible from the backend's seed and the order of calls. Float tensors
   * are generated on the device (ts/kernels/random.ts): no host loop and no upload, so the GPU
   * is not left idle while the host draws millions of values (an idle GPU drops its clocks, and
   * the next burst of work then runs slow until they climb back). i32 keeps the host path.
   */
  randn(shape: Shape, dtype: Dtype = "f32"): TensorData {
    checkShape("randn", shape);
    if (dtype === "f32" || dtype === "f16") {
      const key = () => Math.floor(this.nextRand() * 4294967296) >>> 0;
      return RND.randn(this.E, shape, dtype, key(), key());
    }
    const n = size(shape);
    const v = new Float32Array(n);
    for (let i = 0; i < n; i++) v[i] = this.gauss();
    return this.E.fromHost(shape, dtype, hostArray(dtype, v));
  }
  fromArray(data: ArrayLike<number>, shape: Shape, dtype: Dtype = "f32"): TensorData {
    checkShape("fromArray", shape);
    if (data.length !== size(shape)) fail("fromArray", `${data.length} values for shape ${fmt(shape)} (needs ${size(shape)})`);
    return this.E.fromHost(shape, dtype, hostArray(dtype, data));
  }

  private gauss(): number {
    const u1 = Math.max(this.nextRand(), 1e-12);
    const u2 = this.nextRand();
    return Math.sqrt(-2 * Math.log(u1)) * Math.cos(2 * Math.PI * u2);
  }
  private nextRand(): number {
    return this.rng.next();
  }

  // ---- elementwise (fused)

  add(a: TensorData, b: TensorData): TensorData { return this.E.binary("add", a, b, "add"); }
  sub(a: TensorData, b: TensorData): TensorData { return this.E.binary("sub", a, b, "sub"); }
  mul(a: TensorData, b: TensorData): TensorData { return this.E.binary("mul", a, b, "mul"); }
  div(a: TensorData, b: TensorData): TensorData { return this.E.binary("div", a, b, "div"); }
  neg(a: TensorData): TensorData { return this.E.unary("neg", a, "neg"); }
  exp(a: TensorData): TensorData { return this.E.unary("exp", a, "exp"); }
  log(a: TensorData): TensorData { return this.E.unary("log", a, "log"); }
  sqrt(a: TensorData): TensorData { return this.E.unary("sqrt", a, "sqrt"); }
  pow(a: TensorData, e: number): TensorData { return this.E.unary("pow", a, "pow", [e]); }
  scale(a: TensorData, s: number): TensorData { return this.E.unary("scale", a, "scale", [s]); }
  clamp(a: TensorData, lo: number, hi: number): TensorData { return this.E.unary("clamp", a, "clamp", [lo, hi]); }
  gelu(a: TensorData): TensorData { return this.E.unary("gelu", a, "gelu"); }
  relu(a: TensorData): TensorData { return this.E.unary("relu", a, "relu"); }
  silu(a: TensorData): TensorData { return this.E.unary("silu", a, "silu"); }
  softCap(a: TensorData, cap: number): TensorData { return this.E.unary("softCap", a, "softCap", [cap]); }

  geluBackward(x: TensorData, g: TensorData): TensorData { return this.sameShape("geluBackward", x, g) ?? this.E.binary("geluBackward", x, g, "geluBwd", [], g.dtype); }
  reluBackward(x: TensorData, g: TensorData): TensorData { return this.sameShape("reluBackward", x, g) ?? this.E.binary("reluBackward", x, g, "reluBwd", [], g.dtype); }
  siluBackward(x: TensorData, g: TensorData): TensorData { return this.sameShape("siluBackward", x, g) ?? this.E.binary("siluBackward", x, g, "siluBwd", [], g.dtype); }
  clampBackward(x: TensorData, g: TensorData, lo: number, hi: number): TensorData {
    return this.sameShape("clampBackward", x, g) ?? this.E.binary("clampBackward", x, g, "clampBwd", [lo, hi], g.dtype);
  }
  softCapBackward(g: TensorData, x: TensorData, cap: number): TensorData {
    return this.sameShape("softCapBackward", x, g) ?? this.E.binary("softCapBackward", x, g, "softCapBwd", [cap], g.dtype);
  }
  siluMul(a: TensorData, b: TensorData): TensorData { return this.E.binary("siluMul", a, b, "siluMul"); }
  siluMulBackward(a: TensorData, b: TensorData, g: TensorData): TensorData[] {
    this.sameShape("siluMulBackward", a, g);
    const gb = this.E.binary("siluMulBackward", g, b, "mul");
    const da = this.E.binary("siluMulBackward", a, gb, "siluBwd", [], g.dtype);
    const sa = this.E.unary("siluMulBackward", a, "silu");
    const db = this.E.binary("siluMulBackward", g, sa, "mul", [], g.dtype);
    this.E.release(gb);
    this.E.release(sa);
    return [da, db];
  }
  residualDropoutAdd(residual: TensorData, projected: TensorData, mask: TensorData): TensorData {
    const dropped = this.E.binary("residualDropoutAdd", projected, mask, "mul", [], projected.dtype);
    const out = this.E.binary("residualDropoutAdd", residual, dropped, "add");
    this.E.release(dropped);
    return out;
  }
  castDtype(a: TensorData, dtype: Dtype): TensorData { return L.castDtype(this.E, a, dtype); }
  /**
   * Helios extension: for each 2-D tensor W, castDtype(W, dtype) and its transpose as new tensors,
   * bit for bit those two ops, for up to 10 tensors per dispatch (HELIOS_MULTI_TENSOR_CAST; off:
   * the two ops per tensor). The trainer's per-step f16 weight copies under matmul16.
   */
  castTransposeMulti(ws: TensorData[], dtype: Dtype): L.CastPair[] {
    const op = "castTransposeMulti";
    if (this.maxBind !== Infinity && Array.isArray(ws)) {
      ws.forEach((w, i) => {
        checkBindable(op, `tensor ${i}`, w.shape, w.dtype, this.maxBind);
        checkBindable(op, `tensor ${i}'s copy`, w.shape, dtype, this.maxBind);
      });
    }
    return L.castTransposeMulti(this.E, ws, dtype);
  }

  private sameShape(op: string, x: TensorData, g: TensorData): null {
    if (!sameShape(x.shape, g.shape)) fail(op, `input ${fmt(x.shape)} and gradOutput ${fmt(g.shape)} must have the same shape`);
    return null;
  }

  // ---- in place

  addInplace(a: TensorData, b: TensorData): void { OPT.addInplace(this.E, a, b); }
  scaleInplace(a: TensorData, s: number): void { OPT.scaleInplace(this.E, a, s); }
  adamwStep(
    params: TensorData, grads: TensorData, m: TensorData, v: TensorData,
    lr: number, beta1: number, beta2: number, eps: number, weightDecay: number, bc1: number, bc2: number, gradScale = 1,
  ): void {
    OPT.adamwStep(this.E, params, grads, m, v, lr, beta1, beta2, eps, weightDecay, bc1, bc2, gradScale);
  }
  /** adamwStep in place with lr, bc1, bc2, gradScale and a skip flag from `hyper` (f32 [5]) on the device. */
  adamwStepDevice(
    params: TensorData, grads: TensorData, m: TensorData, v: TensorData, hyper: TensorData,
    beta1: number, beta2: number, eps: number, weightDecay: number,
  ): void {
    STEP.adamwStepDevice(this.E, params, grads, m, v, hyper, beta1, beta2, eps, weightDecay);
  }
  /**
   * AdamW over many tensors in place, a few dispatches in all (up to 7 tensors each), with
   * adamwStep's arithmetic: `hyper` is {lr, bc1, bc2, gradScale} from the host, or the f32 [5]
   * device tensor of adamwStepDevice (its skip flag leaves everything untouched).
   */
  adamwStepMulti(sets: OPT.AdamwTensors[], hyper: TensorData | OPT.AdamwStepScalars, beta1: number, beta2: number, eps: number): void {
    OPT.adamwStepMulti(this.E, sets, hyper, beta1, beta2, eps);
  }
  /** Whether the optimizer's multi-tensor path is on (HELIOS_MULTI_TENSOR_ADAMW): the trainer then calls adamwStepMulti. */
  get multiTensorAdamw(): boolean {
    return this.E.config.multiTensorAdamw;
  }

  // ---- reductions

  sum(a: TensorData, axis?: number, keepdims = false): TensorData { return R.sum(this.E, "sum", a, axis, keepdims, false); }
  mean(a: TensorData, axis?: number, keepdims = false): TensorData { return R.sum(this.E, "mean", a, axis, keepdims, true); }
  /**
   * Helios extension: `sum` with an f32 result whatever the input's float dtype (accumulation is
   * f32 either way); the trainer's bias gradients read the f16 copy of dy the matmuls read.
   */
  sumF32(a: TensorData, axis?: number, keepdims = false): TensorData {
    if (a.dtype === "i32") fail("sumF32", "expects a floating-point tensor, got i32");
    return R.sum(this.E, "sumF32", a, axis, keepdims, false, "f32");
  }
  softmax(a: TensorData, axis?: number): TensorData { return R.softmax(this.E, "softmax", a, axis, false); }
  logSoftmax(a: TensorData, axis?: number): TensorData { return R.softmax(this.E, "logSoftmax", a, axis, true); }
  sumOfSquares(a: TensorData): TensorData { return R.sumOfSquares(this.E, a); }
  totalSumOfSquares(ts: TensorData[]): TensorData { return R.totalSumOfSquares(this.E, ts); }
  checkFinite(a: TensorData): TensorData { return R.checkFinite(this.E, a); }

  // ---- nn

  embedding(w: TensorData, idx: TensorData): TensorData { return NN.embedding(this.E, w, idx); }
  embeddingBackward(idx: TensorData, g: TensorData, vocab: number): TensorData { return NN.embeddingBackward(this.E, idx, g, vocab); }
  /**
   * embeddingBackward from the indices' CSR lists (`indexCsr`: offsets [vocab + 1], positions [count]),
   * for indices only the device holds (the captured training step computes the lists on the host).
   */
  embeddingBackwardCsr(offsets: TensorData, positions: TensorData, g: TensorData, vocab: number): TensorData {
    return NN.embeddingBackwardCsr(this.E, offsets, positions, g, vocab);
  }
  /** `opts.outDtype` (Helios extension): the output's dtype, x's by default (f16: a matmul operand written directly). */
  layerNorm(x: TensorData, w: TensorData, b: TensorData, eps: number, opts: { outDtype?: Dtype } = {}): TensorData {
    return NN.layerNorm(this.E, x, w, b, eps, opts.outDtype);
  }
  /**
   * `g` is x's dtype, or f16 when x is f32 (Helios extension): the kernels convert it as they load
   * it, so the results are those of castDtype(g, "f32") bit for bit without the cast pass. Other
   * combinations throw ERR_HELIOS_SHAPE.
   * `opts` (Helios extension, NN.LnBwdOptions): `residual` is added into dx in the same pass (dx =
   * residual + dx_LN, as add(residual, dx) gives), `f16Copy` also returns dx16, castDtype(dx, "f16").
   */
  layerNormBackward(x: TensorData, w: TensorData, g: TensorData, eps: number, opts: NN.LnBwdOptions = {}): { dx: TensorData; dw: TensorData; db: TensorData; dx16?: TensorData } {
    return NN.layerNormBackward(this.E, x, w, g, eps, opts);
  }
  crossEntropy(logits: TensorData, targets: TensorData): TensorData {
    checkBindable("crossEntropy", "logits", logits.shape, logits.dtype, this.maxBind);
    return NN.crossEntropy(this.E, logits, targets);
  }
  crossEntropyBackward(logits: TensorData, targets: TensorData, g: TensorData): TensorData {
    checkBindable("crossEntropyBackward", "logits", logits.shape, logits.dtype, this.maxBind);
    return NN.crossEntropyBackward(this.E, logits, targets, g);
  }
  /**
   * Helios extension: crossEntropy(logits, targets) and crossEntropyBackward(logits, targets, g)
   * together (equal to rounding), in one dispatch that reads each row twice where rows split into
   * 4-wide vectors (classes % 4 == 0), else from their two kernels. The two ops' checks and errors,
   * named crossEntropyWithGrad. With opts.splitGrad (f32 logits), the same pass also writes
   * dlogits split for the f32 products that read it next, as splitOperand(dlogits, splitGrad)
   * would, where f32 products split their operands (elsewhere the option does nothing).
   */
  crossEntropyWithGrad(logits: TensorData, targets: TensorData, g: TensorData, opts: { splitGrad?: readonly SplitLayout[] } = {}): { loss: TensorData; dlogits: TensorData } {
    const op = "crossEntropyWithGrad";
    checkBindable(op, "logits", logits.shape, logits.dtype, this.maxBind);
    const sg = opts.splitGrad ?? [];
    checkLayouts(op, "opts.splitGrad", sg, false);
    return NN.crossEntropyWithGrad(this.E, logits, targets, g, sg.length > 0 && MM.f32ProductsSplit(this.E) ? sg : []);
  }

  // ---- matmul and attention

  matmul(a: TensorData, b: TensorData): TensorData { return MM.matmul(this.E, this.mmGuard("matmul", a, b, false, false), a, b, false, false); }
  /** a @ b^T with b stored [..., N, K]. */
  matmulTransposed(a: TensorData, b: TensorData): TensorData { return MM.matmul(this.E, this.mmGuard("matmulTransposed", a, b, false, true), a, b, false, true); }
  /** a^T @ b with a stored [..., K, M]. */
  matmulTransposedA(a: TensorData, b: TensorData): TensorData { return MM.matmul(this.E, this.mmGuard("matmulTransposedA", a, b, true, false), a, b, true, false); }
  /**
   * Helios extension: a linear layer, y = x·Wᵀ + bias (+ opts.residual) for x [M, K] and W [N, K]
   * (nn.Linear's layout; [K, N] with opts.inOut), written as opts.outDtype (x's dtype or f32).
   * With opts.xT, x is stored [K, M] and used transposed: linear(dy, x, null, { xT: true, inOut:
   * true, outDtype: "f32" }) is a weight gradient dyᵀ·x [out, in] written in f32 by the product.
   * With opts.geluGradOf = f ([M, N], the output dtype) the sum is multiplied by gelu'(f) before
   * the residual: geluBackward(f, x·W) as one product (an MLP's backward). Bias, GELU gradient
   * and residual are applied in the matmul kernel's epilogue, to the f32 accumulator, with one
   * rounding at the store; where the kernels cannot take the dtypes, by one fused elementwise
   * kernel after the product (MM.linear).
   */
  linear(x: TensorData, W: TensorData, bias: TensorData | null, opts: MM.LinearOptions = {}): TensorData {
    const op = "linear";
    if (this.maxBind !== Infinity && x.shape.length === 2 && W.shape.length === 2) {
      checkBindable(op, "x", x.shape, x.dtype, this.maxBind);
      checkBindable(op, "W", W.shape, W.dtype, this.maxBind);
      checkBindable(op, "output", [x.shape[opts.xT ? 1 : 0], opts.inOut ? W.shape[1] : W.shape[0]], opts.outDtype ?? x.dtype, this.maxBind);
    }
    return MM.linear(this.E, op, x, W, bias, opts);
  }
  /**
   * Helios extension: f32 tensor t is about to be read by f32 products, or split attention, in
   * `layouts`, `reads` times each: "rows" as A [M, K] or B stored [N, K] (matmulTransposed's b),
   * "whole" as A stored [K, M] (matmulTransposedA's a), B [K, N], or flash attention's q, k, v and
   * dO. On devices where f32 products run on bf16 tensor cores over hi/lo operand splits, t is split
   * now in one pass (from its pending elementwise expression if it has one, which then stays
   * pending) and those products read the splits instead of splitting t each; the splits are freed
   * after their last read, or when t is written or released. With opts.evaluate a pending t is
   * also written into its own buffer by the same pass (for a reader of its values, as a bias
   * sum). Returns whether it split (false on other devices, where it does nothing but
   * opts.evaluate). Results are identical either way.
   */
  splitOperand(t: TensorData, layouts: readonly SplitLayout[], reads = 1, opts: { evaluate?: boolean } = {}): boolean {
    const op = "splitOperand";
    if (!t || !Array.isArray(t.shape)) fail(op, "t is not a tensor");
    checkLayouts(op, "layouts", layouts, true);
    if (!Number.isInteger(reads) || reads < 1 || reads > 2 ** 20) fail(op, `reads ${reads} must be an integer in [1, 2^20]`);
    if (t.dtype !== "f32") fail(op, `t must be f32, got ${t.dtype}`);
    const evaluate = opts.evaluate === true;
    if (!MM.f32ProductsSplit(this.E)) {
      if (evaluate) this.evaluate(t);
      return false;
    }
    return splitAhead(this.E, op, t, layouts, reads, evaluate);
  }
  /**
   * Whether f32 products here run on bf16 tensor cores over hi/lo operand splits (the devices where
   * splitOperand and crossEntropyWithGrad's splitGrad do something).
   */
  get f32Splits(): boolean {
    return MM.f32ProductsSplit(this.E);
  }
  /**
   * Whether the trainer's matmul16 layers use linear() and 16-bit LayerNorm outputs
   * (HELIOS_TRAIN_FUSED_LINEAR); off restores the separate bias, residual and cast passes.
   */
  get fusedLinear(): boolean {
    return this.E.config.trainFusedLinear;
  }
  /** The binding-size guard of the matmul family; returns `op` for the call it wraps. */
  private mmGuard(op: string, a: TensorData, b: TensorData, ta: boolean, tb: boolean): string {
    if (this.maxBind === Infinity || a.shape.length < 2 || b.shape.length < 2) return op;
    checkBindable(op, "a", a.shape, a.dtype, this.maxBind);
    checkBindable(op, "b", b.shape, b.dtype, this.maxBind);
    checkBindable(op, "output", matmulOutShape(a.shape, b.shape, ta, tb), a.dtype, this.maxBind);
    return op;
  }
  /** Alpha's contract ([B*H, T, D] tensors), or with `layout` heads as rows of B*T (FA.AttentionLayout: no head transposes). */
  flashAttention(Q: TensorData, K: TensorData, V: TensorData, T: number, scale: number, softCap: number, layout?: FA.AttentionLayout) {
    return FA.flashAttention(this.E, Q, K, V, T, scale, softCap, layout);
  }
  flashAttentionBackward(
    Q: TensorData, K: TensorData, V: TensorData, O: TensorData, dO: TensorData, lse: TensorData,
    T: number, scale: number, softCap: number, layout?: FA.AttentionLayout,
  ) {
    return FA.flashAttentionBackward(this.E, Q, K, V, O, dO, lse, T, scale, softCap, layout);
  }
  /**
   * How the trainer lays out attention heads here (HELIOS_ATTN_HEAD_LAYOUT): "fused" runs
   * flashAttention on the qkv projection's rows (a packed AttentionLayout), "copy" transposes
   * heads to [B*H, T, D] and back around it.
   */
  get attnHeadLayout(): "fused" | "copy" {
    return this.E.config.attnHeadLayout;
  }

  // ---- layout

  reshape(a: TensorData, shape: Shape): TensorData { return L.reshape(this.E, a, shape); }
  transpose(a: TensorData, d0: number, d1: number): TensorData { return L.transpose(this.E, a, d0, d1); }
  slice(a: TensorData, starts: number[], ends: number[]): TensorData { return L.slice(this.E, a, starts, ends); }
  cat(ts: TensorData[], axis: number): TensorData { return L.cat(this.E, ts, axis); }
  scatterSlice(g: TensorData, orig: Shape, starts: number[], ends: number[]): TensorData { return L.scatterSlice(this.E, g, orig, starts, ends); }
  sliceQkv(a: TensorData): [TensorData, TensorData, TensorData] { return L.sliceQkv(this.E, a); }
  broadcast(a: TensorData, target: Shape): TensorData {
    if (sameShape(a.shape, target)) return a;
    return L.broadcast(this.E, a, target);
  }
  clone(a: TensorData): TensorData { return L.clone(this.E, a); }

  // ---- selection and masks

  argmax(a: TensorData, axis?: number): TensorData { return S.argmax(this.E, a, axis); }
  topk(a: TensorData, k: number, axis?: number) { return S.topk(this.E, a, k, axis); }
  gather(a: TensorData, axis: number, idx: TensorData): TensorData { return S.gather(this.E, a, axis, idx); }
  causalMask(n: number): TensorData { return S.causalMask(this.E, n); }
  maskedFill(a: TensorData, mask: TensorData, value: number): TensorData { return S.maskedFill(this.E, a, mask, value); }
  dropoutMask(shape: Shape, seed: number, counter: number, p: number): TensorData { return S.dropoutMask(this.E, shape, seed, counter, p); }
  /** dropoutMask with counter = counter[0] + offset read on the device (counter: i32 [1]). */
  dropoutMaskAt(shape: Shape, seed: number, counter: TensorData, offset: number, p: number): TensorData {
    return STEP.dropoutMaskAt(this.E, shape, seed, counter, offset, p);
  }

  // ---- comparison (host: these return JS booleans)

  equal(a: TensorData, b: TensorData): boolean {
    if (!sameShape(a.shape, b.shape) || a.dtype !== b.dtype) return false;
    const x = a.data, y = b.data;
    for (let i = 0; i < x.length; i++) if (x[i] !== y[i]) return false;
    return true;
  }
  allClose(a: TensorData, b: TensorData, atol = 1e-5, rtol = 1e-8): boolean {
    if (!sameShape(a.shape, b.shape)) return false;
    const x = values(a), y = values(b);
    for (let i = 0; i < x.length; i++) {
      if (!(Math.abs(x[i] - y[i]) <= atol + rtol * Math.abs(y[i]))) return false;
    }
    return true;
  }
}

let minGpuSizeNoted = false;

const PROFILE_BINARY = ["add", "sub", "mul", "div"] as const;
const PROFILE_UNARY = ["neg", "exp", "log", "sqrt", "gelu", "relu", "silu", "scale"] as const;

/** The op profileOp times: a closure recording one fresh dispatch of `name`. */
function profiledOp(B: HeliosBackend, op: string, name: string, a: TensorData, opts: { b?: TensorData; scalar?: number }): () => TensorData {
  if ((PROFILE_BINARY as readonly string[]).includes(name)) {
    const b = opts.b;
    if (!b) fail(op, `"${name}" needs opts.b`);
    const f = B[name as (typeof PROFILE_BINARY)[number]].bind(B);
    return () => f(a, b);
  }
  if (name === "scale") return () => B.scale(a, opts.scalar ?? 1);
  if ((PROFILE_UNARY as readonly string[]).includes(name)) {
    const f = B[name as Exclude<(typeof PROFILE_UNARY)[number], "scale">].bind(B);
    return () => f(a);
  }
  fail(op, `unknown kernel "${name}" (one of ${[...PROFILE_BINARY, ...PROFILE_UNARY].join(", ")}, optionally with _vec4)`);
}

function values(t: TensorData): ArrayLike<number> {
  return t.dtype === "f16" ? fromF16Array(t.data as Uint16Array) : t.data;
}

function hostArray(dtype: Dtype, v: ArrayLike<number>) {
  switch (dtype) {
    case "f16": return toF16Array(v);
    case "i32": return Int32Array.from(v);
    case "f64": return Float64Array.from(v);
    default: return Float32Array.from(v);
  }
}

/** A list of split layouts (splitOperand's, crossEntropyWithGrad's splitGrad): "rows" and "whole" only. */
function checkLayouts(op: string, what: string, layouts: readonly SplitLayout[], nonEmpty: boolean): void {
  if (!Array.isArray(layouts) || (nonEmpty && layouts.length === 0) || layouts.some((l) => l !== "rows" && l !== "whole")) {
    fail(op, `${what} ${JSON.stringify(layouts)} must be a ${nonEmpty ? "non-empty " : ""}list of "rows" and "whole"`);
  }
}
