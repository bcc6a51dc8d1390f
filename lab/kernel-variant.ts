// One entry of the kernel registry (lab/registry.ts): a variant with a stable, human-readable id,
// the device features it needs (so a sweep skips what the device lacks; spirv-val checks them all)
// and how to build its description.
import type { KernelDesc } from "../ts/ir/index.js";

export type KernelNeed = "f16" | "bf16" | "coopmat" | "coopmat2" | "subgroup" | "atomicFloat";

export interface KernelVariant {
  id: string;
  needs: KernelNeed[];
  build: () => KernelDesc;
}
