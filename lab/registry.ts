// Every kernel variant Helios can generate, for the spirv-val sweep (__test__/spirv-val.test.ts),
// the driver-statistics and dump benchmarks (bench/kernel-stats.ts, bench/matmul-dump.ts): the IR
// samples, the backend's families, the matmul planner's variants and the upstream kernels.
import { irSamples } from "./ir-samples.js";
import { matmulKernelVariants } from "./registry-matmul.js";
import { backendVariants } from "./registry-backend.js";
import { upstreamKernel, upstreamKernelNames, upstreamKey } from "../ts/kernels/upstream.js";
import type { KernelVariant } from "./kernel-variant.js";

export type { KernelNeed, KernelVariant } from "./kernel-variant.js";

export function allKernelVariants(): KernelVariant[] {
  return [...irSamples(), ...backendVariants(), ...matmulKernelVariants(), ...upstreamKernelVariants()];
}

/** Every upstream kernel (ts/kernels/upstream.ts) at the default and a small workgroup. */
function upstreamKernelVariants(): KernelVariant[] {
  return upstreamKernelNames().flatMap((name) => {
    const key = upstreamKey(name);
    if (!key) throw new Error(`upstream kernel ${name} has no key`);
    return [256, 64].map((wg) => ({ id: `upstream/${name}/wg${wg}`, needs: [], build: () => upstreamKernel(key, wg) }));
  });
}
