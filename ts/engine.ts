// The engine behind HeliosBackend: owns the runtime binding, buffer leases, the batch
// scheduler, compiled kernels and pending fused expressions. Op modules (ts/ops/) ask it
// for input buffers, output tensors and dispatches; it never decides what an op computes.
import type { Dtype, Shape, TensorArray, TensorData } from "./types.js";
import type { HeliosConfig } from "./config.js";
import type { DeviceInfo, Runtime } from "./exec/runtime.js";
import { BufferPool, Lease } from "./exec/lease.js";
import { type Scheduler, captureError, schedulerFor } from "./exec/scheduler.js";
import { KernelCache } from "./kernels/cache.js";
import { HeliosTensor, type TensorHost } from "./tensor.js";
import { type Expr, type BinaryOp, type UnaryOp, countNodes, leavesOf } from "./fusion/expr.js";
import { planFused, pushBytes, vec4Strided, PUSH_BUDGET, MAX_FUSED_RANK, type FusedPlan } from "./fusion/plan.js";
import { generateFused, fusedPushSpec, type FusedKernelKey, type FusedSplitOutputs } from "./kernels/elementwise.js";
import { grid1d, packPush, storageBytes, type PushSpec } from "./kernels/common.js";
import { broadcastShape, fail, fmt, size } from "./shape.js";
import { checkBindings, tensorBytes } from "./limits.js";
import type { KernelDesc } from "./ir/index.js";
import { toF16Array } from "./f16.js";
import { deviceGeneration } from "./device.js";
import { type ResidencyHost, isResident, residentDevice } from "./resident.js";

/** Most inputs one fused kernel binds; beyond this operands are materialized first. */
const MAX_FUSED_INPUTS = 6;

interface Holder {
  leases: Lease[];
}

export interface EngineStats {
  dispatches: number;
  batches: number;
  waits: number;
  fusedKernels: number;
  fusedOps: number;
  uploads: number;
  readbacks: number;
  kernelCompiles: number;
  cpuFallbacks: Record<string, number>;
}

export class Engine implements TensorHost, ResidencyHost {
  readonly pool: BufferPool;
  readonly sched: Scheduler;
  readonly kernels: KernelCache;
  private readonly holders = new WeakMap<HeliosTensor, Holder>();
  private readonly registry = new FinalizationRegistry<Holder>((h) => {
    try {
      for (const l of h.leases) l.release();
    } catch (e) {
      // never throw out of a finalizer; the next op reports it
      this.deferredError ??= e as Error;
    }
    h.leases = [];
  });
  private deferredError: Error | null = null;

  private rethrowDeferred(): void {
    const e = this.deferredError;
    if (e) {
      this.deferredError = null;
      throw e;
    }
  }
  /**
   * While capturing (ts/exec/capture.ts): outputs recorded into the capture, the buffers they
   * write (each replay counts a write on them), and the first lease serial inside it.
   */
  capture: { outputs: WeakRef<HeliosTensor>[]; written: Set<Lease>; firstSerial: number } | null = null;
  /** Host round trips so far: reads of results from the device and syncGpu (ts/ops/prepack.ts). */
  roundTrips = 0;
  /** Called with each tensor whose storage is freed (ts/ops/prepack.ts drops its copy of it). */
  private readonly freeHooks: ((t: HeliosTensor) => void)[] = [];
  private readonly materializeHooks: ((t: HeliosTensor, e: Expr) => void)[] = [];
  private dispatches = 0;
  private fusedKernels = 0;
  private fusedOps = 0;
  private uploads = 0;
  private readbacks = 0;
  readonly cpuFallbacks: Record<string, number> = {};

  /** Whether row kernels may use subgroup reductions (every Vulkan 1.3 target we run on). */
  readonly subgroups: boolean;
  /**
   * The device this engine records for, read once: the native getDeviceInfo builds a fresh
   * object (~10 µs), too slow for per-op checks (an engine does not outlive its device).
   */
  readonly device: DeviceInfo;

