// The dK/dV kernel of the causal flash attention backward on KHR cooperative matrices
// (flash_bwd_dkdv_cm), in four forms (two f16, two split for f32), and which one a problem runs
// (pickFlashBwdDkDv). Contract: attention-cm-bwd.ts's header (bindings q, k, v, dO, lse, di (read),
// dk, dv (write); push FA_PUSH or FA_ROWS_PUSH; D % 16 == 0, D <= 64). The forms of one dtype run
// the same products in the same order with the same numerics, so their dK and dV are the same bits.
//
// Dispatch: [T / rows, BH], 32 nsg threads, rows = 16 nsg keys per workgroup. Subgroup s owns keys
// k0 + 16 s .. + 15 (K and V fragments, dK and dV accumulators in registers); Q and dO stream
// through shared memory in TR-row tiles from the block's first key on. Longest key blocks first
// across all heads.
//
// The forms, in the order pickFlashBwdDkDv tries them:
// - w8 (f16, T % 128 == 0): 8 subgroups, so 128 keys share each staged 64-row Q/dO tile (global
//   loads, shared stores and barriers per product halve, and so do the prefetch registers per
//   thread); two stages: the tile loaded into registers at the top of iteration t is stored into the
//   other stage halfway through t's math, and one barrier ends each tile; lse2 and Di of a tile's
//   queries are 2 x 64 floats per stage, read as broadcast matrices (element (r, c) = the value of
//   query c) by row-major coopmat loads with stride 0, as the matmul epilogue loads its bias.
// - sl (f16, T % 64 == 0): 4 subgroups, one stage with a register prefetch (two barriers per tile),
//   lse2/Di written as 16x16 tiles (every value 16 times).
// - x3w8 (f32 tensors, the split form of the header, T % 128 == 0): 8 subgroups like w8, one stage
//   of 32-row hi/lo tiles (two stages of four hi/lo tiles would pass 48 KiB), lse2/Di as w8 reads them.
// - x3sl (f32 tensors, T % 64 == 0): sl's shape on 32-row hi/lo tiles.
//   Every form runs straight-line tiles: only the first 16 nsg / TR tiles of a key block hold its
//   diagonal and need masks; they run first, each fragment behind its mask test and the P/dS-path
//   branch. The rest run in a loop whose body has no branch (the P/dS path chosen once outside it,
//   the next tile's loads clamped to the last tile instead of guarded), so the driver can overlap a
//   fragment's S/dP products with the previous fragment's exp2 and dV/dK products: at over 200
//   registers a thread an SM holds 8 warps, so the kernel needs that parallelism inside the warp.
// H200, causal f16, BH = 192, T = 1024, D = 64 (bench/FLASH_NOTES.md, session 21): w8 0.260 ms in
// the [BH, T, D] layout and 0.332 in the trainer's rows layout, sl 0.361 / 0.454, the per-fragment
// form they replaced 0.435 / 0.522; the two-stage 4-subgroup forms lost (git history). f32 (session
// 25, rows): x3w8 0.775 ms, x3sl 1.035, the per-fragment split form they replaced 1.062.
import { f32, lit, type Buffer, type Expr, type KernelDesc, type Shared, type Var } from "../ir/index.js";
import { layoutTag } from "./attention.js";
import type { FlashDevice } from "./attention-variants.js";
import { CM, causalTriangle, splitMma as mma, streamStraight, type Pair } from "./attention-cm-parts.js";
import {
  LOG2E, begin, diAt, pAndDs, pAndDsOn, pairOf, pairStager, rowFrags, sAndDp, storeScaled, tileFrag, tileRows, varPair,
  type Common, type FlashBwdCmVariant, type VarPair,
} from "./attention-cm-bwd.js";

export type FlashBwdDkDvForm = "w8" | "sl" | "x3w8" | "x3sl";

/** How a form lays out its work. */
interface Shape {
  /** Subgroups of 16 keys. */
  readonly nsg: 4 | 8;
  /** Shared stages of the Q/dO tiles and row values. */
  readonly stages: 1 | 2;
  /** lse2 / Di as 16x16 tiles written per tile, or 2 x TR floats read with stride 0. */
  readonly rowv: "tiles" | "stride0";
  /** bf16 hi/lo operands (f32 tensors): 32-row tiles. */
  readonly split: boolean;
}

