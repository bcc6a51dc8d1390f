// Causal flash attention backward on KHR cooperative matrices (16x16x16 f16 -> f32), in two
// kernels that recompute P from Q, K and the forward's lse instead of storing scores:
//   dQ   (flash_bwd_dq_cm, here):   per 64-query block, over key tiles up to the diagonal:
//        S = Q K^T, P = exp(scale S - lse), dP = dO V^T, dS = P (dP - Di), dQ += dS K;
//   dKdV (flash_bwd_dkdv_cm, attention-cm-bwd-kv.ts: its forms and which one a problem runs): per
//        key block, over query tiles from the diagonal on, the same products transposed:
//        S^T = K Q^T, P^T, dP^T = V dO^T, dS^T = P^T (dP^T - Di), dV += P^T dO, dK += dS^T Q.
// This module holds the dQ kernel and the pieces both kernels are built from.
// Di = rowsum(dO * O) comes from attn_rowdot (ts/kernels/attention-dense.ts). Bindings: q, k, v,
// dO, lse, di (read), then dq or dk, dv (write); push FA_PUSH; f16 tensors, D % 16 == 0, D <= 64,
// T % 64 == 0, 32-wide subgroups.
// Soft-capping (`softCap`, as the forward): S becomes cap tanh(scale S / cap) in log2 units before
// the causal triangle is added, P = exp2(S - lse2), and dS gains the factor 1 - tanh² (from
// min(t², 1), so masked -inf scores give 0, not NaN).
//
// dQ dispatch: [T / 64, BH], 4 subgroups (128 threads); subgroup s owns 16 queries from the block
// start + 16 s, whose Q and dO fragments stay in registers (the dK/dV kernels: 16 keys and their K
// and V fragments per subgroup). The other side streams through shared memory in 64-row tiles, one
// stage with a register prefetch (two barriers per tile: one stage fits 48 KiB at D = 64), 128-bit
// copies. Longest blocks first across all heads (the last query block for dQ, the first key block
// for dKdV), as in the forward's `lpt`. The f16 dQ kernel (`_w4_s1_sl`) runs the key tiles before
// the block's diagonal tile straight (no mask or P/dS-path branch per fragment) and the diagonal
// tile last; the split one (`x3`, 32-row tiles) tests every fragment (its straight-line forms, 4 or
// 8 subgroups, were 5–12 % slower on the H200: bench/FLASH_NOTES.md, session 25).
// Row values (lse and Di per query) enter the element-wise math as broadcast matrices: a 16x16
// accumulator whose (r, c) element is the value of query r (dQ: built once per subgroup) or of
// query c (dKdV). dS and P become A operands in registers where the accumulator and A layouts
// match (attention-cm-parts.ts laneLayout), else through a per-subgroup f16 tile. Fragments wholly
// above the diagonal are skipped; the diagonal ones get an additive -inf triangle. Numerics: S, P,
// dP, dS and the dQ/dK/dV sums in f32; P and dS rounded to f16 as MMA operands (as FlashAttention
// does).
// Split (x3) form, for f32 attention at f32 accuracy: q, k, v, dO arrive as bf16 high and low
// parts (one binding each, all heads' high parts then the low parts), every product is
// hi·hi + hi·lo + lo·hi (P and dS split the same way in registers), dq, dk, dv are f32, and the
// streamed tiles are 32 rows so the four hi/lo tiles fit 48 KiB.
// Layout "rows" (names end _rows; attention.ts HeadLayout, push FA_ROWS_PUSH): q, k, v, dO and
// dq, dk, dv in the rows of [B*T, ...] tensors, lse [BH, T], di [B*T, H] (attn_rowdot over dO and O
// rows of H D); split: each tensor's [hi | lo] halves are as long as the tensor.
import {
  coopmat, exp2, f16, f32, fma, kernel, lit,
  type Buffer, type CoopMatType, type Expr, type KernelBuilder, type KernelDesc, type Shared, type Var,
} from "../ir/index.js";
import { faPush, headRows, layoutTag, rowsPush, type HeadLayout, type HeadRows } from "./attention.js";
import type { FlashDevice } from "./attention-variants.js";
import { safeTanh } from "./common.js";
import {
  CM, accToOperands, causalTriangle, elements, laneLayout, splitElement, splitMma as mma, streamStraight, streamTiles, tileStager,
  type HalfType, type Pair,
} from "./attention-cm-parts.js";

