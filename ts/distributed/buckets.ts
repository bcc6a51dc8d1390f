// Data-parallel gradient reduction (DDP-style): gradients are grouped into buckets of about
// `capBytes` in the order backward produces them, and each bucket's all-reduce is launched as soon
// as its last gradient arrives — while backward goes on computing the rest — instead of after
// backward. Buckets launch strictly in plan order on every rank (a bucket completed early waits
// for the ones before it), so all ranks issue the same collectives in the same order.
import type { TensorData } from "../types.js";
import { DistError } from "./errors.js";
import type { ReduceOp, Transport } from "./transport.js";

export interface GradSpec {
  readonly name: string;
  readonly shape: readonly number[];
}

export interface BucketEntry {
  name: string;
  shape: number[];
  numel: number;
  /** Element offset inside the bucket. */
  offset: number;
}

export interface Bucket {
  index: number;
  entries: BucketEntry[];
  numel: number;
}

/**
 * Buckets over `specs` listed in the order their gradients complete (for a GPT: the reverse of
 * the forward order). A bucket closes once it holds at least `capBytes`; the first one closes at
 * `firstCapBytes` (PyTorch's 1 MiB first bucket: the first all-reduce starts early). A tensor is
 * never split across buckets.
 */
export function planBuckets(specs: GradSpec[], capBytes: number, firstCapBytes = Math.min(capBytes, 1 << 20), bytesPerElement = 4): Bucket[] {
  if (!(capBytes > 0) || !(firstCapBytes > 0)) {
    throw new DistError("ERR_HELIOS_DIST_ARGUMENT", "planBuckets", `bucket caps ${firstCapBytes}/${capBytes} bytes must be positive`);
  }
  const seen = new Set<string>();
  const out: Bucket[] = [];
  let cur: Bucket = { index: 0, entries: [], numel: 0 };
  for (const s of specs) {
    if (seen.has(s.name)) throw new DistError("ERR_HELIOS_DIST_ARGUMENT", "planBuckets", `parameter "${s.name}" is listed twice`);
    seen.add(s.name);
    const numel = s.shape.reduce((a, b) => a * b, 1);
    if (!Number.isSafeInteger(numel) || numel <= 0) {
      throw new DistError("ERR_HELIOS_DIST_ARGUMENT", "planBuckets", `parameter "${s.name}" has shape [${s.shape.join(", ")}]`);
    }
    cur.entries.push({ name: s.name, shape: [...s.shape], numel, offset: cur.numel });
    cur.numel += numel;
    const cap = out.length === 0 ? firstCapBytes : capBytes;
    if (cur.numel * bytesPerElement >= cap) {
      out.push(cur);
      cur = { index: out.length, entries: [], numel: 0 };
    }
  }
  if (cur.entries.length > 0) out.push(cur);
  return out;
}

/** The backend ops the reducer uses: packing gradients into a bucket and slicing them back out. */
export interface ReducerBackend {
  reshape(a: TensorData, shape: number[]): TensorData;
  cat(ts: TensorData[], axis: number): TensorData;
  slice(a: TensorData, starts: number[], ends: number[]): TensorData;
  /** Copies `src` (flattened) into `dst` at element `offset` (HeliosBackend; persistent buckets). */
  copyInto?(dst: TensorData, offset: number, src: TensorData): void;
  zeros?(shape: number[], dtype?: "f32"): TensorData;
  releaseGpuTensor?(t: TensorData): void;
}

export interface ReducerOptions {
  /** "avg" (default): the mean gradient over ranks, as DDP; "sum" leaves scaling to the caller. */
  op?: ReduceOp;
  /** Called as each bucket is launched (tests and traces see the overlap order). */
  onLaunch?: (bucket: number) => void;
}

/**
 * Takes over a bucket's collective instead of running it now: a captured step ends its capture
 * there and runs the collective between the replays of the two pieces (train/captured.ts).
 */
export type DeferLaunch = (packed: TensorData, bucket: number) => void;

/**
 * One step's gradient reduction: `add(name, grad)` as backward produces each gradient, `finish()`
 * after backward for the reduced gradients by name. The caller keeps ownership of the gradients
 * it passes in; the reducer owns its buckets and what finish() returns is the caller's.
 */
