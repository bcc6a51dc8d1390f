// Compiled pipelines keyed by a typed variant struct (serialized once to a string key).
// Building and compiling happen on first use; the native side also memoizes by content.
// Each compile is a unit of startup progress; under the startup trace, the SPIR-V assembly is
// timed on its own first (kernelSpirv memoizes the module, so compileKernel then only builds the
// driver pipeline: the two phases split without doing the work twice).
import type { KernelDesc } from "../ir/index.js";
import type { Runtime } from "../exec/runtime.js";
import { startup } from "../startup/index.js";

export class KernelCache {
  private readonly pipelines = new Map<string, number>();
  compiles = 0;
  hits = 0;

  constructor(private readonly rt: Runtime) {}

  get(key: object, build: () => KernelDesc): number {
    const k = JSON.stringify(key);
    const hit = this.pipelines.get(k);
    if (hit !== undefined) {
      this.hits++;
      return hit;
    }
    const desc = build();
    const pipeline = this.compile(desc);
    this.compiles++;
    this.pipelines.set(k, pipeline);
    return pipeline;
  }

  private compile(desc: KernelDesc): number {
    const { progress, trace } = startup();
    const json = JSON.stringify(desc);
    const t0 = performance.now();
    const assemble = (this.rt as unknown as { kernelSpirv?: (d: string) => unknown }).kernelSpirv;
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