/** Queries per dQ workgroup (4 subgroups of 16), rows per streamed tile of the f16 kernels. */
export const FLASH_BWD_CM_ROWS = 64;
const NSG = 4;
export const LOG2E = Math.LOG2E;

export interface FlashBwdCmVariant {
  readonly D: number;
  /** f32 accuracy from bf16 hi/lo operands (see the header); f32 results. */
  readonly split?: boolean;
  /** Always convert P and dS through shared memory (the fallback path; for tests). */
  readonly pShared?: boolean;
  /** Scores soft-capped by push `cap` (see the header). */
  readonly softCap?: boolean;
  /** Where the tensors are (attention.ts HeadLayout; default "bhtd"). */
  readonly layout?: HeadLayout;
}

/**
 * Whether the dQ kernel serves the problem on this device: f16, or f32 in the split form (the
 * dK/dV kernel's own requirements: attention-cm-bwd-kv.ts pickFlashBwdDkDv).
 */
export function flashBwdDqCmApplies(dev: FlashDevice, dtype: string, T: number, D: number): boolean {
  const split = dtype === "f32";
  return !!dev.coopMatSupported && dev.subgroupSize === 32 && (split || dtype === "f16") &&
    T % FLASH_BWD_CM_ROWS === 0 && D % CM === 0 && D <= 64 &&
    (dev.maxSharedMemoryBytes ?? 49152) >= flashBwdDqCmSharedBytes({ D, split });
}

/** Rows of each streamed tile: 32 when split (four hi/lo tiles), else one block (64). */
export function tileRows(v: Pick<FlashBwdCmVariant, "split">): number {
  return v.split ? 32 : FLASH_BWD_CM_ROWS;
}

/** Shared bytes of the dQ kernel: the K and V tiles (hi and lo when split) and the per-subgroup scratch tiles. */
export function flashBwdDqCmSharedBytes(v: Pick<FlashBwdCmVariant, "D" | "split">): number {
  const parts = v.split ? 2 : 1;
  return parts * 2 * tileRows(v) * (v.D + 8) * 2 + NSG * 256 * 4 + NSG * 256 * 2;
}

/** The name tail of the split (x3) dQ kernel: dtype, D, options, layout. */
export function kernelSuffix(v: FlashBwdCmVariant): string {
  return `${v.split ? "x3" : "f16"}_d${v.D}_s1${v.pShared ? "_psh" : ""}${v.softCap ? "_cap" : ""}${layoutTag(v.layout)}`;
}

/** What a backward kernel's pieces share (begin's result). */
export interface Common {
  k: KernelBuilder;
  /** Invocations per workgroup (32 per subgroup). */
  threads: number;
  split: boolean;
  el: HalfType;
  tA: CoopMatType; tB: CoopMatType; tC: CoopMatType; tC16: CoopMatType;
  tid: Expr; sg: Expr; lane: Expr; bh: Expr; rank: Expr;
  /** The head's first rows in each tensor and the row strides (dq, dk, dv mirror q, k, v). */
  hr: HeadRows;
  /** rows: the head count (push H); null in the bhtd layout. */
  H: Expr | null;
  st: Shared; pt: Shared; stOff: Expr;
  regP: Expr; idxC: Var;
  /** scale * log2(e): S in log2 units is fma(S, c2, -lse2); with softCap, scale / cap (tanh's argument). */
  c2: Expr;
  /** softCap: cap * log2(e), the capped score's scale in log2 units; null without softCap. */
  capL: Expr | null;
  scale: Expr; T: Expr;
  /** split: element offset of the low parts (the whole tensor's high parts come first) of q, k, v and of dO; null otherwise. */
  loOff: Expr | null;
  loOffO: Expr | null;
}

/** The tensors a fragment or tile comes from: q, k, v (rows of ld) or dO (rows of ldo). */
export type Src = "q" | "k" | "v" | "o";