export class GradReducer {
  private readonly where = new Map<string, Bucket>();
  private readonly got = new Map<string, TensorData>();
  private readonly arrived: number[];
  private readonly packed: (TensorData | null)[];
  /**
   * Persistent bucket tensors, packed in place each step: the transport's (NCCL: memory shared
   * with CUDA), else the backend's where it can copy into a tensor; null: a fresh `cat` per step.
   */
  private readonly store: (TensorData | null)[];
  private next = 0;
  private readonly op: ReduceOp;
  /** While set, launches go here instead of to the transport (see DeferLaunch). */
  defer: DeferLaunch | null = null;

  constructor(
    private readonly B: ReducerBackend,
    private readonly transport: Transport,
    readonly buckets: Bucket[],
    private readonly o: ReducerOptions = {},
  ) {
    for (const b of buckets) for (const e of b.entries) this.where.set(e.name, b);
    this.arrived = buckets.map(() => 0);
    this.packed = buckets.map(() => null);
    this.op = o.op ?? "avg";
    this.store = buckets.map((b) => transport.allocBucket?.(b.numel) ?? (B.copyInto && B.zeros ? B.zeros([b.numel], "f32") : null));
  }

  /** Buckets launched so far this step. */
  get launched(): number {
    return this.next;
  }

  add(name: string, grad: TensorData): void {
    const b = this.where.get(name);
    if (!b) throw new DistError("ERR_HELIOS_DIST_ARGUMENT", "GradReducer.add", `"${name}" is not a parameter of the bucket plan`);
    if (this.got.has(name)) throw new DistError("ERR_HELIOS_DIST_ARGUMENT", "GradReducer.add", `gradient "${name}" was added twice in one step`);
    const e = b.entries.find((x) => x.name === name)!;
    const n = grad.shape.reduce((a, c) => a * c, 1);
    if (n !== e.numel) {
      throw new DistError("ERR_HELIOS_DIST_ARGUMENT", "GradReducer.add", `gradient "${name}" has ${n} elements, the parameter ${e.numel}`);
    }
    this.got.set(name, grad);
    this.arrived[b.index]++;
    while (this.next < this.buckets.length && this.arrived[this.next] === this.buckets[this.next].entries.length) {
      this.launch(this.buckets[this.next++]);
    }
  }

  private launch(b: Bucket): void {
    const grads = b.entries.map((e) => this.got.get(e.name)!);
    const dst = this.store[b.index];
    let packed: TensorData;
    if (dst && this.B.copyInto) {
      for (let i = 0; i < grads.length; i++) this.B.copyInto(dst, b.entries[i].offset, grads[i]);
      packed = dst;
    } else {
      const flat = grads.map((g) => this.B.reshape(g, [g.shape.reduce((a, c) => a * c, 1)]));
      packed = flat.length === 1 ? flat[0] : this.B.cat(flat, 0);
      if (flat.length > 1) for (const f of flat) this.B.releaseGpuTensor?.(f);
    }
    this.packed[b.index] = packed;
    this.o.onLaunch?.(b.index);
    if (this.defer) this.defer(packed, b.index);
    else this.reduce(packed);
  }

  /** Runs one bucket's collective (a deferred launch runs it later with this). */
  reduce(packed: TensorData): void {
    this.transport.allReduce([packed], this.op);
  }

  /** The reduced gradients by name (new tensors); resets for the next step. */
  finish(): Map<string, TensorData> {
    if (this.next < this.buckets.length) {
      const missing = this.buckets.slice(this.next).flatMap((b) => b.entries.filter((e) => !this.got.has(e.name)).map((e) => e.name));
      throw new DistError("ERR_HELIOS_DIST_ARGUMENT", "GradReducer.finish", `no gradient for ${missing.slice(0, 5).join(", ")}${missing.length > 5 ? ` and ${missing.length - 5} more` : ""}`);
    }
    const out = new Map<string, TensorData>();
    for (const b of this.buckets) {
      const packed = this.packed[b.index]!;
      for (const e of b.entries) {
        const part = this.B.slice(packed, [e.offset], [e.offset + e.numel]);
        out.set(e.name, this.B.reshape(part, e.shape));
        if (part !== out.get(e.name)) this.B.releaseGpuTensor?.(part);
      }
      if (packed !== this.store[b.index]) this.B.releaseGpuTensor?.(packed);
    }
    this.reset();
    return out;
  }

  /** Forgets this step's gradients (after finish, or a step abandoned midway). */
  reset(): void {
    this.packed.fill(null);
    this.got.clear();
    this.arrived.fill(0);
    this.next = 0;
  }

  /** Frees the persistent buckets. */
  destroy(): void {
    for (const t of this.store) if (t) this.B.releaseGpuTensor?.(t);
  }
}
