// Records dispatches into the open batch and submits it at a size threshold or on flush.
// A Ticket names the batch that last wrote a tensor; waiting on it waits only for that
// batch (and, by timeline order, those before it), never for work recorded later.
import type { Groups, Runtime } from "./runtime.js";
import { type Lease, type QueuedWork, bucketSize } from "./lease.js";
import { PendingPipelines, isProvisional } from "./pipelines.js";
import { deviceGeneration } from "../device.js";

export class Ticket {
  /** Timeline value once the batch is submitted (or last replayed); null while it is still open. */
  value: number | null = null;
  /** "captured": a captured batch, runs only when replayed; "aborted": never runs. */
  kind: "batch" | "captured" | "aborted" = "batch";
}

/** Stable code of every capture misuse (a host read, flush or replay inside a capture, ...). */
export const ERR_CAPTURE = "ERR_HELIOS_CAPTURE";

export function captureError(call: string, msg: string): Error {
  return Object.assign(new Error(`${call}: ${msg}`), { code: ERR_CAPTURE });
}

export interface SchedulerStats {
  dispatches: number;
  batches: number;
  waits: number;
}

const shared = new WeakMap<Runtime, Scheduler>();

/**
 * Compute submissions (batches, read segments, replays) the GPU may be behind by. Without a
 * cap a device slower than the recording thread (lavapipe) falls further behind forever, and
 * every batch boundary then finds each released buffer still pending and leases a new one: the
 * pool grew by a buffer per batch (issue 24); with the cap it levels off at about what the
 * capped lag holds. Four keeps a GPU fed: the host records the next batch (up to HELIOS_BATCH_SIZE
 * dispatches, or a whole replayed step) while three more are queued.
 */
export const MAX_IN_FLIGHT = 4;

/**
 * How many released bytes may wait behind dispatches whose pipelines are still to be compiled
 * without a new lease taking them over (Scheduler.release): half of what the engine holds
 * leased, at least 64 MiB. Such a buffer cannot be leased again meanwhile, so this bounds how much
 * the pool (and a capture recorded cold, which pins its buffers) can grow because compiles were
 * grouped; past it the group compiles and the releases go through (and a lease that runs out of
 * device memory lets them go first: BufferPool). Measured on memsim's dry H100 (GPT-2 124M, B 16,
 * T 1024, the first captured step; bench/train/memsim.ts): budgets of 1/16, 1/4, 1/2 and all of
 * the leased bytes grouped the f32 step's 35 kernels in 10, 3, 2 and 2 compile calls (matmul16:
 * 49 kernels in 10, 5, 3, 2) with pool peaks +1.6, +4.4, +2.5, +2.5 % (matmul16 +1.4, +3.2, +2.6,
 * 0 %) over compiling one at a time; without a bound, one call each (+4.6 %, 0 %).
 */
export function deferBudget(liveBytes: number): number {
  return Math.max(64 << 20, liveBytes / 2);
}

/**
 * One scheduler per runtime: the runtime has a single open batch per process, so every
 * HeliosBackend on it must record into the same one.
 */
export function schedulerFor(rt: Runtime, threshold: number, compileThreads = 0, submitEarlyUs = 0): Scheduler {
  let s = shared.get(rt);
  if (!s) {
    s = new Scheduler(rt, threshold);
    shared.set(rt, s);
  }
  s.followDevice();
  // the batch size and compile threads are process-wide: the most recently created backend's settings win
  s.threshold = threshold;
  s.earlyMs = submitEarlyUs / 1000;
  if (s.pipelines) s.pipelines.threads = compileThreads;
  return s;
}

/** A release waiting behind queued dispatches whose pipelines are still to be compiled. */
interface Deferred {
  handle: number;
  bytes: number;
  release: (handle: number) => void;
  /** Taken over by a new lease (Scheduler.reuse): never released here. */
  taken: boolean;
}

