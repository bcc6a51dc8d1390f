// Causal flash attention forward on KHR cooperative matrices (16x16x16 f16 -> f32) with the
// output kept in accumulators: flash_fwd's contract (bindings q, k, v, o, lse; FA_PUSH, or
// FA_ROWS_PUSH in the rows layout) for tensors with D % 16 == 0, D <= 64, T % rows == 0, on
// 32-wide subgroups. Two forms, one set of pieces (declare, kvStaging, tileMath, finish):
// - f16 (flashFwdCmSlKernel, `_w4_s1_sl`): 4 subgroups, 64-key tiles, straight-line tiles: the
//   q0 / 64 tiles wholly before the workgroup's first query row run in a loop with no branch but
//   the lazy softmax's rescale test (no "does the subgroup see this tile" or "is it its diagonal"
//   test, no mask test, the P path chosen once outside the loop, the next tile's loads unguarded:
//   it always exists); then the tile holding the block's diagonal runs the per-subgroup body
//   (skipped, masked or whole).
// - f32 (flashFwdCmAccKernel, `x3`: q, k, v split into bf16 hi/lo, FlashCmAccVariant.split): every
//   tile behind the per-subgroup tests (streamTiles), 4 or 8 subgroups, 32- or 64-key tiles. The
//   straight-line form was built and raced for f16 only.
// H200, causal f16, BH = 192, T = 1024, D = 64 (bench/FLASH_NOTES.md, session 21): the f16 form
// 0.165 ms in the [BH, T, D] layout and 0.200 in the trainer's rows layout, the per-tile f16 kernel
// it replaced 0.188 / 0.204 (O and lse the same bits); 8 subgroups sharing each K/V tile lost.
//
// Dispatch: [T / rows, BH] with rows = 16 * rb * nsg, 32 * nsg threads; the workgroups, numbered
//   x-fastest, take query blocks from the last (the most key tiles) down, every head's before the
//   next shorter one, so the long blocks start first and the tail is short.
//   Subgroup s owns rb blocks of 16 query rows from q0 + 16 rb s; every K or V fragment it reads
//   from shared memory feeds one MMA per block.
// Per tile of bc keys (64 or 32): K and V (f16, rows padded by 8 halves) staged in shared memory
//   through 128-bit copies, one stage: the next tile is loaded into registers before the math and
//   stored after the barrier that ends the math's reads (streamTiles; the f16 form's loops stage
//   the same way). On the
//   subgroup's diagonal tile the S and P V products of fragments wholly above the diagonal are
//   skipped. S = Q K^T is
//   rb x bc/16 x D/16 products (Q fragments stay in registers); the softmax works on accumulator
//   elements, which needs no knowledge of their lane layout:
//   - row-wise values (running max, rescale factor, l) are *broadcast matrices*: a 16x16
//     accumulator whose element (r, c) is the value of row r, loaded from a shared tile;
//   - lazy rescaling: scores are in log2 units, M is a stale running max per row and P =
//     exp2(S - M). Only when some element of the subgroup exceeds M by more than TAU (P > 2^TAU)
//     does the subgroup take the slow path (shared memory): new row maxima, O and l scaled by
//     exp2(M_old - M_new). The first tile always does. O / l is exact whatever M is, because the
//     numerator and l use the same M; lse = M ln 2 + ln l;
//   - l is accumulated element-wise in an accumulator (partial row sums per column), reduced once
//     at the end through shared memory;
//   - the causal mask (diagonal fragments only) is an element-wise add of a 0 / -inf triangle.
//   P (acc f32) becomes the A operand of P V in registers when the accumulator and A layouts
//   match element for element (checked once at start with index matrices: true on NVIDIA, where
//   both follow mma.m16n8k16's fragment layout), otherwise through a per-subgroup f16 tile.
// Numerics: scores, softmax and l in f32; P rounded to f16 for P V (as FlashAttention does); P <=
//   2^TAU = 256 keeps it well inside f16 range.
import {
  coopmat, exp2, f16, f32, fma, kernel, lit, log, max,
  type Buffer, type BufferView, type CoopMatType, type Expr, type KernelBuilder, type KernelDesc, type Shared, type Var,
} from "../ir/index.js";
import { safeTanh } from "./common.js";
import type { FlashDevice } from "./attention-variants.js";
import { FA_PUSH, faPush, headRows, layoutTag, rowsPush, type HeadLayout, type HeadRows } from "./attention.js";
import {
  CM, accToOperands, causalTriangle, elements, laneLayout, splitElement, splitMma, streamTiles, tileStager, type HalfType,
} from "./attention-cm-parts.js";
/** Rescale threshold in log2 units: P = exp2(S - M_stale) stays <= 2^TAU. */
const TAU = 8;
const LOG2E = Math.LOG2E;
const NEG_BIG = -1e30;

