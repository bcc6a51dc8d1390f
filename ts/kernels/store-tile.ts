// Writing one 16×16 f16 cooperative-matrix tile to a storage buffer with 16-byte stores.
//
// The NVIDIA driver lowers a coopmat store to global memory into narrow stores: on the H100 a
// matmul's output spent a fixed ~17 µs per wave of tiles in them (bench/RESULTS.md, session 5,
// run 7). Instead the tile goes to a per-subgroup slot of 32 u32x4 in shared memory (512 B, a row
// of 16 halves = 2 u32x4), and lane l stores row l/2, halves 8·(l%2) .. +8 as one u32x4.
// Contract: `at` (the tile's first element) and `ld` (its row stride, in elements) are multiples
// of 8, so every store is 16-byte aligned; the slot is the subgroup's own (no workgroup barrier).
// `lanes` may rewrite each lane's 8 halves on their way out (an elementwise epilogue that reads
// other M×N tensors at the lane's element index `oi`, with 16-byte loads as coalesced as the store).
// The flash attention kernels keep their coopmat stores: the same path made the forward 1.5x and
// dQ 1.4x slower on the H100 (session 5, run 12), where outputs are a small share of the work.
import type { Buffer, Expr, KernelBuilder, Shared } from "../ir/index.js";

/** u32x4 elements of one subgroup's slot. */
export const TILE_SLOT = 32;

export function storeTileF16(
  k: KernelBuilder, out: Buffer, slots: Shared, slot: Expr, lane: Expr, tile: Expr, at: Expr, ld: Expr | number,
  lanes?: (words: Expr, oi: Expr) => Expr,
): void {
  slots.cmStore(tile, slot, 2, "row");
  k.barrier({ scope: "subgroup", mem: ["workgroup"] });
  const oi = k.let(at.add(lane.shr(1).mul(ld)).add(lane.band(1).mul(8)), "oi");
  const words = slots.load(slot.add(lane));
  out.as("u32", 4).store(oi.div(8), lanes ? lanes(words, oi) : words);
  k.barrier({ scope: "subgroup", mem: ["workgroup"] });
}
