// The shipped flash attention forward kernels, by HELIOS_FLASH_VARIANT name: what each serves, how
// it is dispatched, and the order `auto` tries them in. ts/ops/attention.ts and bench/flash.ts use this
// table, so the timed kernels are the ones the backend runs.
import type { KernelDesc } from "../ir/index.js";
import type { FlashVariantName } from "../config.js";
import type { Dtype } from "../types.js";
import {
  FLASH_CM_SL_ROWS, flashCmAccApplies, flashCmAccRows, flashCmSlApplies, flashFwdCmAccKernel, flashFwdCmSlKernel, type FlashCmAccVariant,
} from "./attention-cm-acc.js";
import { FA_ROWS, flashFwdKernel, flashFwdVec4Kernel, type HeadLayout } from "./attention.js";

export interface FlashDevice {
  coopMatSupported?: boolean;
  subgroupSize: number;
  maxSharedMemoryBytes?: number;
}

export type FlashKernelName = Exclude<FlashVariantName, "auto">;

export interface FlashFwdChoice {
  readonly name: FlashKernelName;
  /** Query rows per workgroup: dispatch [ceil(T / rows), BH, 1]. */
  readonly rows: number;
  applies(dev: FlashDevice, dtype: string, T: number, D: number): boolean;
  /** The kernel for tensors in `layout` (attention.ts HeadLayout; every kernel has both). */
  build(dtype: Dtype, D: number, softCap: boolean, layout?: HeadLayout): KernelDesc;
}

/** A split (x3) kernel: f32 tensors. */
function x3(name: FlashKernelName, w: Omit<FlashCmAccVariant, "D" | "softCap" | "split">): FlashFwdChoice {
  const s = { ...w, split: true };
  return {
    name,
    rows: flashCmAccRows(s),
    applies: (dev, dtype, T, D) => flashCmAccApplies(dev, { ...s, D }, dtype, T),
    build: (_dtype, D, softCap, layout) => flashFwdCmAccKernel({ ...s, D, softCap, layout }),
  };
}

/**
 * The shipped kernels: those `auto` picks. The tensor-core kernels keep O in accumulator fragments
 * and rescale lazily (attention-cm-acc.ts): one K/V stage, 128-bit copies, masked diagonal
 * fragments skipped, longest query blocks first across heads (the `-x` of the x3 names). f16 runs
 * straight-line tiles before each block's diagonal (`-sl`): H200 session 21 (BH=192, T=1024,
 * D=64, causal f16) 0.165 ms, PyTorch sdpa 0.088; the per-tile kernel it replaced (acc-w4s1-x)
 * 0.188. f32 (x3, H100 session 7, BH=192, q/k/v splits included): x3-w8s1-k32x 0.430 ms,
 * x3-w4s1-k32x 0.492; the SIMT kernel 1.488. The kernels they beat (two stages, 8 subgroups for
 * f16, two row blocks per subgroup, 64-bit copies, P through shared memory, the first coopmat
 * kernel `cm`) are in bench/FLASH_NOTES.md and git history.
 */
export const FLASH_FWD: Record<FlashKernelName, FlashFwdChoice> = {
  "acc-w4s1-sl": {
    name: "acc-w4s1-sl",
    rows: FLASH_CM_SL_ROWS,
    applies: flashCmSlApplies,
    build: (_dtype, D, softCap, layout) => flashFwdCmSlKernel({ D, softCap, layout }),
  },
  // f32 tensors at f32 accuracy (x3): q, k, v split into bf16 hi/lo operands, three products each;
  // K/V hi and lo tiles, so 32-key tiles; 8 subgroups (128 query rows) where T allows
  "x3-w8s1-k32x": x3("x3-w8s1-k32x", { nsg: 8, bc: 32 }),
  "x3-w4s1-k32x": x3("x3-w4s1-k32x", { nsg: 4, bc: 32 }),
  simt: {
    name: "simt",
    rows: FA_ROWS,
    applies: () => true,
    build: (dtype, D, softCap, layout) => (D % 4 === 0 ? flashFwdVec4Kernel : flashFwdKernel)({ dtype, D, softCap, layout }),
  },
};

/** What `auto` tries, in order; the last one serves every problem. */
export const FLASH_AUTO: readonly FlashKernelName[] = ["acc-w4s1-sl", "x3-w8s1-k32x", "x3-w4s1-k32x", "simt"];

/** Whether the kernel reads split bf16 hi/lo operands (ts/ops/attention.ts splits q, k, v first). */
export function flashReadsSplit(name: FlashKernelName): boolean {
  return name.startsWith("x3-");
}

/** The requested kernel if it serves the problem, else the first of FLASH_AUTO that does. */
export function pickFlashFwd(name: FlashVariantName, dev: FlashDevice, dtype: string, T: number, D: number): FlashFwdChoice {
  const order = name === "auto" ? FLASH_AUTO : [name, ...FLASH_AUTO];
  for (const n of order) if (FLASH_FWD[n].applies(dev, dtype, T, D)) return FLASH_FWD[n];
  return FLASH_FWD.simt;
}