export interface FlashCmAccVariant {
  readonly D: number;
  readonly softCap: boolean;
  /** Subgroups per workgroup (16 query rows each). */
  readonly nsg: 4 | 8;
  /**
   * 16-row blocks per subgroup (default 1, every shipped kernel): with 2, each K/V fragment read
   * feeds two MMAs. (Kept as a shape parameter: folding it to 1 would change the shipped
   * descriptions, which name their values per block.)
   */
  readonly rb?: 1 | 2;
  /** Keys per tile (default 64); 32 halves S, P and the K/V prefetch registers. */
  readonly bc?: 32 | 64;
  /** Always convert P through shared memory (the fallback path of laneLayout; for tests). */
  readonly pShared?: boolean;
  /**
   * f32 attention at f32 accuracy (x3): q, k, v arrive split into bf16 high and low parts (one
   * binding each: the high parts of all heads, then the low parts; ts/ops/attention.ts splits),
   * every product runs as hi·hi + hi·lo + lo·hi (P split the same way in registers), and o is f32.
   * flashFwdCmAccKernel builds this form only; f16 runs flashFwdCmSlKernel.
   */
  readonly split?: boolean;
  /** Where q, k, v and o are (attention.ts HeadLayout; default "bhtd"). Split: q, k, v's [hi | lo] halves each as long as the tensor. */
  readonly layout?: HeadLayout;
}

type Shape = Pick<FlashCmAccVariant, "D" | "nsg" | "rb" | "bc" | "split">;

export function flashCmAccRows(v: Pick<FlashCmAccVariant, "nsg" | "rb">): number {
  return CM * (v.rb ?? 1) * v.nsg;
}

/** Shared bytes: the K and V stage (16-bit, padded rows; hi and lo when split), per-subgroup f32 stage and 16-bit P tile. */
export function flashCmAccSharedBytes(v: Shape): number {
  return (v.split ? 2 : 1) * 2 * (v.bc ?? 64) * (v.D + 8) * 2 + v.nsg * 256 * 4 + v.nsg * 256 * 2;
}

/** Whether this kernel serves the problem on this device. */
export function flashCmAccApplies(
  info: { coopMatSupported?: boolean; subgroupSize: number; maxSharedMemoryBytes?: number },
  v: Shape, dtype: string, T: number,
): boolean {
  return !!info.coopMatSupported && info.subgroupSize === 32 && dtype === (v.split ? "f32" : "f16") &&
    (info.maxSharedMemoryBytes ?? 49152) >= flashCmAccSharedBytes(v) &&
    T % flashCmAccRows(v) === 0 && v.D % CM === 0 && v.D <= 64;
}

function flashCmAccName(v: FlashCmAccVariant): string {
  // (one stage, 128-bit copies, masked fragments skipped, longest blocks first: `_s1`, `_v128_skip_lpt`)
  return `flash_fwd_cmacc_x3_d${v.D}_w${v.nsg}_s1_r${v.rb ?? 1}_k${v.bc ?? 64}${v.pShared ? "_psh" : ""}_v128_skip_lpt${v.softCap ? "_cap" : ""}${layoutTag(v.layout)}`;
}

