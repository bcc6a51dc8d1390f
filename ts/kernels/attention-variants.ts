// The flash attention forward kernels, by HELIOS_FLASH_VARIANT name: what each serves, how it is
// dispatched, and the order `auto` tries them in. ts/ops/attention.ts and bench/flash.ts use this
// table, so the timed kernels are the ones the backend runs.
import type { KernelDesc } from "../ir/index.js";
import type { FlashVariantName } from "../config.js";
import type { Dtype } from "../types.js";
import { FA_CM_ROWS, flashCmApplies, flashFwdCmKernel } from "./attention-cm.js";
import { flashCmAccApplies, flashCmAccRows, flashFwdCmAccKernel, type FlashCmAccVariant } from "./attention-cm-acc.js";
import { FA_ROWS, flashFwdKernel, flashFwdVec4Kernel } from "./attention.js";

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
  build(dtype: Dtype, D: number, softCap: boolean): KernelDesc;
}

function acc(name: FlashKernelName, w: Omit<FlashCmAccVariant, "D" | "softCap">): FlashFwdChoice {
  return {
    name,
    rows: flashCmAccRows(w),
    applies: (dev, dtype, T, D) => flashCmAccApplies(dev, { ...w, D }, dtype, T),
    build: (_dtype, D, softCap) => flashFwdCmAccKernel({ ...w, D, softCap }),
  };
}

const X = { v128: true, skipMasked: true, lpt: true } as const;
/** f32 at f32 accuracy: bf16 hi/lo operands, three products each (attention-cm-acc.ts `split`). */
const X3 = { ...X, split: true } as const;

export const FLASH_FWD: Record<FlashKernelName, FlashFwdChoice> = {
  "acc-w4s2": acc("acc-w4s2", { nsg: 4, stages: 2 }),
  "acc-w4s1": acc("acc-w4s1", { nsg: 4, stages: 1 }),
  "acc-w8s1": acc("acc-w8s1", { nsg: 8, stages: 1 }),
  "acc-w8s2": acc("acc-w8s2", { nsg: 8, stages: 2 }),
  "acc-w4s2-r2": acc("acc-w4s2-r2", { nsg: 4, stages: 2, rb: 2 }),
  "acc-w4s2-k32": acc("acc-w4s2-k32", { nsg: 4, stages: 2, bc: 32 }),
  "acc-w4s2-r2k32": acc("acc-w4s2-r2k32", { nsg: 4, stages: 2, rb: 2, bc: 32 }),
  "acc-w8s2-k32": acc("acc-w8s2-k32", { nsg: 8, stages: 2, bc: 32 }),
  "acc-w4s1-k32": acc("acc-w4s1-k32", { nsg: 4, stages: 1, bc: 32 }),
  "acc-w4s1-r2k32": acc("acc-w4s1-r2k32", { nsg: 4, stages: 1, rb: 2, bc: 32 }),
  "acc-w8s1-k32": acc("acc-w8s1-k32", { nsg: 8, stages: 1, bc: 32 }),
  "acc-w4s2-psh": acc("acc-w4s2-psh", { nsg: 4, stages: 2, pShared: true }),
  // -x: 128-bit K/V copies, masked diagonal fragments skipped, longest blocks first across heads
  "acc-w4s1-v128": acc("acc-w4s1-v128", { nsg: 4, stages: 1, v128: true }),
  "acc-w4s1-skip": acc("acc-w4s1-skip", { nsg: 4, stages: 1, skipMasked: true }),
  "acc-w4s1-lpt": acc("acc-w4s1-lpt", { nsg: 4, stages: 1, lpt: true }),
  "acc-w4s1-x": acc("acc-w4s1-x", { nsg: 4, stages: 1, ...X }),
  "acc-w8s1-x": acc("acc-w8s1-x", { nsg: 8, stages: 1, ...X }),
  "acc-w4s1-r2x": acc("acc-w4s1-r2x", { nsg: 4, stages: 1, rb: 2, ...X }),
  "acc-w4s1-r2k32x": acc("acc-w4s1-r2k32x", { nsg: 4, stages: 1, rb: 2, bc: 32, ...X }),
  // f32 tensors (x3): K/V hi and lo tiles, so 64-key tiles fit one stage only
  "x3-w4s1-x": acc("x3-w4s1-x", { nsg: 4, stages: 1, ...X3 }),
  "x3-w4s1-k32x": acc("x3-w4s1-k32x", { nsg: 4, stages: 1, bc: 32, ...X3 }),
  "x3-w4s2-k32x": acc("x3-w4s2-k32x", { nsg: 4, stages: 2, bc: 32, ...X3 }),
  "x3-w8s1-k32x": acc("x3-w8s1-k32x", { nsg: 8, stages: 1, bc: 32, ...X3 }),
  cm: {
    name: "cm",
    rows: FA_CM_ROWS,
    applies: (dev, dtype, T, D) => flashCmApplies(dev, dtype, T, D),
    build: (_dtype, D, softCap) => flashFwdCmKernel({ D, softCap }),
  },
  simt: {
    name: "simt",
    rows: FA_ROWS,
    applies: () => true,
    build: (dtype, D, softCap) => (D % 4 === 0 ? flashFwdVec4Kernel : flashFwdKernel)({ dtype, D, softCap }),
  },
};

/**
 * What `auto` tries, in order; the last one serves every problem. H100 session 3 (BH=96, T=1024,
 * D=64, causal f16, warm clocks): acc-w4s1-x 0.0905 ms, acc-w4s1-r2k32x 0.0906, acc-w4s1-lpt
 * 0.0949, acc-w8s1-x 0.0978, acc-w4s1-v128 0.1008, acc-w4s1 0.1100 (PyTorch sdpa 0.0483). f32
 * (x3, H100 session 7, BH=192, q/k/v splits included): x3-w8s1-k32x 0.430 ms, x3-w4s1-k32x 0.492,
 * x3-w4s1-x 0.642 (255 registers), x3-w4s2-k32x 0.735; the SIMT kernel 1.488.
 */
export const FLASH_AUTO: readonly FlashKernelName[] = ["acc-w4s1-x", "x3-w8s1-k32x", "x3-w4s1-k32x", "cm", "simt"];

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
