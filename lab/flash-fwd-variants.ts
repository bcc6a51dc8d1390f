// Lab forward kernels of the tensor-core flash attention (issue 27: forward >= 0.7x PyTorch sdpa):
// the shipped flash_fwd_cmacc ("current", acc-w4s1-x) and the candidates that
// bench/flash.js --fwd-variants (bench/flash-fwd-race.ts) races against it. Nothing under ts/
// imports this module; the backend runs "current". Once the race is decided, the winner is
// promoted (ts/kernels/attention-variants.ts) and the rest deleted, their evidence kept in
// bench/FLASH_NOTES.md.
//
// Contract: flash_fwd's (bindings q, k, v, o, lse; push FA_PUSH, or FA_ROWS_PUSH in the rows
// layout), f16 tensors, D % 16 == 0 up to 64, T % (16 nsg) == 0, 32-wide subgroups; dispatch
// [T / (16 nsg), BH], 32 nsg threads, longest query blocks first across heads (as shipped).
// Every candidate runs the shipped kernel's products, softmax and order per query row (tiles in
// ascending key order, the diagonal tile last), so O and lse are expected to match the shipped
// kernel's bit for bit.
//
// Straight-line tiles (every candidate): the tiles wholly before the workgroup's first query row
// (q0 / 64 of them) run in a loop with no branch but the lazy softmax's rescale test (no "does the
// subgroup see this tile" and "is it its diagonal" tests, no mask test, the P path chosen once
// outside the loop, the next tile's loads unguarded: it always exists); then the 16 nsg / 64 tiles
// holding the block's diagonal run the shipped per-subgroup body (skipped, masked or whole).
// - sl: 4 subgroups (64 query rows), one K/V stage with a register prefetch (two barriers per tile).
// - w8: 8 subgroups (128 query rows) share each staged K/V tile (global loads, shared stores and
//   barriers per product halve, and so do the prefetch registers per thread); two stages: the tile
//   loaded into registers at the top of iteration t is stored into the other stage between t's P
//   and P V, and one barrier ends each tile (48 KiB of shared memory at D = 64).
// - w8-s1: w8 with one stage (30 KiB at D = 64), to price the second stage on its own.
import { lit, type Expr, type KernelDesc } from "../ts/ir/index.js";
import { layoutTag } from "../ts/kernels/attention.js";
import { CM } from "../ts/kernels/attention-cm-parts.js";
import {
  declare, finish, flashCmAccApplies, flashCmAccRows, flashCmAccSharedBytes, flashFwdCmAccKernel, kvStaging, tileMath,
  type FlashCmAccVariant,
} from "../ts/kernels/attention-cm-acc.js";
import type { FlashDevice } from "../ts/kernels/attention-variants.js";

export interface FwdShape {
  /** Subgroups of 16 query rows. */
  readonly nsg: 4 | 8;
  /** Shared K/V stages. */
  readonly stages: 1 | 2;
}

export interface FwdCandidate {
  readonly name: string;
  /** null: the shipped kernel (acc-w4s1-x). */
  readonly shape: FwdShape | null;
  /** What it changes against the shipped kernel. */
  readonly what: string;
}

export const FWD_CURRENT = "current";

export const FWD_CANDIDATES: readonly FwdCandidate[] = [
  { name: FWD_CURRENT, shape: null, what: "shipped flash_fwd_cmacc acc-w4s1-x (64 rows, one stage + register prefetch, per-tile branches)" },
  { name: "sl", shape: { nsg: 4, stages: 1 }, what: "straight-line tiles before the block's diagonal (no subgroup/diagonal/mask tests, P path hoisted)" },
  { name: "w8", shape: { nsg: 8, stages: 2 }, what: "sl with 8 subgroups (128 rows share each K/V tile), two stages, one barrier per tile" },
  { name: "w8-s1", shape: { nsg: 8, stages: 1 }, what: "w8 with one K/V stage + register prefetch (two barriers per tile)" },
];

export function fwdCandidate(name: string): FwdCandidate {
  const c = FWD_CANDIDATES.find((x) => x.name === name);
  if (!c) throw new Error(`unknown forward variant ${name} (${FWD_CANDIDATES.map((x) => x.name).join(", ")})`);
  return c;
}

