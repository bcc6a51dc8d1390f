// The native addon seen as a MatmulRuntime. compileKernel comes from the kernel-IR exports; an
// addon built without them but with kernelSpirv + createPipeline is bridged here, and one with
// neither fails with a message saying what is missing instead of a TypeError mid-run.
import type { KernelDesc } from "../ts/ir/index.js";
import type { MatmulRuntime } from "../ts/kernels/matmul/device.js";

type Loose = Record<string, unknown>;

export async function nativeMatmulRuntime(): Promise<MatmulRuntime> {
  const { native } = await import("../ts/native.js");
  return adaptRuntime(native as unknown as Loose);
}

export function adaptRuntime(n: Loose): MatmulRuntime {
  const need = ["initDevice", "getDeviceInfo", "createBuffer", "uploadBuffer", "readBuffer", "destroyBuffer", "beginBatch", "recordDispatch", "submitBatch", "waitTimeline", "batchProfile"];
  const missing = need.filter((f) => typeof n[f] !== "function");
  if (missing.length) throw new Error(`@alpha/helios native addon lacks ${missing.join(", ")}: rebuild it (npm run build:native)`);
  if (typeof n.compileKernel === "function") return n as unknown as MatmulRuntime;
  if (typeof n.kernelSpirv === "function" && typeof n.createPipeline === "function") {
    const kernelSpirv = n.kernelSpirv as (d: string) => Uint32Array;
    const createPipeline = n.createPipeline as (w: Uint32Array, l: object) => number;
    const memo = new Map<string, number>();
    return {
      ...n,
      compileKernel(desc: string | KernelDesc): number {
        const json = typeof desc === "string" ? desc : JSON.stringify(desc);
        let h = memo.get(json);
        if (h === undefined) {
          const d = JSON.parse(json) as KernelDesc;
          const pushBytes = (d.push ?? []).reduce((b, f) => b + 4 * (f.type.includes("x") ? Number(f.type.slice(-1)) : 1), 0);
          h = createPipeline(kernelSpirv(json), { bindings: d.bindings.map((b) => b.access), pushConstantBytes: pushBytes, label: d.name });
          memo.set(json, h);
        }
        return h;
      },
    } as unknown as MatmulRuntime;
  }
  throw new Error("@alpha/helios native addon lacks compileKernel (kernel IR exports): rebuild it from a tree with the ir branch merged");
}