/** The f16 kernel's options: its shape is fixed (4 subgroups, one row block each, 64-key tiles). */
export type FlashCmSlVariant = Pick<FlashCmAccVariant, "D" | "softCap" | "pShared" | "layout">;

const SL_SHAPE = { nsg: 4, rb: 1, bc: 64 } as const;

/** Query rows per workgroup of the f16 kernel: dispatch [T / rows, BH, 1]. */
export const FLASH_CM_SL_ROWS = flashCmAccRows(SL_SHAPE);

/** Whether the f16 kernel serves the problem on this device (f16, T % 64 == 0, D % 16 == 0 up to 64, 24 KiB at D = 64). */
export function flashCmSlApplies(info: FlashDevice, dtype: string, T: number, D: number): boolean {
  return flashCmAccApplies(info, { ...SL_SHAPE, D }, dtype, T);
}

function flashCmSlName(o: FlashCmSlVariant): string {
  return `flash_fwd_cmacc_f16_d${o.D}_w4_s1_sl${o.pShared ? "_psh" : ""}${o.softCap ? "_cap" : ""}${layoutTag(o.layout)}`;
}


/** What the parts of one forward kernel share: its shape, bindings, shared tiles, ids and per-subgroup state. */
interface Fa {
  k: KernelBuilder;
  v: FlashCmAccVariant;
  RB: number; BC: number; DC: number; LD: number; ROWS: number; THREADS: number; TILE: number;
  /** Row blocks of the subgroup (0 .. RB - 1) and K/V fragments of a tile (0 .. BC / 16 - 1). */
  blocks: number[]; frags: number[];
  split: boolean; el: HalfType;
  tA: CoopMatType; tB: CoopMatType; tC: CoopMatType; tC16: CoopMatType;
  pc: Record<keyof typeof FA_PUSH, Expr>;
  Q: Buffer; Kg: BufferView; Vg: BufferView; O: Buffer; L: Buffer;
  /** K and V tiles (u32x4), and their low parts when split. */
  KsV: Shared; VsV: Shared; KsLV: Shared | null; VsLV: Shared | null;
  st: Shared; pt: Shared;
  tid: Expr; lane: Expr; r: Expr; bh: Expr; q0: Expr;
  /** The head's first rows in q, k, v and o, and their row strides. */
  hr: HeadRows;
  /** First query row of the subgroup, and of each of its 16-row blocks. */
  rf: Expr; rb0: Expr[];
  stOff: Expr; rowOff: Expr; c2: Expr; capL: Expr;
  regP: Expr; tri: Var;
  /** split: element offset of the low parts (after the high parts of the whole tensor). */
  loOff: Expr | null;
  /** Q fragments per block and d (their low parts when split), O, l, M (broadcast and per row), S, P. */
  qa: Expr[][]; qaL: Expr[][] | null;
  o: Var[][]; lsum: Var[]; mb: Var[]; mrow: Var[]; s: Var[][]; pa: Var[][]; paL: Var[][] | null;
}

/** The split (x3) kernel: f32 tensors as bf16 hi/lo parts, every tile behind the per-subgroup tests. */
export function flashFwdCmAccKernel(v: FlashCmAccVariant): KernelDesc {
  if (!v.split) throw new Error("flash_fwd_cmacc: the per-tile kernel is the split (x3) form; f16 runs flashFwdCmSlKernel");
  const x = declare(v, flashCmAccName(v));
  const { k, BC, ROWS, TILE, RB, rf } = x;
  const { fetch, put } = kvStaging(x);
  const nt = k.let(x.q0.add(ROWS).div(BC), "nt");
  streamTiles(k, nt, BC, lit("u32", 0), fetch, put, (t, slot) => {
    const k0 = k.let(t.mul(BC), "k0");
    // A subgroup whose rows all come before the tile's keys has nothing to do.
    k.if(k0.le(rf.add(CM * RB - 1)), () => {
      // the straight-line body everywhere but on the subgroup's diagonal tile
      k.if(k0.add(BC - 1).gt(rf), () => tileMath(x, k0, slot.mul(TILE), true), () => tileMath(x, k0, slot.mul(TILE), false));
    });
  });
  finish(x);
  return k.finish();
}