/** The problem options a candidate is built for (f16: the candidates do not serve the split form). */
export type FwdOptions = Pick<FlashCmAccVariant, "D" | "softCap" | "pShared" | "layout">;

/** The candidate's kernel. */
export function fwdKernel(c: FwdCandidate, o: FwdOptions): KernelDesc {
  return c.shape ? flashFwdSlKernel(c.shape, o) : flashFwdCmAccKernel({ ...o, nsg: 4 });
}

/** Query rows per workgroup: the dispatch is [T / rows, BH, 1]. */
export function fwdRows(c: FwdCandidate): number {
  return flashCmAccRows({ nsg: c.shape?.nsg ?? 4 });
}

/** Shared bytes: the shipped kernel's with `stages` K/V stages. */
export function fwdSharedBytes(c: FwdCandidate, D: number): number {
  const nsg = c.shape?.nsg ?? 4, stages = c.shape?.stages ?? 1;
  const kvStage = 2 * 64 * (D + 8) * 2; // K and V: 64 keys of D halves, rows padded by 8
  return flashCmAccSharedBytes({ D, nsg }) + (stages - 1) * kvStage;
}

/** Whether the candidate serves the f16 problem on this device: the shipped kernel's rule at its rows, with its own shared bytes. */
export function fwdApplies(c: FwdCandidate, dev: FlashDevice, dtype: string, T: number, D: number): boolean {
  const nsg = c.shape?.nsg ?? 4;
  // (the shipped rule's shared-memory figure is one stage's: the candidate's is checked below)
  return flashCmAccApplies({ ...dev, maxSharedMemoryBytes: Infinity }, { D, nsg }, dtype, T) &&
    (dev.maxSharedMemoryBytes ?? 49152) >= fwdSharedBytes(c, D);
}

export function fwdSlName(s: FwdShape, o: FwdOptions): string {
  return `flash_fwd_cmacc_f16_d${o.D}_w${s.nsg}_s${s.stages}_sl${o.pShared ? "_psh" : ""}${o.softCap ? "_cap" : ""}${layoutTag(o.layout)}`;
}

/** A straight-line candidate (the header): 64-key tiles, one row block per subgroup. */
export function flashFwdSlKernel(s: FwdShape, o: FwdOptions): KernelDesc {
  const x = declare({ ...o, nsg: s.nsg }, { name: fwdSlName(s, o), stages: s.stages });
  const { k, BC, ROWS, TILE, rf } = x;
  const { fetch, put } = kvStaging(x);
  const u0 = lit("u32", 0);
  const two = s.stages === 2;
  const slotOf = (t: Expr) => (two ? k.let(t.band(1), "slot") : u0);
  // tiles up to the block's last row, and those wholly before its first row (every subgroup sees all their keys)
  const nt = k.let(x.q0.add(ROWS).div(BC), "nt");
  const nfull = k.let(x.q0.div(BC), "nfull");
  // Tile t is in registers at the top of iteration t (one stage: stored there; two: stored by t - 1).
  fetch(u0);
  if (two) {
    put(u0);
    k.barrier();
  }
  const top = () => {
    if (two) return;
    put(u0);
    k.barrier();
  };
  const straight = (regs: boolean) => {
    k.for(u0, nfull, (t) => {
      top();
      const slot = slotOf(t);
      fetch(t.add(1).mul(BC)); // t + 1 <= nfull < nt
      const k0 = k.let(t.mul(BC), "k0");
      tileMath(x, k0, slot.mul(TILE), false, { regs, mid: two ? () => put(slot.bxor(1)) : undefined });
      k.barrier();
    });
  };
  k.if(x.regP, () => straight(true), () => straight(false));
  // the tiles holding the block's diagonal, as the shipped kernel runs them
  k.for(nfull, nt, (t) => {
    top();
    const slot = slotOf(t);
    const more = k.let(t.add(1).lt(nt), "more");
    k.if(more, () => fetch(t.add(1).mul(BC)));
    const k0 = k.let(t.mul(BC), "k0");
    k.if(k0.le(rf.add(CM - 1)), () => {
      k.if(k0.add(BC - 1).gt(rf), () => tileMath(x, k0, slot.mul(TILE), true), () => tileMath(x, k0, slot.mul(TILE), false));
    });
    if (two) k.if(more, () => put(slot.bxor(1)));
    k.barrier();
  });
  finish(x);
  return k.finish();
}