export class Scheduler implements QueuedWork {
  private open: Ticket | null = null;
  private last: Ticket | null = null;
  private recorded = 0;
  readonly stats: SchedulerStats = { dispatches: 0, batches: 0, waits: 0 };
  /**
   * Pipelines whose driver compile is deferred until queued dispatches need them (null when the
   * runtime cannot compile many at once: the test mock). KernelCache defers through it.
   */
  readonly pipelines: PendingPipelines | null;
  /** Word offsets in `packed` of queued dispatches whose pipeline handle is still provisional. */
  private provisional: number[] = [];
  /** Releases waiting behind those dispatches (program order), and their bytes (not taken over). */
  private deferred: Deferred[] = [];
  private deferredBytes = 0;
  /** Those a new lease of the same size may take over, by byte size. */
  private reusable = new Map<number, Deferred[]>();
  /** Calls of sync(): a buffer leased since the last one is unknown to recorded work. */
  handOvers = 0;
  /** HELIOS_SUBMIT_EARLY_US in ms (0: off): see early(). */
  earlyMs = 0;
  /** performance.now() of the open batch's first dispatch, and the earliest next look at the GPU. */
  private openedAt = 0;
  private nextLook = 0;

  constructor(
    private readonly rt: Runtime,
    public threshold: number,
  ) {
    this.pipelines = PendingPipelines.supported(rt) ? new PendingPipelines(rt) : null;
  }

  /** Ticket of the batch the next dispatch lands in (opens one if needed). */
  current(): Ticket {
    return this.open ?? this.openBatch(false);
  }

  /**
   * A batch that will be captured must stay whole. Any other may be submitted in parts: the
   * runtime submits what is recorded before it allocates fresh device memory, which on NVIDIA
   * takes ~23 ms per GiB of CPU time the GPU would otherwise sit idle through
   * (BatchOptions.overlapAllocations).
   */
  private openBatch(capture: boolean): Ticket {
    this.rt.beginBatch(capture ? undefined : { overlapAllocations: true });
    this.open = new Ticket();
    this.recorded = 0;
    this.openedAt = this.earlyMs > 0 ? performance.now() : 0;
    this.nextLook = this.openedAt + this.earlyMs;
    return this.open;
  }

  /**
   * Queues one dispatch in the packed recordDispatchMany format (index.d.ts); queued
   * dispatches cross N-API together at the next sync(). Anything else that touches the
   * runtime (release, upload, fill, read, submit) syncs first, so program order holds; but
   * what no queued dispatch can be affected by does not wait for pipeline compiles (handOver),
   * and a release may wait behind them (release). `pipeline` may be provisional (pipelines.ts).
   */
  record(pipeline: number, buffers: number[], groups: Groups, push?: Uint32Array): Ticket {
    const provisional = this.pipelines !== null && isProvisional(pipeline);
    if (provisional) {
      this.followDevice(); // a device destroyed since forgets its pending pipelines
      if (!this.pipelines?.knows(pipeline)) throw stalePipeline(pipeline);
    }
    const ticket = this.current();
    const np = push ? push.length : 0;
    this.reserve(7 + 2 * buffers.length + np);
    const w = this.packed;
    let o = this.words;
    if (provisional) this.provisional.push(o);
    w[o++] = pipeline % 4294967296;
    w[o++] = Math.floor(pipeline / 4294967296);
    w[o++] = groups[0];
    w[o++] = groups[1] ?? 1;
    w[o++] = groups[2] ?? 1;
    w[o++] = buffers.length;
    w[o++] = np;
    for (const h of buffers) {
      w[o++] = h % 4294967296;
      w[o++] = Math.floor(h / 4294967296);
    }
    if (push) w.set(push, o);
    this.words = o + np;
    this.queued++;
    this.recorded++;
    this.stats.dispatches++;
    // A captured batch must stay whole (a split batch cannot be captured), so no threshold.
    if (!this.capturing && (this.recorded >= this.threshold || this.early())) this.submit();
    return ticket;
  }

  /**
   * Whether the open batch should go now although it is below the size threshold: it is older
   * than earlyMs and the GPU has at most one submission left to run, so it would otherwise run
   * dry while the host records (a loop of large products whose results are read only at the end:
   * Alpha's `bench --suite=cuda` recorded all 40 products before the GPU started on the first).
   * The batch grows while the GPU is busy, so a step the GPU is behind on still goes in large
   * batches; a host slower than the GPU submits at most once per earlyMs. Not while dispatches
   * wait for pipeline compiles (their group would be cut) nor for a captured or profiled batch.
   * Costs a clock read per dispatch and a timeline query per look.
   */
  private early(): boolean {
    if (this.earlyMs <= 0 || this.threshold === Infinity || this.provisional.length > 0) return false;
    const now = performance.now();
    if (now < this.nextLook) return false;
    if (this.rt.getCompleted() + 1 >= this.lastValue) return true;
    this.nextLook = now + this.earlyMs / 4;
    return false;
  }