/** The f16 kernel (the header): straight-line tiles before the block's diagonal. */
export function flashFwdCmSlKernel(o: FlashCmSlVariant): KernelDesc {
  const x = declare({ ...o, ...SL_SHAPE }, flashCmSlName(o));
  const { k, BC, ROWS, TILE, rf } = x;
  const { fetch, put } = kvStaging(x);
  const u0 = lit("u32", 0);
  // tiles up to the block's last row, and those wholly before its first row (every subgroup sees all their keys)
  const nt = k.let(x.q0.add(ROWS).div(BC), "nt");
  const nfull = k.let(x.q0.div(BC), "nfull");
  // Tile t is in registers at the top of iteration t and stored there.
  fetch(u0);
  const top = () => {
    put(u0);
    k.barrier();
  };
  const straight = (regs: boolean) => {
    k.for(u0, nfull, (t) => {
      top();
      fetch(t.add(1).mul(BC)); // t + 1 <= nfull < nt
      const k0 = k.let(t.mul(BC), "k0");
      tileMath(x, k0, u0.mul(TILE), false, { regs });
      k.barrier();
    });
  };
  k.if(x.regP, () => straight(true), () => straight(false));
  // the tile holding the block's diagonal (ROWS == BC: one), with the per-subgroup body
  k.for(nfull, nt, (t) => {
    top();
    const more = k.let(t.add(1).lt(nt), "more");
    k.if(more, () => fetch(t.add(1).mul(BC)));
    const k0 = k.let(t.mul(BC), "k0");
    k.if(k0.le(rf.add(CM - 1)), () => {
      k.if(k0.add(BC - 1).gt(rf), () => tileMath(x, k0, u0.mul(TILE), true), () => tileMath(x, k0, u0.mul(TILE), false));
    });
    k.barrier();
  });
  finish(x);
  return k.finish();
}

/**
 * The K/V register prefetch: `fetch` loads the tile of keys from row0 on into registers (hi and lo
 * parts when split), `put` stores them into stage `slot` of the shared tiles.
 */
function kvStaging(x: Fa): { fetch: (row0: Expr) => void; put: (slot: Expr) => void } {
  const { k, v, hr, loOff } = x;
  const stager = (off: Expr | null, dsts: [Shared, Shared]) => {
    const at = (e: Expr) => (off ? e.add(off) : e);
    const where = v.layout === "rows" ? { strided: { bases: [at(hr.k), at(hr.v)], strides: [hr.ld as Expr, hr.ld as Expr] } } : { base: at(hr.k) };
    return tileStager(k, { srcs: [x.Kg, x.Vg], dsts, ...where, D: v.D, ld: x.LD, rows: x.BC, tid: x.tid, threads: x.THREADS });
  };
  const stagers = [stager(null, [x.KsV, x.VsV]), ...(loOff && x.KsLV && x.VsLV ? [stager(loOff, [x.KsLV, x.VsLV])] : [])];
  return { fetch: (row0) => stagers.forEach((g) => g.fetch(row0)), put: (slot) => stagers.forEach((g) => g.put(slot)) };
}

/**
 * Kernel `name`: bindings, push constants, shared tiles (one K/V stage of TILE halves), ids, the
 * lane-layout probe and the subgroup's Q, O, l, M, S and P.
 */