const SHAPES: Record<FlashBwdDkDvForm, Shape> = {
  w8: { nsg: 8, stages: 2, rowv: "stride0", split: false },
  sl: { nsg: 4, stages: 1, rowv: "tiles", split: false },
  x3w8: { nsg: 8, stages: 1, rowv: "stride0", split: true },
  x3sl: { nsg: 4, stages: 1, rowv: "tiles", split: true },
};

/** The forms, in the order pickFlashBwdDkDv tries them. */
export const FLASH_BWD_DKDV: readonly FlashBwdDkDvForm[] = ["w8", "sl", "x3w8", "x3sl"];

/** Whether the form runs on f32 tensors through bf16 hi/lo operands. */
export function flashBwdDkDvSplit(form: FlashBwdDkDvForm): boolean {
  return SHAPES[form].split;
}

/** The kernel's options (the form says whether it is split). */
export interface FlashBwdDkDvVariant extends Omit<FlashBwdCmVariant, "split"> {
  readonly form: FlashBwdDkDvForm;
}

/** Keys per workgroup: dispatch [T / rows, BH, 1]. */
export function flashBwdDkDvRows(form: FlashBwdDkDvForm): number {
  return CM * SHAPES[form].nsg;
}

/** f32 row values (lse2 and Di of one tile's queries) per stage. */
function rowValueFloats(s: Shape): number {
  return s.rowv === "tiles" ? 2 * (tileRows(s) / CM) * 256 : 2 * tileRows(s);
}

/** f32 scratch: the lane-layout probe, and when split a tile per subgroup (accToOperands). */
function scratchFloats(s: Shape): number {
  return (s.split ? s.nsg : 1) * 256;
}

/** Shared bytes: the Q/dO stages (hi and lo when split) with their row values, the f32 scratch and the per-subgroup P/dS tiles. */
export function flashBwdDkDvSharedBytes(v: Pick<FlashBwdDkDvVariant, "D" | "form">): number {
  const s = SHAPES[v.form], parts = s.split ? 2 : 1;
  return s.stages * (parts * 2 * tileRows(s) * (v.D + 8) * 2 + rowValueFloats(s) * 4) + scratchFloats(s) * 4 + s.nsg * 256 * 2;
}

/** Whether the form serves the problem on this device: f16 (f32 for the x3 forms), T % rows == 0, D % 16 == 0 up to 64, its shared memory. */
export function flashBwdDkDvApplies(dev: FlashDevice, form: FlashBwdDkDvForm, dtype: string, T: number, D: number): boolean {
  const s = SHAPES[form];
  return !!dev.coopMatSupported && dev.subgroupSize === 32 && dtype === (s.split ? "f32" : "f16") && T % flashBwdDkDvRows(form) === 0 &&
    D % CM === 0 && D <= 64 && (dev.maxSharedMemoryBytes ?? 49152) >= flashBwdDkDvSharedBytes({ D, form });
}

/** The first form of FLASH_BWD_DKDV that serves the problem, or null. */
export function pickFlashBwdDkDv(dev: FlashDevice, dtype: string, T: number, D: number): FlashBwdDkDvForm | null {
  return FLASH_BWD_DKDV.find((f) => flashBwdDkDvApplies(dev, f, dtype, T, D)) ?? null;
}

function kernelName(v: FlashBwdDkDvVariant, s: Shape): string {
  const tag = `w${s.nsg}_s${s.stages}${s.rowv === "stride0" ? "_rv0" : ""}_sl`;
  return `flash_bwd_dkdv_cm_${s.split ? "x3" : "f16"}_d${v.D}_${tag}${v.pShared ? "_psh" : ""}${v.softCap ? "_cap" : ""}${layoutTag(v.layout)}`;
}

/** What the pieces of one kernel share. */
interface Kv {
  c: Common;
  shape: Shape;
  D: number; LD: number; TR: number; NF: number; TILE: number; RV: number;
  /** Q and dO tiles (hi, and lo when split) and the row values, every stage. */
  qTiles: Shared[]; doTiles: Shared[]; rv: Shared;
  k0: Expr; kf: Expr;
  tri: Var;
  ka: Pair[]; va: Pair[];
  dk: Var[]; dv: Var[];
  s: Var; dp: Var; pa: VarPair; dsa: VarPair;
}

