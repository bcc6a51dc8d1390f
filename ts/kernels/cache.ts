// Compiled pipelines keyed by a typed variant struct (serialized once to a string key).
// Building and compiling happen on first use; the native side also memoizes by content.
import type { KernelDesc } from "../ir/index.js";
import type { Runtime } from "../exec/runtime.js";

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
    const pipeline = this.rt.compileKernel(JSON.stringify(desc));
    this.compiles++;
    this.pipelines.set(k, pipeline);
    return pipeline;
  }

  clear(): void {
    this.pipelines.clear();
  }
}