function srcAt(c: Common, src: Src): { base: Expr; ld: Expr | number; lo: Expr | null } {
  return src === "o" ? { base: c.hr.o, ld: c.hr.ldo, lo: c.loOffO } : { base: c.hr[src], ld: c.hr.ld, lo: c.loOff };
}

/** Where di holds query t of the head whose lse is at `lseAt`: [BH, T] like lse, or [B*T, H] in the rows layout. */
export function diAt(c: Common, t: Expr, lseAt: Expr): Expr {
  const { H, hr } = c;
  return H && hr.row0 && hr.head ? hr.row0.add(t).mul(H).add(hr.head) : lseAt;
}

/** A fragment variable pair (P or dS as A operands). */
export interface VarPair { hi: Var; lo: Var | null }

/** D / 16 row fragments of `buf` (A operands, tensor `src`) at row `row0`, with their low parts when split. */
export function rowFrags(c: Common, buf: Buffer, src: Src, row0: Expr, D: number, tag: string): Pair[] {
  const { k, tA } = c;
  const { base, ld, lo } = srcAt(c, src);
  return Array.from({ length: D / CM }, (_, d) => {
    const at = (off: Expr) => k.let(buf.cmLoad(tA, off.add(row0.mul(ld)).add(d * CM), ld, "row"), `${tag}${d}`);
    return { hi: at(base), lo: lo ? at(base.add(lo)) : null };
  });
}

/** A fragment pair of a staged tile (hi and, when split, lo tiles at the same offset). */
export function tileFrag(c: Common, t: Shared[], at: Expr, ld: number, layout: "row" | "col"): Pair {
  return { hi: t[0].cmLoad(c.tB, at, ld, layout), lo: t[1] ? t[1].cmLoad(c.tB, at, ld, layout) : null };
}

export function varPair(c: Common, name: string): VarPair {
  const { k, tA } = c;
  return { hi: k.var(tA, k.cmFill(tA, 0), name), lo: c.split ? k.var(tA, k.cmFill(tA, 0), `${name}l`) : null };
}

export const pairOf = (p: VarPair): Pair => ({ hi: p.hi.get(), lo: p.lo ? p.lo.get() : null });

/**
 * A workgroup's shape: subgroups, rows per block (the dispatch's x: T / rows) and f32 elements of
 * the scratch `st` (the lane-layout probe needs 256; `pt` has 256 halves per subgroup).
 */
export interface BwdGroup { nsg: number; rows: number; stElems: number }

/** Bindings, push constants, ids, the lane-layout probe and the LPT block order of both kernels. */
export function begin(name: string, v: FlashBwdCmVariant, writes: string[], g: BwdGroup = { nsg: NSG, rows: FLASH_BWD_CM_ROWS, stElems: NSG * 256 }) {
  const { D } = v;
  if (D % CM !== 0 || D > 64) throw new Error(`${name}: D=${D} must be a multiple of 16, at most 64`);
  const split = !!v.split;
  const el: HalfType = split ? "bf16" : "f16";
  const tA = coopmat("a", el, CM, CM), tB = coopmat("b", el, CM, CM);
  const tC = coopmat("acc", "f32", CM, CM), tC16 = coopmat("acc", "f16", CM, CM);
  const threads = 32 * g.nsg;
  const k = kernel(name, { workgroup: [threads] });
  const Q = k.buffer("q", el, "read"), K = k.buffer("k", el, "read"), V = k.buffer("v", el, "read");
  const dO = k.buffer("do", el, "read"), L = k.buffer("lse", f32, "read"), Di = k.buffer("di", f32, "read");
  const outs = writes.map((w) => k.buffer(w, split ? f32 : f16, "write"));
  const pc = k.push(faPush(v.layout));
  const st = k.shared("st", f32, g.stElems);
  const pt = k.shared("pt", el, g.nsg * 256);
  const tid = k.let(k.localIndex, "tid");
  const sg = k.let(k.subgroupId, "sg");
  const lane = k.let(k.subgroupInvocation, "lane");
  const nblk = k.let(pc.T.div(g.rows), "nblk");
  // linear workgroup id L = x + y nblk: rank L / BH (0 = the longest block), head L % BH
  const lin = k.let(k.workgroupId.x.add(k.workgroupId.y.mul(nblk)), "lin");
  const bh = k.let(lin.rem(k.numWorkgroups.y), "bh");
  const rank = k.let(lin.div(k.numWorkgroups.y), "rank");
  const hr = headRows(k, pc, bh, D, v.layout, "base");
  const stOff = k.let(sg.mul(256), "stoff");
  const { regP, idxC } = laneLayout(k, { tA, tC, st, pt, tid, threads, forceShared: v.pShared, el });
  const c2 = k.let(v.softCap ? pc.scale.div(pc.cap) : pc.scale.mul(LOG2E), "c2");
  const capL = v.softCap ? k.let(pc.cap.mul(LOG2E), "capl") : null;
  const H = v.layout === "rows" ? rowsPush(pc).H : null;
  let loOff: Expr | null = null, loOffO: Expr | null = null;
  if (split && H) {
    const bt = k.let(k.numWorkgroups.y.div(H).mul(pc.T), "bt");
    loOff = k.let(bt.mul(hr.ld), "looff");
    loOffO = k.let(bt.mul(hr.ldo), "looffo");
  } else if (split) {
    loOff = loOffO = k.let(k.numWorkgroups.y.mul(pc.T).mul(D), "looff");
  }
  const common: Common = {
    k, threads, split, el, tA, tB, tC, tC16, tid, sg, lane, bh, rank, hr, H, st, pt, stOff, regP, idxC, c2, capL, scale: pc.scale, T: pc.T, loOff, loOffO,
  };
  return { common, Q, K, V, dO, L, Di, outs, nblk };
}