function declare(v: FlashCmAccVariant, name: string): Fa {
  const { D, nsg } = v;
  const RB = v.rb ?? 1, BC = v.bc ?? 64, NF = BC / CM;
  if (D % CM !== 0 || D > 64) throw new Error(`flash_fwd_cmacc: D=${D} must be a multiple of 16, at most 64`);
  const DC = D / CM, LD = D + 8, ROWS = CM * RB * nsg, THREADS = 32 * nsg;
  if (ROWS % BC !== 0) throw new Error(`flash_fwd_cmacc: ${ROWS} rows per workgroup is not a multiple of ${BC}-key tiles`);
  const TILE = BC * LD;
  const blocks = Array.from({ length: RB }, (_, b) => b);
  const frags = Array.from({ length: NF }, (_, j) => j);
  const split = !!v.split;
  const el: HalfType = split ? "bf16" : "f16";
  const tA: CoopMatType = coopmat("a", el, CM, CM);
  const tB: CoopMatType = coopmat("b", el, CM, CM);
  const tC: CoopMatType = coopmat("acc", "f32", CM, CM);
  const tC16: CoopMatType = coopmat("acc", "f16", CM, CM);
  const k = kernel(name, { workgroup: [THREADS] });
  const Q = k.buffer("q", el, "read"), K = k.buffer("k", el, "read"), V = k.buffer("v", el, "read");
  const O = k.buffer("o", split ? f32 : f16, "write"), L = k.buffer("lse", f32, "write");
  const pc = k.push(faPush(v.layout));
  const Kg = K.as("u32", 4), Vg = V.as("u32", 4);
  // The tiles are u32x4 arrays (the IR loads fragments through an array's widest view); offsets
  // and strides are in halves and divided by VW at each use.
  const tile = (tag: string) => k.shared(tag, "u32x4", TILE / VW);
  const KsV = tile("Ks"), VsV = tile("Vs");
  const KsLV = split ? tile("KsL") : null, VsLV = split ? tile("VsL") : null;
  const st = k.shared("st", f32, nsg * 256);
  const pt = k.shared("pt", el, nsg * 256);

  const tid = k.let(k.localIndex, "tid");
  const sg = k.let(k.subgroupId, "sg");
  const lane = k.let(k.subgroupInvocation, "lane");
  const r = k.let(lane.shr(1), "r");
  const h8 = k.let(lane.band(1).mul(8), "h8");
  const nqb = k.let(pc.T.div(ROWS), "nqb");
  // longest first across all heads: workgroups are numbered x-fastest (linear id L = x + y nqb)
  // and take query blocks from the last (most key tiles) down, rank L / BH (0 = last block), head L % BH
  const lin = k.let(k.workgroupId.x.add(k.workgroupId.y.mul(nqb)), "lin");
  const bh = k.let(lin.rem(k.numWorkgroups.y), "bh");
  const rank = lin.div(k.numWorkgroups.y);
  const q0 = k.let(nqb.sub(1).sub(rank).mul(ROWS), "q0");
  const hr = headRows(k, pc, bh, D, v.layout, "base");
  const rf = k.let(q0.add(sg.mul(CM * RB)), "rf");
  const rb0 = blocks.map((b) => k.let(rf.add(b * CM), `rf${b}`));
  const stOff = k.let(sg.mul(256), "stoff");
  const rowOff = k.let(stOff.add(r.mul(CM)).add(h8), "rowoff");
  // Without softCap S stays unscaled and log2 units come in with the exponent's fma:
  // exp2(S c - M) = exp2(fma(S, c, -M)); with it, S is capped and scaled in place.
  const c2 = k.let(v.softCap ? pc.scale.div(pc.cap) : pc.scale.mul(LOG2E), "c2");
  const capL = k.let(pc.cap.mul(LOG2E), "capl");

  const { regP, idxC } = laneLayout(k, { tA, tC, st, pt, tid, threads: THREADS, forceShared: v.pShared, el });
  const loOff = !split ? null : v.layout === "rows"
    ? k.let(k.numWorkgroups.y.div(rowsPush(pc).H).mul(pc.T).mul(rowsPush(pc).ld), "looff")
    : k.let(k.numWorkgroups.y.mul(pc.T).mul(D), "looff");
  const tri = causalTriangle(k, tC, idxC, "above");

  const qFrags = (at: Expr, tag: string) =>
    blocks.map((b) => Array.from({ length: DC }, (_, d) => k.let(Q.cmLoad(tA, at.add(rb0[b].mul(hr.ld)).add(d * CM), hr.ld, "row"), `${tag}${b}${d}`)));
  const qa = qFrags(hr.q, "qa");
  const qaL = loOff ? qFrags(hr.q.add(loOff), "qal") : null;
  const o = blocks.map((b) => Array.from({ length: DC }, (_, d) => k.var(tC, k.cmFill(tC, 0), `o${b}${d}`)));
  const lsum = blocks.map((b) => k.var(tC, k.cmFill(tC, 0), `lsum${b}`));
  const mb = blocks.map((b) => k.var(tC, k.cmFill(tC, NEG_BIG), `mb${b}`));
  // row r's M (what mb broadcasts), held by both lanes of the pair that owns row r
  const mrow = blocks.map((b) => k.var(f32, NEG_BIG, `mrow${b}`));
  const s = blocks.map((b) => frags.map((j) => k.var(tC, k.cmFill(tC, 0), `s${b}${j}`)));
  const pa = blocks.map((b) => frags.map((j) => k.var(tA, k.cmFill(tA, 0), `p${b}${j}`)));
  const paL = split ? blocks.map((b) => frags.map((j) => k.var(tA, k.cmFill(tA, 0), `pl${b}${j}`))) : null;
  return {
    k, v, RB, BC, DC, LD, ROWS, THREADS, TILE, blocks, frags, split, el, tA, tB, tC, tC16, pc, Q, Kg, Vg, O, L,
    KsV, VsV, KsLV, VsLV, st, pt, tid, lane, r, bh, q0, hr, rf, rb0, stOff, rowOff, c2, capL, regP, tri, loOff,
    qa, qaL, o, lsum, mb, mrow, s, pa, paL,
  };
}