  private packed = new Uint32Array(4096);
  private words = 0;
  private queued = 0;

  private reserve(n: number): void {
    if (this.words + n <= this.packed.length) return;
    const next = new Uint32Array(Math.max(this.packed.length * 2, this.words + n));
    next.set(this.packed.subarray(0, this.words));
    this.packed = next;
  }

  /**
   * Hands queued dispatches to the runtime (one N-API crossing), after compiling the pipelines
   * they still wait for in one parallel call; then the releases that waited behind them. A
   * pipeline that fails to compile drops the dispatches that use it (the rest are recorded, the
   * batch stays usable) and is reported here, coded and naming the kernel.
   */
  sync(): void {
    if (this.provisional.length > 0 && this.generation !== deviceGeneration()) {
      // queued for a device destroyed since: dropped with it, never compiled for the next one
      this.followDevice();
      return;
    }
    this.handOvers++;
    let failure: Error | null = null;
    try {
      if (this.queued === 0) return;
      if (this.provisional.length > 0) failure = this.resolveQueued();
      const count = this.queued;
      const words = this.packed.subarray(0, this.words);
      this.queued = 0;
      this.words = 0;
      if (count > 0) this.rt.recordDispatchMany(words, count);
    } finally {
      this.releaseDeferred();
    }
    if (failure) throw failure;
  }

  /**
   * Hands queued dispatches over unless some wait for a pipeline compile. For moments that do
   * not need them recorded: an upload or fill into a buffer leased from the runtime for it (no
   * queued dispatch can use it: a buffer reaches the runtime's pool again only after the
   * dispatches queued before its release were recorded) and a large lease (the runtime may
   * submit ahead of the allocation).
   */
  handOver(): void {
    if (this.provisional.length === 0) this.sync();
  }

  /**
   * Hands a lease's buffer back to the runtime (`release`) after the dispatches queued before it,
   * which may use it. While some of those wait for a pipeline compile, the release waits with
   * them, so the new kernels of a cold step gather into one parallel compile instead of one
   * compile per release (a step releases a temporary after nearly every op); a later lease of the
   * same size takes such a buffer over (reuse), and what waits untaken is kept under
   * deferBudget bytes: past it the group compiles and the releases go through.
   */
  release(l: Lease, liveBytes: number, release: (handle: number) => void): void {
    if (this.provisional.length > 0 && this.deferredBytes + l.bytes <= deferBudget(liveBytes)) {
      const d: Deferred = { handle: l.handle, bytes: l.bytes, release, taken: false };
      this.deferred.push(d);
      this.deferredBytes += l.bytes;
      // Taken over, the buffer's next holder is recorded after every use by this one (program
      // order, barriers from the tracker). Not if recorded work knows it (a capture open before
      // it pins it, or reads its contents at each replay) or the host wrote it (a capture would
      // re-read the upload at each replay): the runtime's pool keeps such buffers out of reuse.
      if (l.epoch === this.handOvers && !l.hostWritten) {
        const b = bucketSize(l.bytes);
        const list = this.reusable.get(b);
        if (list) list.push(d);
        else this.reusable.set(b, [d]);
      }
      return;
    }
    try {
      this.sync();
    } finally {
      release(l.handle);
    }
  }

  /**
   * A buffer released behind queued dispatches, taken over by a new lease of `bytes`: one of
   * their size class (as the runtime's pool reuses) at least as long (the runtime checks reads,
   * uploads and fills against the length it was leased at); null when there is none.
   */
  reuse(bytes: number): number | null {
    const list = this.reusable.get(bucketSize(bytes));
    if (!list) return null;
    for (let i = list.length - 1; i >= 0; i--) {
      const d = list[i];
      if (d.bytes < bytes) continue;
      list.splice(i, 1);
      d.taken = true;
      this.deferredBytes -= d.bytes;
      return d.handle;
    }
    return null;
  }

