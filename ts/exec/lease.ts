// Reference-counted ownership of leased device buffers. A tensor, a view of it (reshape)
// and a pending fused expression that reads it each hold one reference; the buffer goes
// back to the runtime's pool when the last one lets go. Releasing right after recording a
// dispatch that reads it is safe: the runtime hands the buffer out again either once that
// work completed or, inside an open batch, only to work ordered after it (with a barrier).
// Release temporaries as soon as they are dead: that is what lets a captured step reuse them.
// While queued dispatches wait for pipeline compiles, a release waits behind them and a new
// lease may take its buffer over instead (QueuedWork, ts/exec/scheduler.ts).
import type { Runtime } from "./runtime.js";
import type { Ticket } from "./scheduler.js";
import { HeliosSizeError } from "../shape.js";

/** The runtime's threshold for submitting ahead of a fresh allocation (src/runtime/buffers.rs). */
const LARGE_LEASE_BYTES = 1 << 20;

/**
 * How the pool orders its buffers' return and reuse with work its owner still queues (the
 * Engine's Scheduler, ts/exec/scheduler.ts, which holds dispatches back while the pipelines they
 * need are compiled).
 */
export interface QueuedWork {
  /** Before a lease of LARGE_LEASE_BYTES or more (the runtime may submit ahead of the allocation): hand queued work over if it can go now. */
  handOver(): void;
  /** Returns `l`'s buffer to the runtime (`release(handle)`) after the queued work that may use it. */
  release(l: Lease, liveBytes: number, release: (handle: number) => void): void;
  /** A buffer of at least `bytes`, in their size class, released behind queued work, that a new lease may take over (null: none). */
  reuse(bytes: number): number | null;
  /** Hands queued work over and lets the releases held behind it go; whether there were any. */
  flush(): boolean;
  /** Hand-overs of queued work so far (Lease.epoch). */
  readonly handOvers: number;
}

const DIRECT: QueuedWork = { handOver() {}, release: (l, _live, release) => release(l.handle), reuse: () => null, flush: () => false, handOvers: 0 };

/** The runtime pool's size classes (src/runtime/pool.rs, bucket_size): four steps per power of two, at least 256 bytes. */
export function bucketSize(len: number): number {
  const n = Math.max(256, len);
  const pow = 2 ** Math.ceil(Math.log2(n));
  if (pow === n) return n;
  const base = pow / 2, step = base / 4;
  return base + Math.ceil((n - base) / step) * step;
}

export class Lease {
  private refs = 1;
  /**
   * GPU and host writes to this buffer so far (dispatch outputs, uploads, replays of a capture
   * that writes it): a copy derived from the buffer (a prepacked weight) is current while this
   * count is the one it was made at.
   */
  writes = 0;
  /** The batch of the last dispatch that wrote this buffer: a read through any view waits for it. */
  lastWrite: Ticket | null = null;
  /** QueuedWork.handOvers when leased: a buffer leased since the last hand-over is unknown to recorded work. */
  epoch = -1;
  /** Uploaded or filled from the host (a capture re-reads such contents on every replay). */
  hostWritten = false;
  /** Taken over from a release still behind queued work (QueuedWork.reuse): a host write must wait for that work. */
  recycled = false;

  constructor(
    private readonly pool: BufferPool,
    readonly handle: number,
    readonly bytes: number,
    /** Order of leasing: a capture tells buffers leased inside it from older ones. */
    readonly serial = 0,
    /** Frees a buffer that is not the pool's (a buffer shared with CUDA); default: back to the pool. */
    private readonly onFree: ((l: Lease) => void) | null = null,
  ) {}

  /** Whether exactly one holder is left (it may reuse the buffer for a copy of its contents). */
  get exclusive(): boolean {
    return this.refs === 1;
  }

  get alive(): boolean {
    return this.refs > 0;
  }

  retain(): this {
    if (this.refs <= 0) throw new Error("helios: internal error: retain of a released buffer");
    this.refs++;
    return this;
  }

  release(): void {
    if (this.refs <= 0) return;
    if (--this.refs === 0) {
      if (this.onFree) this.onFree(this);
      else this.pool.free(this);
    }
  }
}

export class BufferPool {
  leases = 0;
  frees = 0;

  /** Where releases and large leases meet the owner's queued work (the Engine sets its scheduler). */
  queue: QueuedWork = DIRECT;

  /** Bytes leased and not yet freed. */
  liveBytes = 0;

  constructor(private readonly rt: Runtime) {}

