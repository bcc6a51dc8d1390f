// Every kernel variant Helios can generate, for the spirv-val sweep (__test__/spirv-val.test.ts)
// and the compile benchmark. Kernel files add their variants here: one entry per variant, with a
// stable, human-readable id. `needs` says which device features the variant requires, so tests
// can skip what the current device lacks (spirv-val checks them all).
import type { KernelDesc } from "../ir/index.js";
import { irSamples } from "./ir-samples.js";
import { matmulKernelVariants } from "./matmul/registry.js";
import { backendVariants } from "./variants.js";
import { upstreamKernelVariants } from "./upstream.js";

export type KernelNeed = "f16" | "bf16" | "coopmat" | "coopmat2" | "subgroup" | "atomicFloat";

export interface KernelVariant {
  id: string;
  needs: KernelNeed[];
  build: () => KernelDesc;
}

export function allKernelVariants(): KernelVariant[] {
  return [...irSamples(), ...backendVariants(), ...matmulKernelVariants(), ...upstreamKernelVariants()];
}