export function flashBwdDkDvCmKernel(v: FlashBwdDkDvVariant): KernelDesc {
  const shape = SHAPES[v.form];
  const { D } = v;
  const nsg = shape.nsg, ROWS = CM * nsg, TR = tileRows(shape), LD = D + 8, TILE = TR * LD, RV = rowValueFloats(shape);
  const { common: c, Q, K, V, dO, L, Di, outs: [dK, dV], nblk } = begin(
    kernelName(v, shape), { ...v, split: shape.split }, ["dk", "dv"], { nsg, rows: ROWS, stElems: scratchFloats(shape) },
  );
  const { k, tC, sg, rank } = c;
  const tile = (name: string) => k.shared(name, "u32x4", (shape.stages * TILE) / 8);
  const hi: [Shared, Shared] = [tile("Qs"), tile("dOs")];
  const lo: [Shared, Shared] | null = shape.split ? [tile("QsL"), tile("dOsL")] : null;
  // row values: [lse2 | Di] of the tile's queries, per stage
  const rv = k.shared("cols", f32, shape.stages * RV);
  const k0 = k.let(rank.mul(ROWS), "k0");
  const kf = k.let(k0.add(sg.mul(CM)), "kf");
  const tri = causalTriangle(k, tC, c.idxC, "below");
  const ka = rowFrags(c, K, "k", kf, D, "ka");
  const va = rowFrags(c, V, "v", kf, D, "va");
  const acc = (n: string) => Array.from({ length: D / CM }, (_, d) => k.var(tC, k.cmFill(tC, 0), `${n}${d}`));
  const dk = acc("dk"), dv = acc("dv");
  const s = k.var(tC, k.cmFill(tC, 0), "s"), dp = k.var(tC, k.cmFill(tC, 0), "dp");
  const pa = varPair(c, "pa"), dsa = varPair(c, "dsa");
  const x: Kv = {
    c, shape, D, LD, TR, NF: TR / CM, TILE, RV, qTiles: lo ? [hi[0], lo[0]] : [hi[0]], doTiles: lo ? [hi[1], lo[1]] : [hi[1]], rv,
    k0, kf, tri, ka, va, dk, dv, s, dp, pa, dsa,
  };

  const { fetch, put } = staging(x, [Q, dO, L, Di], hi, lo);
  // query tiles from the block's first key on
  const nt = k.let(nblk.sub(rank).mul(ROWS / TR), "nt");
  streamStraight(k, {
    nt, rows: TR, first: k0, masked: ROWS / TR, maskedAt: "first", stages: shape.stages, regP: c.regP, fetch, put,
    math: (t, slot, regs, mid) => tileMath(x, t, slot, regs, mid),
  });
  storeScaled(c, dk, c.scale, dK, "k", kf, D);
  storeScaled(c, dv, null, dV, "v", kf, D);
  return k.finish();
}

/**
 * The next tile's loads into registers (`fetch`, at its first query) and their stores into a stage
 * (`put`): Q and dO rows (128-bit copies, hi and lo when split), and each thread t < TR carries
 * lse2 of query q0 + t, thread TR + t its Di (threads >= 2 TR).
 */
function staging(x: Kv, [Q, dO, L, Di]: Buffer[], hi: [Shared, Shared], lo: [Shared, Shared] | null) {
  const { c, rv, RV, TR, NF } = x;
  const { k, tid, bh, threads } = c;
  const tiles = pairStager(c, [Q, dO], ["q", "o"], hi, lo, x.D, x.LD, TR);
  const colVal = k.var(f32, lit(f32, 0), "colv");
  const which = k.let(tid.div(TR), "which");
  const cq = k.let(tid.rem(TR), "cq");
  const carries = (body: () => void) => (threads === 2 * TR ? body() : k.if(which.lt(2), body));
  const qrow0 = k.let(bh.mul(c.T), "qrow0");
  const fetch = (q0: Expr) => {
    tiles.fetch(q0);
    const at = qrow0.add(q0).add(cq);
    carries(() => k.if(which.eq(0), () => colVal.set(L.load(at).mul(LOG2E)), () => colVal.set(Di.load(diAt(c, q0.add(cq), at)))));
  };
  const put = (slot: Expr) => {
    tiles.put(slot);
    carries(() => {
      if (x.shape.rowv === "stride0") return rv.store(slot.mul(RV).add(tid), colVal.get());
      // [lse2 | Di][fragment][r][c] = value of query 16 fragment + c
      const at0 = k.let(slot.mul(RV).add(which.mul(NF * 256)).add(cq.div(CM).mul(256)).add(cq.rem(CM)), "colat");
      for (let rr = 0; rr < CM; rr++) rv.store(at0.add(rr * CM), colVal.get());
    });
  };
  return { fetch, put };
}