/** Copy width of the K/V tiles in halves: 8 (u32x4 raw bits, 128-bit). */
const VW = 8;

/** S scaled to log2 units (without softCap; with it, S is capped and scaled in place). */
function toLog2(x: Fa, e: Expr): Expr {
  return x.v.softCap ? e : e.mul(x.c2);
}

/** S - M in log2 units. */
function minusM(x: Fa, e: Expr, m: Expr): Expr {
  return x.v.softCap ? e.sub(m) : fma(e, x.c2, m.neg());
}

function mma(x: Fa, a: Expr, aL: Expr | null, b: Expr, bL: Expr | null, acc: Expr): Expr {
  return splitMma(x.k, { hi: a, lo: aL }, { hi: b, lo: bL }, acc);
}

function sgSync(k: KernelBuilder): void {
  k.barrier({ scope: "subgroup", mem: ["workgroup"] });
}

/**
 * One tile's math. With `skip`, fragment j's products run only if some of the subgroup's rows
 * see some of its keys (k0 + 16 j <= last row): the masked ones are -inf in S (below) and
 * contribute nothing to O. With `straight` (a tile wholly before the subgroup's first row, on P
 * path `regs`): no mask test and no P-path branch.
 */
function tileMath(x: Fa, k0: Expr, kvOff: Expr, skip: boolean, straight?: { regs: boolean }): void {
  const { k, rf, RB } = x;
  const live = (j: number, body: () => void) => (skip ? k.if(k0.add(j * CM).le(rf.add(CM * RB - 1)), body) : body());
  scores(x, k0, kvOff, live, !straight);
  probabilities(x, straight?.regs);
  accumulate(x, kvOff, skip, live);
}

type Live = (j: number, body: () => void) => void;