  constructor(readonly rt: Runtime, readonly config: HeliosConfig) {
    this.device = rt.getDeviceInfo();
    this.subgroups = (this.device.subgroupSize ?? 0) >= 4;
    this.pool = new BufferPool(rt);
    this.sched = schedulerFor(rt, config.batchSize, config.compileThreads, config.submitEarlyUs);
    this.pool.queue = this.sched;
    this.kernels = new KernelCache(rt, config.compileThreads === 1 ? null : this.sched.pipelines);
  }

  stats(): EngineStats {
    return {
      ...this.sched.stats,
      dispatches: this.dispatches,
      fusedKernels: this.fusedKernels,
      fusedOps: this.fusedOps,
      uploads: this.uploads,
      readbacks: this.readbacks,
      kernelCompiles: this.kernels.compiles,
      cpuFallbacks: { ...this.cpuFallbacks },
    };
  }

  /** Dispatches recorded so far. */
  get dispatched(): number {
    return this.dispatches;
  }

  /** Registers `hook` to run when a tensor's storage is freed (release, or recycling a held tensor). */
  onFree(hook: (t: HeliosTensor) => void): void {
    this.freeHooks.push(hook);
  }

  /** Registers `hook` to run when a pending tensor's expression `e` has been dispatched into its own buffer. */
  onMaterialize(hook: (t: HeliosTensor, e: Expr) => void): void {
    this.materializeHooks.push(hook);
  }

  private flag: HeliosTensor | null = null;

  /** The device-side "an index was clamped" flag (u32 [1]) bound by indexing kernels. */
  indexFlag(): HeliosTensor {
    if (!this.flag) this.flag = this.filled([1], "i32", 0);
    return this.flag;
  }

  /** Reads and clears the clamped-index flag (a readback: diagnostics only). */
  takeClampedIndices(): number {
    if (!this.flag) return 0;
    const v = (this.flag.data as Int32Array)[0];
    if (v !== 0) {
      this.release(this.flag);
      this.flag = null;
    }
    return v;
  }

  countFallback(op: string): void {
    this.cpuFallbacks[op] = (this.cpuFallbacks[op] ?? 0) + 1;
  }

  // ---- tensor creation

  private track(t: HeliosTensor, leases: Lease[]): HeliosTensor {
    const h: Holder = { leases };
    this.holders.set(t, h);
    this.registry.register(t, h, t);
    return t;
  }

  /** A tensor with a fresh, uninitialized device buffer (no buffer when empty); `hostWrite`: the host writes it next. */
  alloc(shape: Shape, dtype: Dtype, op = "alloc", hostWrite = false): HeliosTensor {
    const t = new HeliosTensor(this, [...shape], dtype);
    const n = size(shape);
    if (n === 0) {
      t.host = emptyArray(dtype);
      return this.track(t, []);
    }
    t.lease = this.pool.lease(tensorBytes(op, shape, dtype, this.pool.maxBytes), op, hostWrite);
    return this.track(t, [t.lease]);
  }

  /**
   * A tensor over a buffer the pool does not own (`handle`, `bytes` long: a buffer shared with
   * CUDA); `free` runs when the last reference goes, after queued work was recorded.
   */
  adopt(handle: number, bytes: number, shape: Shape, dtype: Dtype, free: (handle: number) => void): HeliosTensor {
    const t = new HeliosTensor(this, [...shape], dtype);
    t.lease = new Lease(this.pool, handle, bytes, 0, (l) => {
      this.sched.sync();
      free(l.handle);
    });
    return this.track(t, [t.lease]);
  }

  /** A device tensor initialized from host data (which it keeps as its host copy). */
  fromHost(shape: Shape, dtype: Dtype, data: TensorArray, op = "fromArray"): HeliosTensor {
    const t = this.alloc(shape, dtype, op, true);
    if (t.lease) {
      this.beforeHostWrite(t.lease);
      this.rt.uploadBuffer(t.lease.handle, toStorage(dtype, data));
      this.uploads++;
    }
    t.host = data;
    return t;
  }