/**
 * One tile's math on stage `slot` (queries k0 + TR t ..). `regs` null: each fragment behind its mask
 * test (skipped wholly above the diagonal, the triangle added on it) and the P/dS-path branch; else
 * straight-line on that P/dS path, with `mid` (the next tile's shared stores) halfway.
 */
function tileMath(x: Kv, t: Expr, slot: Expr, regs: boolean | null, mid: (() => void) | null): void {
  const { k } = x.c;
  const q0 = regs === null ? k.let(x.k0.add(t.mul(x.TR)), "q0") : null;
  const off = k.let(slot.mul(x.TILE), "qoff");
  for (let j = 0; j < x.NF; j++) {
    if (!q0) {
      if (mid && j === x.NF / 2) mid();
      fragment(x, off, slot, j, regs, null);
      continue;
    }
    const qj = k.let(q0.add(j * CM), "qj");
    // keys kf..kf+15 against queries qj..qj+15: all masked when kf > qj
    k.if(x.kf.le(qj), () => fragment(x, off, slot, j, null, () => k.if(x.kf.eq(qj), () => x.s.set(x.s.get().add(x.tri.get())))));
  }
}

/**
 * Query fragment j of the tile at half `off` of stage `slot`: S^T = K Q^T and dP^T = V dO^T, the
 * diagonal hook, P^T and dS^T (on path `regs`, or behind the laneLayout branch when null), then
 * dV += P^T dO and dK += dS^T Q.
 */
function fragment(x: Kv, off: Expr, slot: Expr, j: number, regs: boolean | null, diag: (() => void) | null): void {
  const { c, LD } = x;
  const { k } = c;
  sAndDp(c, { aS: x.ka, bS: x.qTiles, aDp: x.va, bDp: x.doTiles, at: off.add(j * CM * LD), LD }, x.s, x.dp);
  if (diag) diag();
  const { lse2, di } = rowValues(x, slot, j);
  if (regs === null) pAndDs(c, x.s, x.dp, lse2, di, x.pa, x.dsa);
  else pAndDsOn(c, regs, x.s, x.dp, lse2, di, x.pa, x.dsa);
  for (let dn = 0; dn < x.dk.length; dn++) {
    const at = off.add(j * CM * LD + dn * CM).div(8);
    x.dv[dn].set(mma(k, pairOf(x.pa), tileFrag(c, x.doTiles, at, LD / 8, "row"), x.dv[dn].get()));
    x.dk[dn].set(mma(k, pairOf(x.dsa), tileFrag(c, x.qTiles, at, LD / 8, "row"), x.dk[dn].get()));
  }
}

/** lse2 and Di of fragment j's queries at stage `slot` as broadcast matrices (element (r, c) = query c's value). */
function rowValues(x: Kv, slot: Expr, j: number): { lse2: Var; di: Var } {
  const { c, rv, RV } = x;
  const { k, tC } = c;
  if (x.shape.rowv === "stride0") {
    const base = slot.mul(RV);
    return {
      lse2: k.var(tC, rv.cmLoad(tC, base.add(j * CM), 0, "row"), "lsec"),
      di: k.var(tC, rv.cmLoad(tC, base.add(x.TR + j * CM), 0, "row"), "dic"),
    };
  }
  const at = slot.mul(RV).add(j * 256);
  return {
    lse2: k.var(tC, rv.cmLoad(tC, at, CM, "row"), "lsec"),
    di: k.var(tC, rv.cmLoad(tC, at.add(x.NF * 256), CM, "row"), "dic"),
  };
}
