// Records dispatches into the open batch and submits it at a size threshold or on flush.
// A Ticket names the batch that last wrote a tensor; waiting on it waits only for that
// batch (and, by timeline order, those before it), never for work recorded later.
import type { Groups, Runtime } from "./runtime.js";
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
 * One scheduler per runtime: the runtime has a single open batch per process, so every
 * HeliosBackend on it must record into the same one.
 */
export function schedulerFor(rt: Runtime, threshold: number): Scheduler {
  let s = shared.get(rt);
  if (!s) {
    s = new Scheduler(rt, threshold);
    shared.set(rt, s);
  }
  s.followDevice();
  // the batch size is process-wide: the most recently created backend's setting wins
  s.threshold = threshold;
  return s;
}

export class Scheduler {
  private open: Ticket | null = null;
  private last: Ticket | null = null;
  private recorded = 0;
  readonly stats: SchedulerStats = { dispatches: 0, batches: 0, waits: 0 };

  constructor(
    private readonly rt: Runtime,
    public threshold: number,
  ) {}

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
    return this.open;
  }

  /**
   * Queues one dispatch in the packed recordDispatchMany format (index.d.ts); queued
   * dispatches cross N-API together at the next sync(). Anything else that touches the
   * runtime (release, upload, fill, read, submit) syncs first, so program order holds.
   */
  record(pipeline: number, buffers: number[], groups: Groups, push?: Uint32Array): Ticket {
    const ticket = this.current();
    const np = push ? push.length : 0;
    this.reserve(7 + 2 * buffers.length + np);
    const w = this.packed;
    let o = this.words;
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
    if (!this.capturing && this.recorded >= this.threshold) this.submit();
    return ticket;
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

  /** Hands queued dispatches to the runtime (one N-API crossing). */
  sync(): void {
    if (this.queued === 0) return;
    const count = this.queued;
    const words = this.packed.subarray(0, this.words);
    this.queued = 0;
    this.words = 0;
    this.rt.recordDispatchMany(words, count);
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
    this.sync();
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
      // captureBatch refused (the batch was split): it stays an ordinary batch and runs
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

  /** Forgets batch state after the device was destroyed (its batch died with it). */
  reset(): void {
    this.capturing = null;
    this.open = null;
    this.last = null;
    this.queued = 0;
    this.words = 0;
    this.recorded = 0;
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