/**
 * S = aS · bSᵀ and dP = aDp · bDpᵀ of one 16x16 fragment into `s` and `dp`: the A fragments are
 * the subgroup's register rows (D / 16 of each), the B operands 16 rows of a staged tile (hi and,
 * when split, lo) read column-major from half `at` (row stride LD halves, u32x4 elements).
 */
export function sAndDp(
  c: Common, o: { aS: Pair[]; bS: Shared[]; aDp: Pair[]; bDp: Shared[]; at: Expr; LD: number }, s: Var, dp: Var,
): void {
  const { k, tC } = c;
  let sAcc = k.cmFill(tC, 0), dpAcc = k.cmFill(tC, 0);
  o.aS.forEach((a, d) => {
    const at = o.at.add(d * CM).div(8);
    sAcc = mma(k, a, tileFrag(c, o.bS, at, o.LD / 8, "col"), sAcc);
    dpAcc = mma(k, o.aDp[d], tileFrag(c, o.bDp, at, o.LD / 8, "col"), dpAcc);
  });
  s.set(sAcc);
  dp.set(dpAcc);
  // soft-capped scores in log2 units, before the causal triangle is added
  const capL = c.capL;
  if (capL) elements(k, tC, (i) => s.setAt(i, safeTanh(s.at(i).mul(c.c2)).mul(capL)));
}

/**
 * P and dS of one fragment from S (log2-scaled by c2 inside), dP and the broadcast lse2 / Di, as
 * A operands `pa` (when given) and `dsa`. `s` and `dp` are clobbered.
 */
export function pAndDs(c: Common, s: Var, dp: Var, lse2: Var, di: Var, pa: VarPair | null, dsa: VarPair): void {
  c.k.if(c.regP, () => pAndDsOn(c, true, s, dp, lse2, di, pa, dsa), () => pAndDsOn(c, false, s, dp, lse2, di, pa, dsa));
}

/**
 * pAndDs on one path: element for element in registers (`regs`, where laneLayout found the
 * accumulator and A layouts equal) or through the subgroup's shared tiles.
 */
