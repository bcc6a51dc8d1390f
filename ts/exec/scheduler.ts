// Records dispatches into the open batch and submits it at a size threshold or on flush.
// A Ticket names the batch that last wrote a tensor; waiting on it waits only for that
// batch (and, by timeline order, those before it), never for work recorded later.
import type { Groups, Runtime } from "./runtime.js";

export class Ticket {
  /** Timeline value once the batch is submitted; null while it is still open. */
  value: number | null = null;
}

export interface SchedulerStats {
  dispatches: number;
  batches: number;
  waits: number;
}

const shared = new WeakMap<Runtime, Scheduler>();

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
    if (!this.open) {
      this.rt.beginBatch();
      this.open = new Ticket();
      this.recorded = 0;
    }
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
    if (this.recorded >= this.threshold) this.submit();
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

  submit(): void {
    this.sync();
    const t = this.open;
    if (!t) return;
    this.open = null;
    t.value = this.rt.submitBatch();
    this.last = t;
    this.stats.batches++;
  }

  /** Makes the work behind `ticket` visible to the host: submits it if open, then waits. */
  wait(ticket: Ticket | null): void {
    if (!ticket) return;
    if (ticket.value === null) this.submit();
    if (ticket.value !== null && this.rt.getCompleted() < ticket.value) {
      this.stats.waits++;
      this.rt.waitTimeline(ticket.value);
    }
  }

  /** Forgets batch state after the device was destroyed (its batch died with it). */
  reset(): void {
    this.open = null;
    this.last = null;
    this.queued = 0;
    this.words = 0;
    this.recorded = 0;
  }

  /** Submits and waits for everything recorded so far. */
  drain(): void {
    this.submit();
    this.wait(this.last);
  }
}