  flush(): boolean {
    if (this.deferred.length === 0) return false;
    this.sync();
    return true;
  }

  private releaseDeferred(): void {
    if (this.deferred.length === 0) return;
    const list = this.deferred;
    this.deferred = [];
    this.deferredBytes = 0;
    this.reusable.clear();
    for (const d of list) if (!d.taken) d.release(d.handle);
  }

  /**
   * Compiles the pending pipelines and writes their handles into the queued dispatches; drops
   * the dispatches of a pipeline that failed and returns the first such failure.
   */
  private resolveQueued(): Error | null {
    const P = this.pipelines as PendingPipelines;
    P.resolve();
    const w = this.packed;
    const drop = new Set<number>();
    let failure: Error | null = null;
    for (const o of this.provisional) {
      const id = w[o] + w[o + 1] * 4294967296;
      const h = P.current(id);
      if (h === null || isProvisional(h)) {
        drop.add(o);
        failure ??= P.failure(id) ?? stalePipeline(id);
        continue;
      }
      w[o] = h % 4294967296;
      w[o + 1] = Math.floor(h / 4294967296);
    }
    this.provisional = [];
    if (drop.size > 0) this.dropQueued(drop);
    return failure;
  }

  /** Removes the queued dispatches that start at the word offsets in `drop`. */
  private dropQueued(drop: Set<number>): void {
    const w = this.packed;
    let r = 0, o = 0, kept = 0;
    while (r < this.words) {
      const len = 7 + 2 * w[r + 5] + w[r + 6];
      if (!drop.has(r)) {
        if (o !== r) w.copyWithin(o, r, r + len);
        o += len;
        kept++;
      }
      r += len;
    }
    this.stats.dispatches -= this.queued - kept;
    this.words = o;
    this.queued = kept;
  }

  /** The timeline value of the last submission or replay (0 before any). */
  get lastValue(): number {
    return this.last?.value ?? 0;
  }

  submit(): void {
    if (this.capturing) {
      throw captureError("flush", "cannot submit while a batch is being captured (endCapture first): the captured step would be cut in two");
    }
    this.sync();
    const t = this.open;
    if (!t) return;
    this.open = null;
    t.value = this.rt.submitBatch();
    this.last = t;
    this.stats.batches++;
    this.throttle(t.value);
  }

  /** Waits until at most MAX_IN_FLIGHT submissions before `value` are pending (see there). */
  private throttle(value: number): void {
    const behind = value - MAX_IN_FLIGHT;
    if (behind > 0 && this.rt.getCompleted() < behind) {
      this.stats.waits++;
      this.rt.waitTimeline(behind);
    }
  }

  /** Makes the work behind `ticket` visible to the host: submits it if open, then waits. */
  wait(ticket: Ticket | null): void {
    if (!ticket) return;
    if (ticket === this.capturing) {
      throw captureError(
        "read",
        "a tensor computed inside the open capture was read on the host; captured work runs only at replay, so a captured step cannot depend on a host read (read it after replay, or keep the value on the device)",
      );
    }
    if (ticket.kind === "aborted") throw captureError("read", "the tensor was computed inside an aborted capture and never ran");
    if (ticket.kind === "captured" && ticket.value === null) {
      throw captureError("read", "the tensor is an output of a capture that was not replayed yet");
    }
    if (ticket.value === null) this.submit();
    if (ticket.value !== null && this.rt.getCompleted() < ticket.value) {
      this.stats.waits++;
      this.rt.waitTimeline(ticket.value);
    }
  }

  private capturing: Ticket | null = null;

  /**
   * Submits what is recorded so far, then opens the batch to capture. Until endCapture,
   * the size threshold is ignored and a flush or a host read of captured work is an error.
   */
  beginCapture(): Ticket {
    if (this.capturing) throw captureError("beginCapture", "a capture is already open (endCapture or abortCapture it first)");
    if (!this.rt.captureBatch || !this.rt.replayBatch || !this.rt.destroyCapture) {
      throw captureError("beginCapture", "this runtime has no captured batches (captureBatch/replayBatch/destroyCapture)");
    }
    this.submit();
    const t = this.openBatch(true);
    t.kind = "captured";
    this.capturing = t;
    return t;
  }

