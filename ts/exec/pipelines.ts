// Driver pipelines compiled in parallel, only those the queued work needs (issue 26). An op that
// meets a new kernel gets its description validated and assembled at once (so an invalid kernel
// still fails at the op), but the driver's pipeline compile — tens of ms to a second on a GPU — is
// deferred: the op records its dispatch with a provisional handle, and before queued dispatches
// reach the runtime the scheduler compiles every pending pipeline in one compileKernels call (on
// the host's cores) and patches the handles in (ts/exec/scheduler.ts, which also holds releases
// back behind such dispatches so that the groups are large). A cold training step thus compiles
// the kernels it meets together instead of one after another.
import type { Runtime } from "./runtime.js";
import { startup } from "../startup/index.js";

/**
 * Provisional handles lie in [2^50, 2^51): the native runtime's handles carry a nonzero kind in
 * bits 51-52 (src/runtime/handles.rs), so one that leaked to it would be refused, never aliased;
 * the mock runtime counts from 1. Never reused (one counter per process), so a provisional
 * handle from before destroyDevice() can never name a later kernel.
 */
const BASE = 2 ** 50;
const LIMIT = 2 ** 51;
let next = BASE;

export function isProvisional(h: number): boolean {
  return h >= BASE && h < LIMIT;
}

interface Entry {
  name: string;
  /** The description; dropped once the pipeline exists (a coopmat one is ~200 KB of JSON). */
  json: string;
  handle: number | null;
  error: Error | null;
}

/** Pending pipelines of one scheduler (one per runtime object): what is deferred, and what it became. */
export class PendingPipelines {
  private readonly entries = new Map<number, Entry>();
  private readonly byJson = new Map<string, number>();
  private unresolved: number[] = [];
  /** compileKernels threads (HELIOS_COMPILE_THREADS); 0: the addon's default (the host's cores, at most 16). */
  threads = 0;

  constructor(private readonly rt: Runtime) {}

  /** Whether `rt` can compile many pipelines in one call and assemble without building one. */
  static supported(rt: Runtime): boolean {
    return typeof rt.compileKernels === "function" && typeof rt.kernelSpirv === "function";
  }

  /** A provisional handle for `json` (an assembled description); equal descriptions share one. */
  defer(json: string, name: string): number {
    const hit = this.byJson.get(json);
    if (hit !== undefined) return hit;
    const id = next++;
    this.entries.set(id, { name, json, handle: null, error: null });
    this.byJson.set(json, id);
    this.unresolved.push(id);
    return id;
  }

  /** Whether `id` is a provisional handle of this scheduler's current device. */
  knows(id: number): boolean {
    return this.entries.has(id);
  }

  /** What a provisional handle stands for now: the pipeline once compiled, itself while pending, null if failed or unknown. */
  current(id: number): number | null {
    const e = this.entries.get(id);
    if (!e || e.error) return null;
    return e.handle ?? id;
  }

  /** Why `id` failed to compile (null if it did not). */
  failure(id: number): Error | null {
    return this.entries.get(id)?.error ?? null;
  }

  /**
   * Compiles every pending pipeline in one compileKernels call. If that call fails, each is
   * compiled alone (the ones already built are memoized, so they cost a lookup) to learn which
   * failed; those stay failed (current() is null, failure() says why).
   */
  resolve(): void {
    const ids = this.unresolved;
    if (ids.length === 0) return;
    this.unresolved = [];
    const list = ids.map((id) => this.entries.get(id) as Entry);
    for (const e of list) this.byJson.delete(e.json);
    const { progress, trace } = startup();
    const t0 = performance.now();
    let handles: number[] | null = null;
    try {
      const many = this.rt.compileKernels as NonNullable<Runtime["compileKernels"]>;
      handles = many.call(this.rt, list.map((e) => e.json), this.threads || undefined);
    } catch {
      // one or more failed: below, each alone
    }
    list.forEach((e, i) => {
      if (handles) e.handle = handles[i];
      else {
        try {
          e.handle = this.rt.compileKernel(e.json);
        } catch (err) {
          e.error = compileError(e.name, err);
        }
      }
      e.json = "";
    });
    const ms = performance.now() - t0;
    trace?.add("pipeline", `${list.length} in parallel: ${list.map((e) => e.name).join(", ")}`, trace.now() - ms, ms);
    // one unit per kernel, all ending now; the first carries the call's time (the activity's start)
    list.forEach((e, i) => progress?.unit("compiling pipelines", e.name, i === 0 ? ms : 0));
  }

  /** Forgets everything: the device these pipelines were for was destroyed. */
  reset(): void {
    this.entries.clear();
    this.byJson.clear();
    this.unresolved = [];
  }
}

/** The runtime's error for one kernel, its code kept and the kernel named. */
function compileError(name: string, err: unknown): Error {
  const e = err as Error & { code?: string };
  const msg = `helios: kernel ${name}: the driver pipeline could not be built (${e?.message ?? String(err)}); the dispatches that use it were dropped`;
  return Object.assign(new Error(msg), { code: e?.code ?? "ERR_HELIOS_INTERNAL", kernel: name });
}