/** S = Q K^T of the live fragments (soft-capped), and (with `mask`) the causal mask on the diagonal. */
function scores(x: Fa, k0: Expr, kvOff: Expr, live: Live, mask: boolean): void {
  const { k, blocks, frags, tC, rf, s } = x;
  // S = Q K^T: each K fragment read from shared memory feeds every row block
  for (const j of frags) {
    live(j, () => {
      const acc = blocks.map(() => k.cmFill(tC, 0));
      for (let d = 0; d < x.DC; d++) {
        const at = kvOff.add(j * CM * x.LD + d * CM).div(VW);
        const kb = x.KsV.cmLoad(x.tB, at, x.LD / VW, "col");
        const kbL = x.KsLV ? x.KsLV.cmLoad(x.tB, at, x.LD / VW, "col") : null;
        for (const b of blocks) acc[b] = mma(x, x.qa[b][d], x.qaL ? x.qaL[b][d] : null, kb, kbL, acc[b]);
      }
      for (const b of blocks) {
        s[b][j].set(acc[b]);
        if (x.v.softCap) elements(k, tC, (i) => s[b][j].setAt(i, safeTanh(s[b][j].at(i).mul(x.c2)).mul(x.capL)));
      }
    });
  }
  // causal mask: only fragments that reach past the subgroup's first row
  if (!mask) return;
  k.if(k0.add(x.BC - 1).gt(rf), () => {
    for (const b of blocks) {
      for (const j of frags) {
        const kf = k.let(k0.add(j * CM), "kf");
        k.if(kf.gt(x.rb0[b]), () => s[b][j].set(k.cmFill(tC, lit(f32, "-inf"))), () => {
          k.if(kf.eq(x.rb0[b]), () => s[b][j].set(s[b][j].get().add(x.tri.get())));
        });
      }
    }
  });
}

/**
 * P = exp2(S - M) into the A operands pa (and paL), l accumulated; the slow path first where some
 * element exceeds the stale M by more than TAU. `regs` given: that P path without the branch.
 */
function probabilities(x: Fa, regs?: boolean): void {
  const { k, blocks, frags, tC, s, pa, paL, lsum, mb } = x;
  const over = k.var(f32, lit(f32, "-inf"), "over");
  elements(k, tC, (i) => {
    for (const b of blocks) {
      const m = s[b].map((e) => e.at(i)).reduce((a, c) => max(a, c));
      over.set(max(over.get(), minusM(x, m, mb[b].at(i))));
    }
  });
  k.if(k.sgAny(over.get().gt(TAU)), () => blocks.forEach((b) => rescale(x, b)));
  const inRegs = () => {
    elements(k, tC, (i) => {
      for (const b of blocks) {
        const mi = mb[b].at(i);
        let sum = lsum[b].at(i);
        for (const j of frags) {
          const p = k.let(exp2(minusM(x, s[b][j].at(i), mi)), "p");
          sum = sum.add(p);
          splitElement(k, x.el, p, pa[b][j], paL ? paL[b][j] : null, i);
        }
        lsum[b].setAt(i, sum);
      }
    });
  };
  const viaShared = () => {
    for (const b of blocks) {
      for (const j of frags) {
        elements(k, tC, (i) => {
          const p = k.let(exp2(minusM(x, s[b][j].at(i), mb[b].at(i))), "p");
          lsum[b].setAt(i, lsum[b].at(i).add(p));
          s[b][j].setAt(i, p);
        });
        if (x.split) {
          accToOperands(k, { tC, tA: x.tA, el: x.el, st: x.st, pt: x.pt, off: x.stOff, lane: x.lane }, s[b][j].get(), pa[b][j], paL ? paL[b][j] : null);
          continue;
        }
        sgSync(k);
        x.pt.cmStore(s[b][j].get().cast(x.tC16), x.stOff, CM, "row");
        sgSync(k);
        pa[b][j].set(x.pt.cmLoad(x.tA, x.stOff, CM, "row"));
      }
    }
  };
  if (regs === undefined) k.if(x.regP, inRegs, viaShared);
  else if (regs) inRegs();
  else viaShared();
}

/** O += P V: each V fragment read feeds every row block. */
function accumulate(x: Fa, kvOff: Expr, skip: boolean, live: Live): void {
  const { blocks, frags, pa, paL, o } = x;
  if (skip) {
    for (const j of frags) {
      live(j, () => {
        for (let dn = 0; dn < x.DC; dn++) {
          const [vb, vbL] = vFrags(x, kvOff, j, dn);
          for (const b of blocks) o[b][dn].set(mma(x, pa[b][j].get(), paL ? paL[b][j].get() : null, vb, vbL, o[b][dn].get()));
        }
      });
    }
    return;
  }
  for (let dn = 0; dn < x.DC; dn++) {
    const acc = blocks.map((b) => o[b][dn].get());
    for (const j of frags) {
      const [vb, vbL] = vFrags(x, kvOff, j, dn);
      for (const b of blocks) acc[b] = mma(x, pa[b][j].get(), paL ? paL[b][j].get() : null, vb, vbL, acc[b]);
    }
    for (const b of blocks) o[b][dn].set(acc[b]);
  }
}