  /** Ends the capture: the batch is kept by the runtime, not submitted. Returns the graph. */
  endCapture(): number {
    const t = this.capturing;
    if (!t) throw captureError("endCapture", "no capture is open (beginCapture first)");
    try {
      this.sync();
    } catch (e) {
      // A pipeline the capture needs failed to compile (or the runtime refused a dispatch): the
      // captured work is incomplete, so it is dropped and the scheduler leaves capture mode.
      this.capturing = null;
      this.dropCapture(t);
      throw e;
    }
    this.capturing = null;
    let graph: number;
    try {
      graph = (this.rt.captureBatch as () => number)();
    } catch (e) {
      // The runtime refused and left the batch open: it becomes an ordinary batch again.
      t.kind = "batch";
      throw e;
    }
    this.open = null;
    return graph;
  }

  /** Ends an open capture and drops it: nothing recorded since beginCapture ever runs. */
  abortCapture(): void {
    const t = this.capturing;
    if (!t) return;
    try {
      const graph = this.endCapture();
      (this.rt.destroyCapture as (g: number) => void)(graph);
      t.kind = "aborted";
    } catch {
      // captureBatch refused (the batch was split): it stays an ordinary batch and runs; or
      // endCapture already dropped it (a pipeline failed to compile)
    }
  }

  /** Drops the open captured batch `t`; one the runtime refuses to capture (split) stays an ordinary batch. */
  private dropCapture(t: Ticket): void {
    try {
      const graph = (this.rt.captureBatch as () => number)();
      this.open = null;
      (this.rt.destroyCapture as (g: number) => void)(graph);
      t.kind = "aborted";
    } catch {
      t.kind = "batch";
    }
  }

  /** Resubmits a captured batch after everything recorded before it; `ticket` names its outputs. */
  replay(graph: number, ticket: Ticket): void {
    if (this.capturing) throw captureError("replay", "cannot replay while a batch is being captured");
    this.submit();
    ticket.value = (this.rt.replayBatch as (g: number) => number)(graph);
    this.last = ticket;
    this.stats.batches++;
    this.throttle(ticket.value);
  }

  destroyCapture(graph: number): void {
    this.sync();
    (this.rt.destroyCapture as (g: number) => void)(graph);
  }

  private generation = deviceGeneration();

  /**
   * Forgets the batch state of a destroyed device once per destroyDevice(): every backend on the
   * runtime shares this scheduler, so the first to notice resets it, and an old backend's queued
   * dispatches (stale handles) never reach the next device's batch.
   */
  followDevice(): void {
    if (this.generation === deviceGeneration()) return;
    this.generation = deviceGeneration();
    this.reset();
  }

  /**
   * Forgets batch state after the device was destroyed (its batch died with it), with the
   * pipelines still pending for it; the releases waiting behind them go through (their handles
   * are stale, which the pool counts).
   */
  reset(): void {
    this.capturing = null;
    this.open = null;
    this.last = null;
    this.queued = 0;
    this.words = 0;
    this.recorded = 0;
    this.provisional = [];
    this.pipelines?.reset();
    this.releaseDeferred();
  }

  /**
   * Records `body` into a batch of its own that writes GPU timestamps around each dispatch
   * (read them with the runtime's batchProfile); returns the batch's timeline value.
   */
  profiled(call: string, body: () => void): number {
    if (this.capturing) throw captureError(call, "cannot time work inside a capture");
    this.submit();
    this.rt.beginBatch({ profile: true, overlapAllocations: true });
    const t = (this.open = new Ticket());
    this.recorded = 0;
    const threshold = this.threshold;
    this.threshold = Infinity; // one batch, whatever its length
    try {
      body();
    } finally {
      this.threshold = threshold;
    }
    this.submit();
    return t.value as number;
  }

  /** Submits and waits for everything recorded so far. */
  drain(): void {
    this.submit();
    this.wait(this.last);
  }
}

/** A provisional pipeline handle the scheduler does not know: from before destroyDevice(). */
function stalePipeline(h: number): Error {
  return Object.assign(
    new Error(`helios: pipeline ${h} was made for a device instance destroyed since (destroyDevice); the kernel is compiled again when an op needs it`),
    { code: "ERR_HELIOS_INVALID_HANDLE" },
  );
}