export function pAndDsOn(c: Common, regs: boolean, s: Var, dp: Var, lse2: Var, di: Var, pa: VarPair | null, dsa: VarPair): void {
  const { k, tA, tC, tC16, pt, stOff } = c;
  const capL = c.capL;
  const element = (i: Expr) => {
    if (capL) {
      const p = k.let(exp2(s.at(i).sub(lse2.at(i))), "p");
      const t = k.let(s.at(i).div(capL), "t");
      const ds = k.let(p.mul(dp.at(i).sub(di.at(i))).mul(lit(f32, 1).sub(t.mul(t).min(1))), "ds");
      return { p, ds };
    }
    const p = k.let(exp2(fma(s.at(i), c.c2, lse2.at(i).neg())), "p");
    const ds = k.let(p.mul(dp.at(i).sub(di.at(i))), "ds");
    return { p, ds };
  };
  if (regs) {
    elements(k, tC, (i) => {
      const { p, ds } = element(i);
      if (pa) splitElement(k, c.el, p, pa.hi, pa.lo, i);
      splitElement(k, c.el, ds, dsa.hi, dsa.lo, i);
    });
    return;
  }
  elements(k, tC, (i) => {
    const { p, ds } = element(i);
    s.setAt(i, p);
    dp.setAt(i, ds);
  });
  const viaShared = (x: Var, into: VarPair) => {
    if (c.split) return accToOperands(k, { tC, tA, el: c.el, st: c.st, pt, off: stOff, lane: c.lane }, x.get(), into.hi, into.lo);
    k.barrier({ scope: "subgroup", mem: ["workgroup"] });
    pt.cmStore(x.get().cast(tC16), stOff, CM, "row");
    k.barrier({ scope: "subgroup", mem: ["workgroup"] });
    into.hi.set(pt.cmLoad(tA, stOff, CM, "row"));
  };
  if (pa) viaShared(s, pa);
  viaShared(dp, dsa);
}

/**
 * Multiplies every element of the accumulators by `scale` and stores them as rows of D (f16, or f32
 * when split) where tensor `src`'s rows are (dq, dk, dv mirror q, k, v).
 */
export function storeScaled(c: Common, accs: Var[], scale: Expr | null, out: Buffer, src: Src, row0: Expr, D: number): void {
  const { k, tC, tC16 } = c;
  const { base, ld } = srcAt(c, src);
  accs.forEach((a, d) => {
    if (scale) elements(k, tC, (i) => a.setAt(i, a.at(i).mul(scale)));
    out.cmStore(c.split ? a.get() : a.get().cast(tC16), base.add(row0.mul(ld)).add(d * CM), ld, "row");
  });
}

/**
 * Register-prefetched staging of two [TR, D] tiles of (a, b) (tensors `which`) at row `row0` of the
 * head: the high parts into `hi`, and when split the low parts (at loOff) into `lo`.
 */
export function pairStager(
  c: Common, srcs: [Buffer, Buffer], which: [Src, Src], hi: [Shared, Shared], lo: [Shared, Shared] | null, D: number, LD: number, TR: number,
) {
  const { k, tid, threads } = c;
  const at = which.map((w) => srcAt(c, w));
  const make = (low: boolean, dsts: [Shared, Shared]) => {
    const bases = at.map((a) => (low && a.lo ? a.base.add(a.lo) : a.base));
    const where = c.H ? { strided: { bases, strides: at.map((a) => a.ld as Expr) } } : { base: bases[0] };
    return tileStager(k, { srcs: srcs.map((b) => b.as("u32", 4)), dsts, ...where, D, ld: LD, rows: TR, tid, threads });
  };
  const all = [make(false, hi), ...(lo && c.loOff ? [make(true, lo)] : [])];
  return { fetch: (row0: Expr) => all.forEach((x) => x.fetch(row0)), put: (slot: Expr) => all.forEach((x) => x.put(slot)) };
}

/** The dQ kernel of the problem options `v`: the straight-line f16 kernel, or the split (x3) kernel for f32. */
export function flashBwdDqCmKernel(v: FlashBwdCmVariant): KernelDesc {
  return v.split ? dqSplitKernel(v) : dqStraightKernel(v);
}

/**
 * f16 (`_w4_s1_sl`): the key tiles before the ones holding the block's diagonal run in a loop with no
 * branch (the P/dS path chosen once outside it, the next tile's loads clamped), the last ROWS / TR
 * tiles (the diagonal) after them behind each fragment's mask test (attention-cm-parts
 * streamStraight, maskedAt "last"): key order is kept, so dQ's f32 sums run in the order of the
 * split kernel's per-fragment stream (bench/FLASH_NOTES.md, the dQ race).
 */