/** V fragment (j, dn) of the staged tile, and its low part when split. */
function vFrags(x: Fa, kvOff: Expr, j: number, dn: number): [Expr, Expr | null] {
  const at = kvOff.add(j * CM * x.LD + dn * CM).div(VW);
  return [x.VsV.cmLoad(x.tB, at, x.LD / VW, "row"), x.VsLV ? x.VsLV.cmLoad(x.tB, at, x.LD / VW, "row") : null];
}

/** New row maxima of block b from this tile; its O and l rescaled by exp2(M_old - M_new). */
function rescale(x: Fa, b: number): void {
  const { k, tC, st, stOff, s } = x;
  const tmax = k.var(tC, s[b][0].get(), "tmax");
  elements(k, tC, (i) => tmax.setAt(i, toLog2(x, s[b].map((e) => e.at(i)).reduce((a, c) => max(a, c)))));
  sgSync(k);
  st.cmStore(tmax.get(), stOff, CM, "row");
  sgSync(k);
  const half = k.let(Array.from({ length: 8 }, (_, c) => st.load(x.rowOff.add(c))).reduce((a, c) => max(a, c)), "hmax");
  const rmax = k.let(max(half, k.shuffleXor(half, 1)), "rmax");
  const mold = x.mrow[b].get();
  const mnew = k.let(max(mold, rmax), "mnew");
  const corr = k.let(exp2(mold.sub(mnew)), "corr");
  broadcast(x, corr);
  const cb = k.var(tC, st.cmLoad(tC, stOff, CM, "row"), "cb");
  broadcast(x, mnew);
  x.mb[b].set(st.cmLoad(tC, stOff, CM, "row"));
  x.mrow[b].set(mnew);
  elements(k, tC, (i) => {
    const c = cb.at(i);
    for (const e of [...x.o[b], x.lsum[b]]) e.setAt(i, e.at(i).mul(c));
  });
}

/** Writes `value` over this lane's half row of the stage tile (after the subgroup's reads). */
function broadcast(x: Fa, value: Expr): void {
  sgSync(x.k);
  for (let c = 0; c < 8; c++) x.st.store(x.rowOff.add(c), value);
  sgSync(x.k);
}

/** l: reduce the per-column partial sums; O / l through a broadcast tile; lse = M ln 2 + ln l. */
function finish(x: Fa): void {
  const { k, tC, st, stOff, v } = x;
  for (const b of x.blocks) {
    sgSync(k);
    st.cmStore(x.lsum[b].get(), stOff, CM, "row");
    sgSync(k);
    const lhalf = k.let(Array.from({ length: 8 }, (_, c) => st.load(x.rowOff.add(c))).reduce((a, c) => a.add(c)), "lhalf");
    const lrow = k.let(lhalf.add(k.shuffleXor(lhalf, 1)), "lrow");
    broadcast(x, lrow);
    const lb = k.let(st.cmLoad(tC, stOff, CM, "row"), "lb");
    x.o[b].forEach((od, d) => {
      const out = od.get().div(lb);
      x.O.cmStore(x.split ? out : out.cast(x.tC16), x.hr.o.add(x.rb0[b].mul(x.hr.ldo)).add(d * CM), x.hr.ldo, "row");
    });
    const mfin = x.mrow[b].get();
    k.if(x.lane.band(1).eq(0), () => x.L.store(x.bh.mul(x.pc.T).add(x.rb0[b]).add(x.r), mfin.mul(Math.LN2).add(log(lrow))));
  }
}
