// Compiled pipelines keyed by a typed variant struct (serialized once to a string key).
// Building happens on first use, and so does assembly: the description is validated and turned
// into SPIR-V at once (kernelSpirv memoizes the module), so an invalid kernel fails at the op
// that needs it. The driver's pipeline compile is deferred where the runtime can compile many
// at once: the op gets a provisional handle, and the scheduler compiles every pending pipeline
// in one parallel call before queued dispatches reach the runtime (ts/exec/pipelines.ts). With
// HELIOS_COMPILE_THREADS=1, or on a runtime without compileKernels, each compiles at once here.
// Startup reporting: assembly is the trace's "spirv" phase either way; an immediate compile is a
// "pipeline" interval and a progress unit of its own (a deferred one reports where it runs).
import type { KernelDesc } from "../ir/index.js";
import type { Runtime } from "../exec/runtime.js";
import { type PendingPipelines, isProvisional } from "../exec/pipelines.js";
import { startup } from "../startup/index.js";

export class KernelCache {
  private readonly pipelines = new Map<string, number>();
  /** Kernels this cache asked the driver to compile (at once or deferred), each counted once. */
  compiles = 0;
  hits = 0;

  /** `pending`: where new kernels' pipeline compiles are deferred to (null: compiled at once). */
  constructor(
    private readonly rt: Runtime,
    private readonly pending: PendingPipelines | null = null,
  ) {}

  get(key: object, build: () => KernelDesc): number {
    const k = JSON.stringify(key);
    const hit = this.pipelines.get(k);
    if (hit !== undefined) {
      const h = this.pending && isProvisional(hit) ? this.pending.current(hit) : hit;
      if (h !== null) {
        if (h !== hit) this.pipelines.set(k, h);
        this.hits++;
        return h;
      }
      // its deferred compile failed (reported where its dispatches were to be recorded): again
    }
    const desc = build();
    const pipeline = this.pending ? this.defer(desc, this.pending) : this.compile(desc);
    this.compiles++;
    this.pipelines.set(k, pipeline);
    return pipeline;
  }

  private defer(desc: KernelDesc, pending: PendingPipelines): number {
    const { trace } = startup();
    const json = JSON.stringify(desc);
    const assemble = () => (this.rt.kernelSpirv as NonNullable<Runtime["kernelSpirv"]>).call(this.rt, json);
    if (trace) trace.time("spirv", desc.name, assemble);
    else assemble();
    return pending.defer(json, desc.name);
  }

  private compile(desc: KernelDesc): number {
    const { progress, trace } = startup();
    const json = JSON.stringify(desc);
    const t0 = performance.now();
    const assemble = this.rt.kernelSpirv;
    if (trace && typeof assemble === "function") trace.time("spirv", desc.name, () => assemble.call(this.rt, json));
    const t1 = performance.now();
    const pipeline = this.rt.compileKernel(json);
    const t2 = performance.now();
    trace?.add("pipeline", desc.name, trace.now() - (t2 - t1), t2 - t1);
    progress?.unit("compiling pipelines", desc.name, t2 - t0);
    return pipeline;
  }

  clear(): void {
    this.pipelines.clear();
  }
}