function dqStraightKernel(v: FlashBwdCmVariant): KernelDesc {
  const { D } = v;
  const LD = D + 8, ROWS = FLASH_BWD_CM_ROWS, TR = tileRows(v), TILE = TR * LD;
  const name = `flash_bwd_dq_cm_f16_d${D}_w${NSG}_s1_sl${v.pShared ? "_psh" : ""}${v.softCap ? "_cap" : ""}${layoutTag(v.layout)}`;
  const { common: c, Q, K, V, dO, L, Di, outs: [dQ], nblk } = begin(name, v, ["dq"]);
  const { k, rank } = c;
  const Ks = k.shared("Ks", "u32x4", TILE / 8), Vs = k.shared("Vs", "u32x4", TILE / 8);
  const q0 = k.let(nblk.sub(1).sub(rank).mul(ROWS), "q0");
  const x = dqRegisters(c, { Q, dO, L, Di, q0, D, kTiles: [Ks], vTiles: [Vs] });
  const { fetch, put } = pairStager(c, [K, V], ["k", "v"], [Ks, Vs], null, D, LD, TR);
  // key tiles up to the block's last query; the last ROWS / TR hold its diagonal
  const nt = k.let(q0.div(TR).add(ROWS / TR), "nt");
  streamStraight(k, {
    nt, rows: TR, first: lit("u32", 0), masked: ROWS / TR, maskedAt: "last", stages: 1, regP: c.regP, fetch, put,
    math: (t, slot, regs) => {
      const off = k.let(slot.mul(TILE), "kvoff");
      if (regs === null) {
        const k0 = k.let(t.mul(TR), "k0");
        for (let j = 0; j < TR / CM; j++) dqMaskedFragment(x, k0, off, j);
        return;
      }
      for (let j = 0; j < TR / CM; j++) dqFragment(x, off, j, regs, null);
    },
  });
  storeScaled(c, x.dq, c.scale, dQ, "q", x.rf, D);
  return k.finish();
}

/** f32 (x3, `_s1`): hi/lo tiles of 32 keys, every fragment behind its mask test and the P/dS-path branch. */
function dqSplitKernel(v: FlashBwdCmVariant): KernelDesc {
  const { D } = v;
  const LD = D + 8, ROWS = FLASH_BWD_CM_ROWS, TR = tileRows(v), TILE = TR * LD;
  const { common: c, Q, K, V, dO, L, Di, outs: [dQ], nblk } = begin(`flash_bwd_dq_cm_${kernelSuffix(v)}`, v, ["dq"]);
  const { k, rank } = c;
  const tile = (name: string) => k.shared(name, "u32x4", TILE / 8);
  const Ks = tile("Ks"), Vs = tile("Vs"), KsL = tile("KsL"), VsL = tile("VsL");
  const q0 = k.let(nblk.sub(1).sub(rank).mul(ROWS), "q0");
  const x = dqRegisters(c, { Q, dO, L, Di, q0, D, kTiles: [Ks, KsL], vTiles: [Vs, VsL] });
  const { fetch, put } = pairStager(c, [K, V], ["k", "v"], [Ks, Vs], [KsL, VsL], D, LD, TR);
  // key tiles up to the one holding the block's last query
  const nt = k.let(q0.add(ROWS).div(TR), "nt");
  streamTiles(k, nt, TR, lit("u32", 0), fetch, put, (t, slot) => {
    const k0 = k.let(t.mul(TR), "k0");
    const off = k.let(slot.mul(TILE), "kvoff");
    for (let j = 0; j < TR / CM; j++) dqMaskedFragment(x, k0, off, j);
  });
  storeScaled(c, x.dq, c.scale, dQ, "q", x.rf, D);
  return k.finish();
}

/** A dQ kernel's per-subgroup state (dqRegisters) and the staged K and V tiles (hi and, when split, lo). */
interface DqRegs {
  c: Common;
  LD: number;
  kTiles: Shared[]; vTiles: Shared[];
  /** The subgroup's first query. */
  rf: Expr;
  lse2: Var; di: Var; tri: Var;
  qa: Pair[]; doa: Pair[];
  dq: Var[];
  s: Var; dp: Var; dsa: VarPair;
}

