// Two probes of the K-contiguous staging that lost everywhere (H200 session 9, runs 6-7;
// bench/MATMUL_NOTES.md round 9), kept forceable as the `_ta` and `_sp` tiles: A staged transposed
// through an 8×8 lane transpose, and chunks assigned to lanes row-first. Both showed that 128-bit
// global loads are served 8 lanes at a time, so the lines each 8-lane group touches decide.
import { select, vecOf, type Expr, type KernelBuilder } from "../../ir/index.js";
import type { Slot, Stage } from "./coopmat-stage.js";

/**
 * Slots of a K-contiguous tile (rows × 32, 128-bit chunks, whole tiles) staged transposed, as a
 * 32 × `pitch` `[k][row]` tile (CoopConfig.stageAT): each load instruction of a subgroup
 * covers 8 rows × 32 k (lane l: row l % 8, chunk l / 8), so each 8-lane group holds an 8×8 block
 * that transpose8 turns into 8 k-rows of 8 elements, stored as 16 bytes at [k][row0 .. row0 + 8].
 */
export function transposedSlots(k: KernelBuilder, s: Stage, lid: Expr, threads: number, tag: string, pitch: number): { slots: Slot[]; t8: Expr } {
  if (s.cols !== 32 || s.vw !== 8 || !s.aligned || s.rows % 8 || (s.rows * 4) % threads || threads % 32) {
    throw new Error(`coopmat: ${tag} transposed staging needs whole ${s.rows}x32 tiles of 128-bit chunks over ${threads} threads`);
  }
  const lane = k.let(lid.rem(32), `${tag}ln`);
  const t8 = k.let(lane.rem(8), `${tag}t8`);
  const c = k.let(lane.div(8).mul(8), `${tag}c`);
  const warp = k.let(lid.div(32), `${tag}w`);
  const warps = threads / 32;
  const slots: Slot[] = [];
  for (let it = 0; it < (s.rows * 4) / threads; it++) {
    const r0 = k.let(warp.add(it * warps).mul(8), `${tag}r0`);
    const r = k.let(r0.add(t8), `${tag}r`);
    const gOff = k.let(r.mul(s.ld).add(c).div(8), `${tag}g`);
    slots.push({ r, c, shOff: k.let(c.add(t8).mul(pitch).add(r0), `${tag}sh`), gOff });
  }
  return { slots, t8 };
}

/**
 * Transposes the 8×8 block of 16-bit values held by 8 consecutive lanes (lane i: row i, as the
 * halves of a u32x4): three exchanges with lanes i^4, i^2, i^1, each swapping the off-diagonal
 * 4×4, 2×2 and 1×1 sub-blocks, leave lane i with column i (element j = row j).
 */
export function transpose8(k: KernelBuilder, v0: Expr, i: Expr): Expr {
  const bit = (m: number) => k.let(i.band(m).ne(0), "tb");
  let v = k.let(v0, "tv");
  // 4×4 blocks: words q <-> q ^ 2; words 0, 1 hold columns 0-3
  const b2 = bit(4);
  let r = k.let(k.shuffleXor(v.swz("zwxy"), 4), "tr");
  v = k.let(vecOf("u32x4", select(b2, r.x, v.x), select(b2, r.y, v.y), select(b2, v.z, r.z), select(b2, v.w, r.w)), "tv");
  // 2×2 blocks: words q <-> q ^ 1; words 0, 2 hold columns (0, 1) and (4, 5)
  const b1 = bit(2);
  r = k.let(k.shuffleXor(v.swz("yxwz"), 2), "tr");
  v = k.let(vecOf("u32x4", select(b1, r.x, v.x), select(b1, v.y, r.y), select(b1, r.z, v.z), select(b1, v.w, r.w)), "tv");
  // single elements: the two halves of each word swap
  const b0 = bit(1);
  const words = ["x", "y", "z", "w"].map((q) => k.let(v.swz(q), "tw"));
  const rot = words.map((w) => w.shr(16).bor(w.shl(16)));
  r = k.let(k.shuffleXor(vecOf("u32x4", ...rot), 1), "tr");
  const lo = 0xffff, hi = 0xffff0000;
  const mixed = words.map((w, q) => {
    const g = r.swz("xyzw"[q]);
    return select(b0, g.band(lo).bor(w.band(hi)), w.band(lo).bor(g.band(hi)));
  });
  return vecOf("u32x4", ...mixed);
}

/**
 * chunkSlots for short rows (fewer than 8 chunks: the K-contiguous tiles) in spread order: a
 * subgroup's load covers 32 / perRow whole rows as before, but lane l takes row l % (32 / perRow)
 * and chunk l / (32 / perRow). A 128-bit shared store is served 8 lanes at a time; in row order
 * those 8 lanes write two 64-byte row segments whose banks overlap at an 80-byte pitch (a 2-way
 * conflict), in spread order one chunk of 8 rows, in distinct banks whenever pitch / 16 is odd.
 */
export function spreadSlots(k: KernelBuilder, s: Stage, lid: Expr, threads: number, tag: string, pitch: number): Slot[] {
  const perRow = s.cols / s.vw;
  const rpw = 32 / perRow;
  const lane = k.let(lid.rem(32), `${tag}ln`);
  const warp = k.let(lid.div(32), `${tag}w`);
  const rIn = k.let(lane.rem(rpw), `${tag}ri`);
  const c = k.let(lane.div(rpw).mul(s.vw), `${tag}c`);
  const warps = threads / 32;
  const out: Slot[] = [];
  for (let it = 0; it < (s.rows * perRow) / threads; it++) {
    const r = k.let(warp.add(it * warps).mul(rpw).add(rIn), `${tag}r`);
    const gOff = s.aligned ? k.let(r.mul(s.ld).add(c).div(s.vw), `${tag}g`) : undefined;
    out.push({ r, c, shOff: k.let(r.mul(pitch).add(c), `${tag}sh`), gOff });
  }
  return out;
}