  /**
   * Before the host uploads to or fills a buffer leased for it (`hostWrite`: never one taken over
   * from a release behind queued dispatches, Lease.recycled), so no queued dispatch uses it: they
   * need not reach the runtime first, nor wait for pipeline compiles (Scheduler.handOver).
   */
  private beforeHostWrite(l: Lease): void {
    l.hostWritten = true;
    if (l.recycled) this.sched.sync();
    else this.sched.handOver();
  }

  /** Fills with a 32-bit pattern (f32/i32) or a doubled 16-bit pattern (f16). */
  filled(shape: Shape, dtype: Dtype, value: number, op = "full"): HeliosTensor {
    const t = this.alloc(shape, dtype, op, true);
    if (!t.lease) return t;
    const word = new Uint32Array(1);
    if (dtype === "f16") {
      const h = toF16Array([value])[0];
      word[0] = (h | (h << 16)) >>> 0;
    } else if (dtype === "i32") new Int32Array(word.buffer)[0] = value;
    else new Float32Array(word.buffer)[0] = value;
    this.beforeHostWrite(t.lease);
    this.rt.fillBuffer(t.lease.handle, word[0], 0, t.lease.bytes);
    return t;
  }

  /** A tensor that shares `src`'s buffer under another shape (reshape of contiguous data). */
  view(src: HeliosTensor, shape: Shape): HeliosTensor {
    this.materialize(src);
    const t = new HeliosTensor(this, [...shape], src.dtype);
    if (!src.lease) {
      t.host = emptyArray(src.dtype);
      return this.track(t, []);
    }
    t.lease = src.lease.retain();
    t.host = src.currentHost;
    t.hostVersion = src.hostVersion;
    return this.track(t, [t.lease]);
  }

  /** A view of `t` under `shape` (uploading host tensors first). */
  viewOrUpload(op: string, t: TensorData, shape: Shape): HeliosTensor {
    if (t instanceof HeliosTensor) {
      if (t.released) fail(op, `tensor ${fmt(t.shape)} was already released (releaseGpuTensor)`);
      return this.view(t, shape);
    }
    if (!isResident(t)) checkPlain(op, t);
    const resident = size(shape) > 0 && !this.capture ? residentDevice(this, t) : null;
    return resident ? this.view(resident, shape) : this.fromHost(shape, t.dtype, t.data);
  }

  // ---- residency of plain host tensors (ts/resident.ts)

  upload(td: TensorData, data: TensorArray): HeliosTensor {
    const t = this.alloc(td.shape, td.dtype);
    this.writeTensor(t, data);
    return t;
  }
  owns(t: HeliosTensor): boolean {
    return t.owner === this && !t.released && this.generation === deviceGeneration();
  }

  // ---- inputs

  /** Device buffer of any TensorData for reading; plain host tensors are uploaded. */
  input(op: string, td: TensorData): { lease: Lease | null; temp: boolean } {
    if (td instanceof HeliosTensor) {
      if (td.released) fail(op, `tensor ${fmt(td.shape)} was already released (releaseGpuTensor)`);
      if (td.owner !== this && (td.owner as Engine).rt !== this.rt) fail(op, "tensor belongs to a HeliosBackend on another runtime");
      this.materialize(td);
      return { lease: td.lease, temp: false };
    }
    if (!isResident(td)) checkPlain(op, td);
    const n = size(td.shape);
    if (n === 0) return { lease: null, temp: false };
    // inside a capture a plain tensor is uploaded per use, as the capture rules expect
    const resident = this.capture ? null : residentDevice(this, td);
    if (resident) return { lease: resident.lease, temp: false };
    const lease = this.pool.lease(tensorBytes(op, td.shape, td.dtype, this.pool.maxBytes), op, true);
    this.beforeHostWrite(lease);
    this.rt.uploadBuffer(lease.handle, toStorage(td.dtype, td.data));
    this.uploads++;
    return { lease, temp: true };
  }

