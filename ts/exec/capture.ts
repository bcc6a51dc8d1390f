// Captured batches on the backend side (the CUDA-Graphs analogue). beginCapture opens one batch
// that is never cut by the size threshold; endCapture hands it to the runtime, which keeps it and
// pins every buffer it references until destroyCapture; replay resubmits it. What a capture may
// not contain: a host read of its own results (the values exist only at replay), a flush, an
// upload (it would be replayed with the same bytes), or an out-of-place update of a tensor made
// before the capture (the replay would read the old buffer). Each is refused with code
// ERR_HELIOS_CAPTURE and the capture stays open, so the caller can abortCapture.
import type { Engine } from "../engine.js";
import type { HeliosTensor } from "../tensor.js";
import type { Lease } from "./lease.js";
import { type Ticket, captureError } from "./scheduler.js";

export class CapturedBatch {
  private alive = true;

  constructor(
    private readonly E: Engine,
    private readonly graph: number,
    private readonly ticket: Ticket,
    /** Tensors written by the capture: their host copies are stale after each replay. */
    private readonly outputs: WeakRef<HeliosTensor>[],
    /** Buffers the capture writes: each replay is a write to them (prepacked copies go stale). */
    private readonly written: Set<Lease>,
  ) {}

  get destroyed(): boolean {
    return !this.alive;
  }

  /** Resubmits the captured work after everything recorded before it. */
  replay(): void {
    if (!this.alive) throw captureError("replay", "the capture was destroyed");
    this.E.sched.replay(this.graph, this.ticket);
    for (const r of this.outputs) {
      const t = r.deref();
      if (t) t.host = null;
    }
    for (const l of this.written) l.writes++;
  }

  /** Frees the captured batch once its last replay completes; the runtime unpins its buffers. */
  destroy(): void {
    if (!this.alive) return;
    this.alive = false;
    this.E.sched.destroyCapture(this.graph);
  }
}

export function beginCapture(E: Engine): void {
  if (E.capture) throw captureError("beginCapture", "a capture is already open (endCapture or abortCapture it first)");
  E.sched.beginCapture();
  // The serial of the next lease: anything older was made before the capture.
  E.capture = { outputs: [], written: new Set(), firstSerial: E.pool.leases + 1 };
}

export function endCapture(E: Engine): CapturedBatch {
  const c = E.capture;
  if (!c) throw captureError("endCapture", "no capture is open (beginCapture first)");
  const ticket = E.sched.current();
  let graph: number;
  try {
    graph = E.sched.endCapture();
  } finally {
    E.capture = null;
  }
  return new CapturedBatch(E, graph, ticket, c.outputs, c.written);
}

/** Drops an open capture (after a refused op): nothing recorded in it runs. No-op when none is open. */
export function abortCapture(E: Engine): void {
  if (!E.capture) return;
  E.capture = null;
  E.sched.abortCapture();
}
