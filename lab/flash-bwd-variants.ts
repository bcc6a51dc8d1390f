// Lab dK/dV kernels of the tensor-core flash attention backward (issue 27): the shipped
// flash_bwd_dkdv_cm ("current") and the candidates of lab/flash-bwd-kv.ts that
// bench/flash-bwd.ts --variants races against it. Nothing under ts/ imports this module; the
// backend runs "current". Once the race is decided, the winner is promoted (ts/ops/attention.ts)
// and the rest deleted, their evidence kept in bench/FLASH_NOTES.md and bench/RESULTS.md.
import type { KernelDesc } from "../ts/ir/index.js";
import { FLASH_BWD_CM_ROWS, flashBwdCmApplies, flashBwdDkDvCmKernel, type FlashBwdCmVariant } from "../ts/kernels/attention-cm-bwd.js";
import {
  flashBwdDkDvApplies, flashBwdDkDvCmSlKernel, flashBwdDkDvRows, type FlashBwdDkDvShape,
} from "./flash-bwd-kv.js";

export interface DkDvCandidate {
  readonly name: string;
  /** null: the shipped kernel. */
  readonly shape: FlashBwdDkDvShape | null;
  /** What it changes against the one before it in the list. */
  readonly what: string;
}

export const DKDV_CURRENT = "current";

/** Each candidate adds one change to the one before it, so the race says what each is worth. */
export const DKDV_CANDIDATES: readonly DkDvCandidate[] = [
  { name: DKDV_CURRENT, shape: null, what: "shipped flash_bwd_dkdv_cm (64 keys, one stage + register prefetch, per-fragment branches)" },
  { name: "sl", shape: { nsg: 4, stages: 1, rowv: "tiles", pairs: false }, what: "straight-line tiles past the diagonal (no mask or P/dS-path branches)" },
  { name: "sl-s2", shape: { nsg: 4, stages: 2, rowv: "stride0", pairs: false }, what: "+ two stages, one barrier per tile, lse/Di read with stride-0 loads" },
  { name: "sl-s2-p2", shape: { nsg: 4, stages: 2, rowv: "stride0", pairs: true }, what: "+ S/dP of two query fragments issued together" },
  { name: "sl-s2-w8", shape: { nsg: 8, stages: 2, rowv: "stride0", pairs: false }, what: "sl-s2 with 8 subgroups: 128 keys per workgroup share each Q/dO tile" },
];

export function dkdvCandidate(name: string): DkDvCandidate {
  const c = DKDV_CANDIDATES.find((x) => x.name === name);
  if (!c) throw new Error(`unknown dK/dV variant ${name} (${DKDV_CANDIDATES.map((x) => x.name).join(", ")})`);
  return c;
}

/** The candidate's kernel for the problem options `v` (f16: `split` is not served by the candidates). */
export function dkdvKernel(c: DkDvCandidate, v: FlashBwdCmVariant): KernelDesc {
  return c.shape ? flashBwdDkDvCmSlKernel({ ...v, shape: c.shape }) : flashBwdDkDvCmKernel(v);
}

/** Keys per workgroup: the dispatch is [T / rows, BH, 1]. */
export function dkdvRows(c: DkDvCandidate): number {
  return c.shape ? flashBwdDkDvRows(c.shape) : FLASH_BWD_CM_ROWS;
}

export function dkdvApplies(
  c: DkDvCandidate, dev: { coopMatSupported?: boolean; subgroupSize: number; maxSharedMemoryBytes?: number }, D: number, T: number,
): boolean {
  return c.shape ? flashBwdDkDvApplies(dev, { D, shape: c.shape }, "f16", T) : flashBwdCmApplies(dev, {}, "f16", T, D, false);
}