  /** Runs `body` with the device buffers of `inputs`, releasing uploaded temporaries after. */
  withInputs<R>(op: string, inputs: TensorData[], body: (bufs: (Lease | null)[]) => R): R {
    const got = inputs.map((t) => this.input(op, t));
    try {
      return body(got.map((g) => g.lease));
    } finally {
      for (const g of got) if (g.temp && g.lease) g.lease.release();
    }
  }

  // ---- dispatch

  private generation = deviceGeneration();

  kernel(key: object, build: () => KernelDesc): number {
    if (this.generation !== deviceGeneration()) {
      // destroyDevice() + initDevice(): pipelines and the open batch are gone; tensors made
      // before it are stale (the runtime rejects their handles with ERR_HELIOS_INVALID_HANDLE).
      this.generation = deviceGeneration();
      this.kernels.clear();
      this.sched.followDevice();
      this.flag = null;
    }
    return this.kernels.get(key, build);
  }

  /** Records one dispatch; the buffers of `outputs` get the batch as their last write, so readers wait for it. */
  dispatch(
    pipeline: number, buffers: (Lease | null)[], groups: [number, number, number],
    spec: PushSpec, push: Record<string, number>, outputs: HeliosTensor[],
  ): void {
    this.rethrowDeferred();
    const handles = buffers.map((b) => {
      if (!b) throw new Error("helios: internal error: dispatch with an empty buffer");
      return b.handle;
    });
    checkBindings("dispatch", buffers as Lease[], this.pool.maxBind);
    const pc = Object.keys(spec).length > 0 ? packPush(spec, push) : undefined;
    const ticket = this.sched.record(pipeline, handles, groups, pc);
    this.dispatches++;
    for (const o of outputs) {
      o.host = null;
      if (o.lease) {
        o.lease.writes++;
        o.lease.lastWrite = ticket;
      }
      if (this.capture) {
        this.capture.outputs.push(new WeakRef(o));
        if (o.lease) this.capture.written.add(o.lease);
      }
    }
  }

  /**
   * Replaces `t`'s buffer with `next`'s (used by in-place ops: compute out of place, then
   * rebind). Views made earlier keep the old contents, as Alpha's reference copies them.
   */
  rebind(t: HeliosTensor, next: HeliosTensor): void {
    const h = this.holders.get(t);
    const hn = this.holders.get(next);
    if (!h || !hn || !next.lease) throw new Error("helios: internal error: rebind");
    if (this.capture && t.lease && t.lease.serial < this.capture.firstSerial) {
      // A replay would read the old buffer again while the tensor points at the new one.
      throw captureError("in-place op", `tensor ${fmt(t.shape)} was made before beginCapture and an out-of-place update would rebind it; use the in-place device variants (adamwStepDevice)`);
    }
    for (const l of h.leases) l.release();
    h.leases = [next.lease.retain()];
    t.lease = next.lease;
    t.expr = null;
    t.host = null;
    this.release(next);
  }

  // ---- elementwise ops and fusion

  exprOf(op: string, td: TensorData): { e: Expr; temp: Lease | null } {
    if (td instanceof HeliosTensor) {
      if (td.released) fail(op, `tensor ${fmt(td.shape)} was already released (releaseGpuTensor)`);
      if (td.expr) return { e: td.expr, temp: null };
    }
    const { lease, temp } = this.input(op, td);
    if (!lease) throw new Error("helios: internal error: leaf without buffer");
    return { e: { k: "leaf", lease, shape: [...td.shape], dtype: td.dtype }, temp: temp ? lease : null };
  }

  unary(op: string, a: TensorData, u: UnaryOp, params: number[] = [], outDtype: Dtype = a.dtype): HeliosTensor {
    return this.elementwise(op, [a], outDtype, ([x], shape) => ({ k: "un", op: u, x, params, shape }));
  }

  binary(op: string, a: TensorData, b: TensorData, bop: BinaryOp, params: number[] = [], outDtype?: Dtype): HeliosTensor {
    const dt = outDtype ?? promote(a.dtype, b.dtype);
    return this.elementwise(op, [a, b], dt, ([x, y], shape) => ({ k: "bin", op: bop, a: x, b: y, params, shape }));
  }

