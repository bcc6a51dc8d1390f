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

  record(pipeline: number, buffers: number[], groups: Groups, push?: ArrayBufferView): Ticket {
    const ticket = this.current();
    this.rt.recordDispatch(pipeline, buffers, groups, push);
    this.recorded++;
    this.stats.dispatches++;
    if (this.recorded >= this.threshold) this.submit();
    return ticket;
  }

  submit(): void {
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

  /** Submits and waits for everything recorded so far. */
  drain(): void {
    this.submit();
    this.wait(this.last);
  }
}