/**
 * The subgroup's 16 queries from `q0` + 16 sg: lse (log2 units) and Di as broadcast matrices
 * (element (r, c) = query r's value; each subgroup writes 16x16 tiles into its 256 floats of `st`),
 * built once, then the diagonal's triangle, the Q and dO fragments and zeroed dQ accumulators.
 */
function dqRegisters(
  c: Common, o: { Q: Buffer; dO: Buffer; L: Buffer; Di: Buffer; q0: Expr; D: number; kTiles: Shared[]; vTiles: Shared[] },
): DqRegs {
  const { k, tC, sg, lane, bh, st, stOff } = c;
  const { q0, D } = o;
  const rf = k.let(q0.add(sg.mul(CM)), "rf");
  const r = k.let(lane.shr(1), "r");
  const rowOff = k.let(stOff.add(r.mul(CM)).add(lane.band(1).mul(8)), "rowoff");
  const row = k.let(bh.mul(c.T).add(rf).add(r), "qrow");
  const diRow = c.H ? k.let(diAt(c, rf.add(r), row), "dirow") : row;
  const broadcast = (value: Expr, name: string) => {
    k.barrier({ scope: "subgroup", mem: ["workgroup"] });
    for (let e = 0; e < 8; e++) st.store(rowOff.add(e), value);
    k.barrier({ scope: "subgroup", mem: ["workgroup"] });
    return k.var(tC, st.cmLoad(tC, stOff, CM, "row"), name);
  };
  const lse2 = broadcast(o.L.load(row).mul(LOG2E), "lse2");
  const di = broadcast(o.Di.load(diRow), "dib");
  const tri = causalTriangle(k, tC, c.idxC, "above");
  const qa = rowFrags(c, o.Q, "q", rf, D, "qa");
  const doa = rowFrags(c, o.dO, "o", rf, D, "doa");
  const dq = Array.from({ length: D / CM }, (_, d) => k.var(tC, k.cmFill(tC, 0), `dq${d}`));
  const s = k.var(tC, k.cmFill(tC, 0), "s"), dp = k.var(tC, k.cmFill(tC, 0), "dp");
  const dsa = varPair(c, "dsa");
  return { c, LD: D + 8, kTiles: o.kTiles, vTiles: o.vTiles, rf, lse2, di, tri, qa, doa, dq, s, dp, dsa };
}

/**
 * Key fragment j of the tile at half `off` (keys from `k0` + 16 j) behind its mask test: skipped
 * when every key comes after the subgroup's queries, the triangle added on the diagonal.
 */
function dqMaskedFragment(x: DqRegs, k0: Expr, off: Expr, j: number): void {
  const { k } = x.c;
  const kf = k.let(k0.add(j * CM), "kf");
  // keys kf..kf+15 against queries rf..rf+15: all masked when kf > rf
  k.if(kf.le(x.rf), () => dqFragment(x, off, j, null, () => k.if(kf.eq(x.rf), () => x.s.set(x.s.get().add(x.tri.get())))));
}

/**
 * Key fragment j of the tile at half `off`: S = Q K^T and dP = dO V^T, the diagonal hook, dS (on
 * path `regs`, or behind the laneLayout branch when null), dQ += dS K.
 */
function dqFragment(x: DqRegs, off: Expr, j: number, regs: boolean | null, diag: (() => void) | null): void {
  const { c, LD } = x;
  const { k } = c;
  sAndDp(c, { aS: x.qa, bS: x.kTiles, aDp: x.doa, bDp: x.vTiles, at: off.add(j * CM * LD), LD }, x.s, x.dp);
  if (diag) diag();
  if (regs === null) pAndDs(c, x.s, x.dp, x.lse2, x.di, null, x.dsa);
  else pAndDsOn(c, regs, x.s, x.dp, x.lse2, x.di, null, x.dsa);
  for (let dn = 0; dn < x.dq.length; dn++) {
    const kb = tileFrag(c, x.kTiles, off.add(j * CM * LD + dn * CM).div(8), LD / 8, "row");
    x.dq[dn].set(mma(k, pairOf(x.dsa), kb, x.dq[dn].get()));
  }
}