  private elementwise(
    op: string, args: TensorData[], outDtype: Dtype, make: (xs: Expr[], shape: Shape) => Expr,
  ): HeliosTensor {
    let shape: Shape = args[0].shape;
    for (let i = 1; i < args.length; i++) shape = broadcastShape(op, shape, args[i].shape);
    tensorBytes(op, shape, outDtype, this.pool.maxBytes); // refused here, not at a later materialize
    if (size(shape) === 0) return this.alloc(shape, outDtype);
    let parts = args.map((t) => this.exprOf(op, t));
    let e = make(parts.map((p) => p.e), shape);
    if (this.config.fusion && (countNodes(e) > this.config.fusionMaxNodes || leavesOf(e).size > MAX_FUSED_INPUTS)) {
      // Too big for one kernel: materialize the operands and start a new expression.
      for (const p of parts) if (p.temp) p.temp.release();
      for (const t of args) if (t instanceof HeliosTensor) this.materialize(t);
      parts = args.map((t) => this.exprOf(op, t));
      e = make(parts.map((p) => p.e), shape);
    }
    const t = new HeliosTensor(this, [...shape], outDtype);
    t.expr = e;
    this.track(t, [...leavesOf(e)].map((l) => l.retain()));
    for (const p of parts) if (p.temp) p.temp.release();
    this.fusedOps++;
    if (!this.config.fusion) this.materialize(t);
    return t;
  }

  /** Dispatches a pending tensor's expression as one kernel. */
  materialize(t: HeliosTensor): void {
    const e = t.expr;
    if (!e) return;
    if (this.adoptCopiedLeaf(t, e)) return;
    const plan = planFused(e, t.shape, t.dtype);
    const strided = plan.inputs.some((i) => i.mode === "strided");
    if (pushBytes(plan) > PUSH_BUDGET || (strided && plan.dims.length > MAX_FUSED_RANK)) {
      this.splitAndMaterialize(t);
      return;
    }
    const k = this.fusedKernel(plan, strided, plan.n % 4 === 0 && (!strided || vec4Strided(plan)));
    const out = this.pool.lease(plan.n * storageBytes(t.dtype));
    this.settle(t, e, out, () => this.dispatch(k.pipeline, [...plan.inputs.map((i) => i.lease), out], k.groups, k.spec, k.push, [t]));
    this.fusedKernels++;
  }

  /**
   * Pending t (expression e) takes buffer `out`, which `record` writes (its dispatch, recorded with
   * t as an output); then the leaves e held go back and the materialize hooks run.
   */
  private settle(t: HeliosTensor, e: Expr, out: Lease, record: () => void): void {
    const h = this.holders.get(t);
    t.lease = out;
    t.expr = null;
    record();
    if (h) {
      for (const l of h.leases) l.release();
      h.leases = [out];
    }
    for (const hook of this.materializeHooks) hook(t, e);
  }

  /** The compiled kernel of a fused plan (with `split` outputs if given), its push values and grid. */
  private fusedKernel(plan: FusedPlan, strided: boolean, vec4: boolean, split?: FusedSplitOutputs, cols = 0) {
    const key: FusedKernelKey = {
      signature: plan.signature,
      inputs: plan.inputs.map((i) => ({
        dtype: i.dtype, mode: i.mode,
        ...(vec4 && i.mode === "strided" ? { inner: i.strides[i.strides.length - 1] as 0 | 1 } : {}),
      })),
      rank: strided ? plan.dims.length : 0,
      program: plan.program,
      nParams: plan.params.length,
      outDtype: plan.outDtype,
      vec4,
      ...(split ? { split } : {}),
    };
    const pipeline = this.kernel({ fused: plan.signature, vec4, inner: key.inputs.map((i) => i.inner ?? -1), split: split ? `${+split.f32}${+split.rows}${+split.whole}` : "" }, () => generateFused(key));
    const spec = fusedPushSpec(key);
    const push: Record<string, number> = { n: plan.n };
    if (strided) {
      plan.dims.forEach((d, i) => (push[`d${i}`] = d));
      plan.inputs.forEach((inp, j) => inp.strides.forEach((s, d) => (push[`s${j}_${d}`] = s)));
    }
    plan.params.forEach((p, i) => (push[`p${i}`] = p));
    if (split?.rows) push.cols = cols;
    return { pipeline, spec, push, groups: grid1d(vec4 ? plan.n / 4 : plan.n) };
  }

