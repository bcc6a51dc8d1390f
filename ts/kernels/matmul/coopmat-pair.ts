// Pair staging of the coopmat matmul's k-tiles (CoopConfig.pairK): the K-contiguous operands load
// two k-tiles every other k-tile, so each 8-lane group of a 128-bit load reads one whole 128-byte
// line instead of two halves (H200 session 9; bench/MATMUL_NOTES.md round 9). Three forms of
// holding and storing the second k-tile — under a branch (pairSlots), by select with every lane
// storing (pairRotSlots) — and the row-pair form of the operand whose rows run along K
// (pairRowSlots); pairedPipeline is the k-loop that runs them in pairs of k-tiles.
import { lit, select, type Expr, type KernelBuilder, type Shared } from "../../ir/index.js";
import { read } from "./common.js";
import {
  loadChunks, operandStage, PAD, rowOrderChunk, storeAfterMultiply, storeChunks, type Operand, type PipelineShape, type Slot, type Stage,
} from "./coopmat-stage.js";

/**
 * Slots of a K-contiguous operand staged two k-tiles per load (CoopConfig.pairK). `s` describes
 * the pair (cols = 2·bk), so the lanes that share a row read its whole 128-byte line (bk 32, 16-bit
 * data) in one load instruction instead of half of it per k-tile. A thread's chunks all fall in
 * one k-tile of the pair (threads is a multiple of the chunks per pair row): `half`, 0 or 1. They
 * go to the rows × (bk + PAD) stage when that k-tile is next, under a branch on `half`.
 */
export function pairSlots(k: KernelBuilder, s: Stage, lid: Expr, threads: number, tag: string): { slots: Slot[]; half: Expr } {
  const perRow = s.cols / s.vw;
  const bk = s.cols / 2;
  if (threads % perRow || (s.rows * perRow) % threads || !s.aligned) {
    throw new Error(`coopmat: ${tag} pair tile ${s.rows}x${s.cols} does not split over ${threads} threads (or is not aligned)`);
  }
  const half = k.let(lid.rem(perRow).div(perRow / 2), `${tag}half`);
  const slots: Slot[] = [];
  for (let it = 0; it < (s.rows * perRow) / threads; it++) {
    const { r, c, gOff } = rowOrderChunk(k, s, lid, it, threads, tag);
    slots.push({ r, c, shOff: k.let(r.mul(bk + PAD).add(c).sub(half.mul(bk)), `${tag}sh`), gOff });
  }
  return { slots, half };
}

/**
 * Rotated pair staging (CoopConfig.pairRot): whole-line loads as in pairSlots, but in each odd slot
 * the lanes of a row take the other half of the line (chunk + perRow/2), so every lane holds one
 * chunk of each k-tile per slot pair and stores one per k-tile: all lanes active, no branch. The
 * odd slot's rows are the even slot's block + rows/2 with the row index xor 4, so the two 64-byte
 * segments an 8-lane group stores are 4 rows (mod 8) apart: distinct banks at an 80-byte pitch.
 */
export function pairRotSlots(k: KernelBuilder, s: Stage, lid: Expr, threads: number, tag: string): { slots: Slot[]; half: Expr } {
  const perRow = s.cols / s.vw;
  const bk = s.cols / 2;
  const rps = threads / perRow;
  const n = (s.rows * perRow) / threads;
  if (threads % perRow || (s.rows * perRow) % threads || n % 2 || rps % 8 || s.vw !== 8 || !s.aligned) {
    throw new Error(`coopmat: ${tag} rotated pair tile ${s.rows}x${s.cols} does not split over ${threads} threads`);
  }
  const x = k.let(lid.div(perRow), `${tag}x`);
  const cl = k.let(lid.rem(perRow), `${tag}cl`);
  const half = k.let(cl.div(perRow / 2), `${tag}half`);
  const inHalf = k.let(cl.rem(perRow / 2).mul(s.vw), `${tag}ih`);
  const xr = k.let(x.bxor(4), `${tag}xr`);
  const cOdd = k.let(cl.add(perRow / 2).rem(perRow).mul(s.vw), `${tag}co`);
  const cEven = k.let(cl.mul(s.vw), `${tag}ce`);
  const slots: Slot[] = [];
  for (let it = 0; it < n; it++) {
    const odd = it % 2 === 1;
    const r = k.let((odd ? xr : x).add(it * rps), `${tag}r`);
    const c = odd ? cOdd : cEven;
    const gOff = k.let(r.mul(s.ld).add(c).div(s.vw), `${tag}g`);
    slots.push({ r, c, shOff: k.let(r.mul(bk + PAD).add(inHalf), `${tag}sh`), gOff });
  }
  return { slots, half };
}

/**
 * Pair staging of an operand whose rows run along K (B in NN, A in TT; CoopConfig.pairRows): `s`
 * describes the pair (rows = 2·bk), whose second k-tile is the second half of its rows. Each slot's
 * rows fall in one k-tile when bk is a multiple of the rows one slot covers: `slotHalf`, a
 * compile-time k-tile per slot, so its stores need neither a branch nor a select.
 */