  private limits: { maxBytes: number; maxBind: number } | null = null;

  /** The largest buffer the device can create, rounded down to 4 bytes (as the runtime checks). */
  get maxBytes(): number {
    return (this.limits ??= this.readLimits()).maxBytes;
  }

  /** The largest buffer a dispatch may bind (DeviceInfo.maxBindingBytes; unlimited when absent). */
  get maxBind(): number {
    return (this.limits ??= this.readLimits()).maxBind;
  }

  /** Read once: device info crosses N-API, and leases are hot. Mocks may omit both fields. */
  private readLimits(): { maxBytes: number; maxBind: number } {
    const info = this.rt.getDeviceInfo() as { maxBufferSize?: unknown; maxBindingBytes?: unknown };
    // 0: a driver without maintenance4; the runtime then assumes 2^32 - 1 (src/runtime/buffers.rs).
    const buf = typeof info.maxBufferSize !== "number" ? Number.MAX_SAFE_INTEGER : info.maxBufferSize > 0 ? info.maxBufferSize : 2 ** 32 - 1;
    const bind = typeof info.maxBindingBytes === "number" && info.maxBindingBytes > 0 ? info.maxBindingBytes : Infinity;
    return { maxBytes: Math.floor(Math.min(buf, Number.MAX_SAFE_INTEGER) / 4) * 4, maxBind: bind };
  }

  /**
   * Sizes round up to 4 bytes so every buffer can be viewed as u32 words. A size that is not a
   * whole number of bytes the device can hold in one buffer is refused, naming `op`, before
   * anything is allocated.
   */
  lease(byteLength: number, op = "leaseBuffer", hostWrite = false): Lease {
    if (!Number.isSafeInteger(byteLength) || byteLength < 0) {
      throw new HeliosSizeError(op, `byte length ${byteLength} is not a whole number up to 2^53 - 1`);
    }
    if (byteLength > this.maxBytes) {
      throw new HeliosSizeError(op, `${byteLength} bytes are more than the device's largest buffer (${this.maxBytes} bytes, DeviceInfo.maxBufferSize)`);
    }
    // Plain arithmetic (exact below 2^53): a 32-bit `& ~3` here turned a 2^31-byte tensor
    // into a 4-byte buffer (issue 24).
    const bytes = Math.max(4, Math.ceil(byteLength / 4) * 4);
    this.leases++;
    // a buffer the host will write must not be one queued dispatches still use
    const reused = hostWrite ? null : this.queue.reuse(bytes);
    // A large lease may allocate fresh memory, before which the runtime submits the recorded
    // work (overlapAllocations): hand it the dispatches still queued here so they run too.
    if (reused === null && bytes >= LARGE_LEASE_BYTES) this.queue.handOver();
    const l = new Lease(this, reused ?? this.leaseNew(bytes), bytes, this.leases);
    l.epoch = this.queue.handOvers;
    l.recycled = reused !== null;
    this.live.set(bytes, (this.live.get(bytes) ?? 0) + 1);
    this.liveBytes += bytes;
    return l;
  }

  /** A buffer from the runtime; out of device memory, once more after the releases held behind queued work went back. */
  private leaseNew(bytes: number): number {
    try {
      return this.rt.leaseBuffer(bytes);
    } catch (e) {
      if ((e as { code?: string }).code !== "ERR_HELIOS_OUT_OF_MEMORY" || !this.queue.flush()) throw e;
      return this.rt.leaseBuffer(bytes);
    }
  }

  /** Live leases by byte size. */
  private readonly live = new Map<number, number>();

  /** Live leases grouped by byte size, the largest totals first: [bytes, count][]. */
  liveBySize(): [number, number][] {
    return [...this.live].filter(([, n]) => n > 0).sort((x, y) => y[0] * y[1] - x[0] * x[1]);
  }

  free(l: Lease): void {
    this.frees++;
    this.live.set(l.bytes, (this.live.get(l.bytes) ?? 1) - 1);
    this.liveBytes -= l.bytes;
    // a failure to record the queued work surfaces from here (after the release), not swallowed
    this.queue.release(l, this.liveBytes, this.releaseNow);
  }

  private readonly releaseNow = (handle: number): void => {
    try {
      this.rt.releaseBuffer(handle);
    } catch {
      // After destroyDevice() every handle is stale; a finalizer releasing one then must
      // not throw out of the FinalizationRegistry callback (that would kill the process).
      this.staleFrees++;
    }
  };

  staleFrees = 0;
}