  /**
   * Writes f32 tensor t's bf16 hi/lo split in the layouts asked for (kernels/elementwise.ts: rows
   * of `cols` elements, and/or whole) in one dispatch, from its buffer or, while it is pending,
   * straight from its expression: t stays pending (its f32 values are computed only if something
   * reads them) unless `evaluate`, where the same dispatch writes them into t's own buffer too.
   * Returns the splits (bf16 bits in f16-typed [2n] carriers, kernel operands only), or null
   * where the kernel cannot take t (indexing past the push budget, 2n past 2^32).
   */
  splitForms(op: string, t: HeliosTensor, cols: number, forms: { rows: boolean; whole: boolean }, evaluate = false): { rows: HeliosTensor | null; whole: HeliosTensor | null } | null {
    if (t.dtype !== "f32" || t.released) return null;
    const n = size(t.shape);
    if (n === 0 || 2 * n >= 2 ** 32 || cols <= 0 || n % cols !== 0) return null;
    const pendingExpr = t.expr;
    const { e, temp } = this.exprOf(op, t);
    try {
      const plan = planFused(e, t.shape, "f32");
      const strided = plan.inputs.some((i) => i.mode === "strided");
      if (pushBytes(plan) + 4 > PUSH_BUDGET || (strided && plan.dims.length > MAX_FUSED_RANK)) return null;
      const vec4 = n % 4 === 0 && cols % 4 === 0 && (!strided || vec4Strided(plan));
      // a pending t asked to be evaluated gets its own buffer from this dispatch (as materialize)
      const own = evaluate && pendingExpr !== null ? this.pool.lease(n * storageBytes("f32")) : null;
      const k = this.fusedKernel(plan, strided, vec4, { f32: own !== null, ...forms }, cols);
      const rows = forms.rows ? this.alloc([2 * n], "f16", op) : null;
      const whole = forms.whole ? this.alloc([2 * n], "f16", op) : null;
      const outs = [rows, whole].filter((x): x is HeliosTensor => x !== null);
      const inputs = plan.inputs.map((i) => i.lease);
      if (own && pendingExpr) {
        this.settle(t, pendingExpr, own, () => this.dispatch(k.pipeline, [...inputs, own, ...outs.map((o) => o.lease)], k.groups, k.spec, k.push, [t, ...outs]));
      } else {
        this.dispatch(k.pipeline, [...inputs, ...outs.map((o) => o.lease)], k.groups, k.spec, k.push, outs);
      }
      this.fusedKernels++;
      return { rows, whole };
    } finally {
      temp?.release();
    }
  }

  /**
   * A pending plain copy (clone) of a buffer nothing else holds any more takes the buffer over
   * instead of copying it: Alpha's autograd clones every gradient and releases the original.
   */
  private adoptCopiedLeaf(t: HeliosTensor, e: Expr): boolean {
    if (e.k !== "un" || e.op !== "copy" || e.x.k !== "leaf") return false;
    const leaf = e.x;
    if (leaf.dtype !== t.dtype || !leaf.lease.exclusive || size(leaf.shape) !== size(t.shape)) return false;
    const h = this.holders.get(t);
    if (!h || h.leases.length !== 1 || h.leases[0] !== leaf.lease) return false;
    t.lease = leaf.lease;
    t.expr = null;
    return true;
  }