export function pairRowSlots(k: KernelBuilder, s: Stage, lid: Expr, threads: number, tag: string): { slots: Slot[]; slotHalf: number[] } {
  const perRow = s.cols / s.vw;
  const bk = s.rows / 2;
  const rowsPerSlot = threads / perRow;
  if (threads % perRow || bk % rowsPerSlot || !s.aligned) {
    throw new Error(`coopmat: ${tag} row-pair tile ${s.rows}x${s.cols} does not split over ${threads} threads (or is not aligned)`);
  }
  const slots: Slot[] = [], slotHalf: number[] = [];
  for (let it = 0; it < (s.rows * perRow) / threads; it++) {
    const h = Math.floor((it * rowsPerSlot) / bk);
    const { r, c, gOff } = rowOrderChunk(k, s, lid, it, threads, tag);
    slots.push({ r, c, shOff: k.let(r.sub(h * bk).mul(s.cols + PAD).add(c), `${tag}sh`), gOff });
    slotHalf.push(h);
  }
  return { slots, slotHalf };
}

/** Stores a rotated pair operand's chunks of the k-tile with the given parity (pairRotSlots). */
function storeRotated(k: KernelBuilder, sh: Shared, o: Operand, stageOff: Expr, parity: number): void {
  const even = k.let(o.half!.eq(parity), "hp");
  for (let i = 0; i < o.slots.length; i += 2) {
    const at = k.let(stageOff.add(select(even, o.slots[i].shOff, o.slots[i + 1].shOff)), "so");
    sh.store(at.div(8), select(even, read(o.regs[0][i]), read(o.regs[0][i + 1])));
  }
}

/**
 * The k-loop with pair-staged operands (pairK; aligned, prefetch 1, nt even): it runs in pairs of
 * k-tiles. Before an even tile's multiply a pair operand loads nothing (the odd tile already waits
 * in the registers of the threads whose half is 1); before an odd tile's it loads the next pair.
 * After each multiply the threads whose half is the next tile's parity store their chunks.
 */
export function pairedPipeline(k: KernelBuilder, ps: PipelineShape, ops: Operand[], kBeg: Expr, nt: Expr, mma: (cur: Expr[]) => void): void {
  if (!ps.aligned || ps.prefetch !== 1 || ps.peel) throw new Error("coopmat: pair staging needs aligned tiles, prefetch 1 and no peel");
  const last = k.let(nt.sub(1), "tlast");
  const lastPair = k.let(nt.sub(2), "tpair");
  const origin = (tile: Expr, pair: boolean) => k.let(kBeg.add(tile.min(pair ? lastPair : last).mul(ps.bk)), "k0");
  const stageOf = (tile: Expr, o: Operand): Expr => operandStage(k, ps, o, tile);
  const store = (o: Operand, at: Expr, off: Expr, parity: number) => {
    const sh = o.slotHalf;
    if (sh) {
      const mine = (_: unknown, i: number) => sh[i] === parity;
      storeChunks(k, o.at(at), o.slots.filter(mine), o.regs[0].filter(mine), off);
    } else if (o.half && o.rotated) storeRotated(k, o.at(at).sh, o, off, parity);
    else if (o.half) k.if(o.half.eq(parity), () => storeChunks(k, o.at(at), o.slots, o.regs[0], off));
    else storeChunks(k, o.at(at), o.slots, o.regs[0], off);
  };
  // the branches around pair stores go last: plain shared stores after such a branch cost a third
  // of the k-loop's throughput (H200 session 9, runs 8-9: 264 → 392 TF/s)
  const branched = (o: Operand) => !!o.half && !o.rotated;
  const storeOrder = [...ops.filter((o) => !branched(o)), ...ops.filter(branched)];
  for (const o of ops) loadChunks(k, o.at(kBeg), o.slots, o.regs[0], ps.regElem);
  for (const o of storeOrder) store(o, kBeg, lit("u32", o.offset ?? 0), 0);
  k.barrier();
  const step = (tile: Expr, u: 0 | 1) => {
    const next = k.let(tile.add(1), "tn");
    for (const o of ops) {
      if (!o.half && !o.slotHalf) loadChunks(k, o.at(origin(next, false)), o.slots, o.regs[0], ps.regElem);
      else if (u === 1) loadChunks(k, o.at(origin(next, true)), o.slots, o.regs[0], ps.regElem);
    }
    mma(ops.map((o) => stageOf(tile, o)));
    storeAfterMultiply(k, ps, storeOrder, (o) => store(o, kBeg, stageOf(next, o), 1 - u));
    k.barrier();
  };
  k.for(0, nt, (t) => {
    step(t, 0);
    step(k.let(t.add(1), "t1"), 1);
  }, { name: "t", step: 2 });
}