  /** Rare: an expression whose indexing does not fit push constants is cut at its root. */
  private splitAndMaterialize(t: HeliosTensor): void {
    const e = t.expr;
    if (!e || e.k === "leaf") throw new Error("helios: internal error: split of a leaf");
    const kids = e.k === "un" ? [e.x] : [e.a, e.b];
    const leaves: Expr[] = kids.map((c) => {
      if (c.k === "leaf") return c;
      const tmp = new HeliosTensor(this, [...c.shape], "f32");
      tmp.expr = c;
      this.track(tmp, [...leavesOf(c)].map((l) => l.retain()));
      this.materialize(tmp);
      const leaf: Expr = { k: "leaf", lease: tmp.lease as Lease, shape: tmp.shape, dtype: "f32" };
      const h = this.holders.get(t);
      h?.leases.push((tmp.lease as Lease).retain());
      this.release(tmp);
      return leaf;
    });
    t.expr = e.k === "un" ? { ...e, x: leaves[0] } : { ...e, a: leaves[0], b: leaves[1] };
    this.materialize(t);
  }

  // ---- host access and lifetime

  readTensor(t: HeliosTensor): TensorArray {
    const host = t.currentHost;
    if (host) return host;
    this.rethrowDeferred();
    if (t.released && !t.lease && !t.expr) {
      throw releasedError(`reading tensor ${fmt(t.shape)} after releaseGpuTensor: its buffer has been reused (a tensor over 64 KiB at once, a smaller one at the next syncGpu or host read; read it before releasing it)`);
    }
    this.materialize(t);
    const lease = t.lease;
    if (!lease) return (t.host = emptyArray(t.dtype));
    this.sched.sync();
    // the buffer's last write, whichever view of it made that write (an in-place op on a reshape)
    this.sched.wait(lease.lastWrite);
    const bytes = size(t.shape) * storageBytes(t.dtype);
    const raw = this.rt.readBuffer(lease.handle, 0, bytes);
    this.readbacks++;
    this.roundTrips++;
    t.host = fromStorage(t.dtype, raw);
    t.hostVersion = lease.writes;
    // a host round trip: what was released since the last one is no longer observable by the GPU
    this.recycleReleased();
    return t.host;
  }

  // ---- release (HeliosBackend.releaseGpuTensor)
  //
  // Alpha's autograd releases every tape output, the loss included, and reads the loss after.
  // So a small released tensor (a loss, a norm: up to HOLD_BYTES) keeps its buffer until the next
  // host round trip (a host read or syncGpu) and stays readable until then, as in the upstream
  // Helios; a large one goes back to the pool at once, so a training step reuses activation
  // buffers within its own batch. After that, a tensor that was read keeps its host copy and any
  // other read is an ERR_HELIOS_RELEASED error. Ops refuse released inputs at once. Inside a
  // capture every buffer goes back at once (a captured step reuses them).

  /** Small released tensors still holding their buffers, oldest first. */
  private held: HeliosTensor[] = [];
  get heldReleased(): number {
    return this.held.length;
  }

  /** releaseGpuTensor: the tensor can no longer be an op's input; see above for reads. */
  releaseByCaller(t: HeliosTensor): void {
    if (t.released) return;
    if (this.capture || size(t.shape) * storageBytes(t.dtype) > HOLD_BYTES) {
      this.release(t);
      return;
    }
    t.released = true;
    this.held.push(t);
    if (this.held.length > HOLD_MAX) this.recycle(this.held.splice(0, HOLD_MAX / 2));
  }

  /** Returns the buffers of small tensors released since the last host round trip to the pool. */
  recycleReleased(): void {
    if (this.held.length === 0) return;
    const ts = this.held;
    this.held = [];
    this.recycle(ts);
  }

  private recycle(ts: HeliosTensor[]): void {
    for (const t of ts) {
      const host = t.currentHost;
      this.freeStorage(t);
      t.host = host;
    }
  }

  /** Overwrites a device tensor's buffer in program order (keeps the buffer: captures may bind it). */
  writeTensor(t: HeliosTensor, data: ArrayLike<number>): void {
    const op = "writeTensor";
    if (t.released) fail(op, `tensor ${fmt(t.shape)} was already released (releaseGpuTensor)`);
    if (this.capture) throw captureError(op, "cannot upload inside a capture (the upload would be replayed with the same data); write inputs before replay");
    if (data.length !== size(t.shape)) fail(op, `${data.length} values for shape ${fmt(t.shape)} (needs ${size(t.shape)})`);
    this.materialize(t);
    if (!t.lease) return;
    this.rethrowDeferred();
    this.sched.sync();
    this.rt.uploadBuffer(t.lease.handle, toStorage(t.dtype, data as TensorArray));
    this.uploads++;
    t.lease.writes++;
    t.host = null;
  }

  /** Returns a tensor's buffers to the pool now; later use of the tensor is an error. */
  release(t: HeliosTensor): void {
    if (t.released) return;
    t.released = true;
    this.freeStorage(t);
  }

  /** Drops `t`'s buffers (and, through the free hooks, copies derived from it); the tensor keeps no device state. */
  private freeStorage(t: HeliosTensor): void {
    for (const hook of this.freeHooks) hook(t);
    const h = this.holders.get(t);
    this.registry.unregister(t);
    if (h) {
      for (const l of h.leases) l.release();
      h.leases = [];
    }
    t.lease = null;
    t.expr = null;
    t.host = null;
  }
}

/** Released tensors up to this size keep their buffers until the next host round trip. */
const HOLD_BYTES = 64 << 10;
/** Most released tensors held at once (past it the older half goes back to the pool). */
const HOLD_MAX = 4096;

function releasedError(message: string): Error {
  return Object.assign(new Error(`helios: ${message}`), { code: "ERR_HELIOS_RELEASED" });
}

export function promote(a: Dtype, b: Dtype): Dtype {
  if (a === b) return a;
  if (a === "f64" || b === "f64") return "f64";
  if (a === "f32" || b === "f32") return "f32";
  return "f16";
}

function emptyArray(d: Dtype): TensorArray {
  return d === "f16" ? new Uint16Array(0) : d === "i32" ? new Int32Array(0) : d === "f64" ? new Float64Array(0) : new Float32Array(0);
}

function checkPlain(op: string, td: TensorData): void {
  if (!td || !Array.isArray(td.shape) && !(td.shape as unknown)) fail(op, "argument is not a tensor");
  const n = size(td.shape);
  if (!td.data || td.data.length !== n) {
    fail(op, `tensor data has ${td.data?.length} elements but shape ${fmt(td.shape)} needs ${n}`);
  }
}

/** Host array in the device storage type (f64 narrows to f32; f16 stays raw bits). */
function toStorage(d: Dtype, data: TensorArray): ArrayBufferView {
  if (d === "f64") return Float32Array.from(data as Float64Array);
  if (d === "f32" && !(data instanceof Float32Array)) return Float32Array.from(data as ArrayLike<number>);
  if (d === "i32" && !(data instanceof Int32Array)) return Int32Array.from(data as ArrayLike<number>);
  if (d === "f16" && !(data instanceof Uint16Array)) return toF16Array(data as ArrayLike<number>);
  return data;
}

function fromStorage(d: Dtype, raw: ArrayBuffer): TensorArray {
  if (d === "f16") return new Uint16Array(raw);
  if (d === "i32") return new Int32Array(raw);
  if (d === "f64") return Float64Array.from(new Float32Array(raw));
  return new Float32Array(raw);
}

/** Runs one kernel over resolved inputs; the last buffers are the outputs' leases. */
export function run(
  E: Engine, op: string, key: object, build: () => KernelDesc, spec: PushSpec, push: Record<string, number>,
  inputs: TensorData[], outputs: HeliosTensor[], groups: [number, number, number], extra: HeliosTensor[] = [],
): void {
  const pipeline = E.kernel(key, build);
  E.withInputs(op, inputs, (bufs) => {
    E.dispatch(pipeline, [...bufs, ...outputs.map((o) => o.lease), ...extra.map((o) => o.lease)], groups, spec, push, [...outputs, ...extra]);
  });
}

