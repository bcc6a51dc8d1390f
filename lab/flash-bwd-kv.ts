// Candidate dK/dV kernels of the causal flash attention backward on KHR cooperative matrices
// (issue 27). They keep flash_bwd_dkdv_cm's contract (attention-cm-bwd.ts header: bindings q, k, v,
// dO, lse, di (read), dk, dv (write); push FA_PUSH or FA_ROWS_PUSH; f16 tensors, D % 16 == 0,
// D <= 64; the same products and numerics) and lay the work out for more parallelism per warp.
// None is shipped: lab/flash-bwd-variants.ts lists the candidates bench/flash-bwd.ts races against
// the shipped kernel.
//
// Dispatch: [T / (16 nsg), BH], 32 nsg threads. Subgroup s owns keys k0 + 16 s .. + 15 (K and V
// fragments, dK and dV accumulators in registers, as shipped); Q and dO stream through shared
// memory in 64-row tiles from the block's first key on. Longest key blocks first across all heads.
//
// How the candidates differ from the shipped kernel (FlashBwdDkDvShape):
// - Straight-line tiles (all of them). The shipped kernel wraps each 16-query fragment of a tile in
//   a branch (skipped when wholly masked, triangle added on the diagonal), and converts P and dS
//   behind a branch on the lane-layout probe, so each fragment's products, exp2 and conversions
//   sit in basic blocks of their own. Only the first 16 nsg / 64 tiles of a block (those holding
//   its diagonal) need the masks: they run first, as shipped; the remaining tiles run in a loop
//   whose body has no branch (no mask test, no triangle, the register or the shared P/dS path
//   chosen once, outside the loop; the next tile's loads clamped to the last tile instead of
//   guarded). The driver can then overlap one fragment's S/dP products with the previous one's
//   exp2 and dV/dK products: with ~210 registers only 8 warps fit an SM, so the kernel needs that
//   parallelism inside the warp.
// - stages 2: Q, dO and the row values in two shared stages. The tile loaded into registers at the
//   top of iteration t is stored into the other stage halfway through t's math (the prefetch
//   registers live half as long) and one barrier ends each tile (one stage: two).
// - rowv "stride0": lse2 and Di of a tile's 64 queries are 128 floats per stage, read as broadcast
//   matrices (element (r, c) = the value of query c) by row-major coopmat loads with stride 0, as
//   the matmul epilogue loads its bias. The shipped form ("tiles") writes every value 16 times per
//   tile (8 KiB, 16 stores per thread) to load 16x16 tiles of them.
// - pairs: the S and dP products of two query fragments are issued together (four independent
//   accumulator chains instead of two), then both fragments' P/dS, then their dV/dK products.
// - nsg 8: 128 keys per workgroup (256 threads): each staged Q/dO tile feeds 8 subgroups, so the
//   global loads, shared stores and barriers per MMA halve, as do the prefetch registers per
//   thread (16 instead of 32); T % 128 == 0. Fragment loads per MMA are unchanged.
// Not here: 32 keys per subgroup. Its K/V fragments (64 registers) and dK/dV accumulators (128) leave
// no room under 255 for S, dP, P, dS and the prefetch (the forward's two-block form already spilled
// at 255, bench/FLASH_NOTES.md); at D = 64 it needs K/V in shared memory, which does not fit 48 KiB
// beside the Q/dO tiles.
import { f32, lit, type Buffer, type Expr, type KernelDesc, type Shared, type Var } from "../ts/ir/index.js";
import { layoutTag } from "../ts/kernels/attention.js";
import { CM, causalTriangle, elements, splitMma as mma } from "../ts/kernels/attention-cm-parts.js";
import {
  LOG2E, begin, diAt, pAndDs, pAndDsOn, pairOf, pairStager, rowFrags, storeScaled, tileFrag, varPair,
  type Common, type FlashBwdCmVariant, type VarPair,
} from "../ts/kernels/attention-cm-bwd.js";
import { safeTanh } from "../ts/kernels/common.js";

/** Query rows per streamed tile. */
const TR = 64;
const NF = TR / CM;

export interface FlashBwdDkDvShape {
  /** Subgroups of 16 keys: 64 or 128 keys per workgroup. */
  readonly nsg: 4 | 8;
  /** Shared stages of the Q/dO tiles and row values. */
  readonly stages: 1 | 2;
  /** lse2 / Di as 16x16 tiles written per tile ("tiles", as shipped) or 2 x 64 floats read with stride 0. */
  readonly rowv: "tiles" | "stride0";
  /** S/dP of two query fragments issued together. */
  readonly pairs: boolean;
}

/** A candidate: the shipped kernel's options (f16 only: no split) and its shape. */
export interface FlashBwdDkDvVariant extends Omit<FlashBwdCmVariant, "split"> {
  readonly shape: FlashBwdDkDvShape;
}

/** Keys per workgroup: dispatch [T / rows, BH, 1]. */
export function flashBwdDkDvRows(s: Pick<FlashBwdDkDvShape, "nsg">): number {
  return CM * s.nsg;
}

/** f32 row values (lse2 and Di of one tile's queries) per stage. */
function rowValueFloats(s: FlashBwdDkDvShape): number {
  return s.rowv === "tiles" ? 2 * NF * 256 : 2 * TR;
}

/** Shared bytes: the Q/dO stages, the row values, the lane-layout probe (256 f32) and the per-subgroup P/dS tiles. */
export function flashBwdDkDvSharedBytes(v: Pick<FlashBwdDkDvVariant, "D" | "shape">): number {
  const s = v.shape;
  return s.stages * (2 * TR * (v.D + 8) * 2 + rowValueFloats(s) * 4) + 256 * 4 + s.nsg * 256 * 2;
}

/** Whether the candidate serves the problem on this device (as flashBwdCmApplies, and T % rows == 0). */
export function flashBwdDkDvApplies(
  info: { coopMatSupported?: boolean; subgroupSize: number; maxSharedMemoryBytes?: number },
  v: Pick<FlashBwdDkDvVariant, "D" | "shape">, dtype: string, T: number,
): boolean {
  return !!info.coopMatSupported && info.subgroupSize === 32 && dtype === "f16" && T % flashBwdDkDvRows(v.shape) === 0 &&
    v.D % CM === 0 && v.D <= 64 && (info.maxSharedMemoryBytes ?? 49152) >= flashBwdDkDvSharedBytes(v);
}

/** The shape's name tag: w(subgroups) s(stages), _rv0 stride-0 row values, _p2 pairs, _sl straight-line tiles. */
export function flashBwdDkDvTag(s: FlashBwdDkDvShape): string {
  return `w${s.nsg}_s${s.stages}${s.rowv === "stride0" ? "_rv0" : ""}${s.pairs ? "_p2" : ""}_sl`;
}

interface Kv {
  c: Common;
  s: FlashBwdDkDvShape;
  D: number; LD: number; TILE: number; RV: number;
  Qs: Shared; dOs: Shared; rv: Shared;
  k0: Expr; kf: Expr;
  tri: Var;
  ka: ReturnType<typeof rowFrags>; va: ReturnType<typeof rowFrags>;
  dk: Var[]; dv: Var[];
  /** S, dP and the P / dS operands of each fragment of a group (two with pairs). */
  sv: Var[]; dpv: Var[]; pa: VarPair[]; dsa: VarPair[];
}

export function flashBwdDkDvCmSlKernel(v: FlashBwdDkDvVariant): KernelDesc {
  const { D, shape: s } = v;
  if ((v as FlashBwdCmVariant).split) throw new Error("flashBwdDkDvCmSlKernel: f16 only (no split form)");
  const nsg = s.nsg, ROWS = flashBwdDkDvRows(s), THREADS = 32 * nsg, LD = D + 8, TILE = TR * LD, RV = rowValueFloats(s);
  const name = `flash_bwd_dkdv_cm_f16_d${D}_${flashBwdDkDvTag(s)}${v.pShared ? "_psh" : ""}${v.softCap ? "_cap" : ""}${layoutTag(v.layout)}`;
  const { common: c, Q, K, V, dO, L, Di, outs: [dK, dV], nblk } = begin(name, v, ["dk", "dv"], { nsg, rows: ROWS, stElems: 256 });
  const { k, tC, sg, rank } = c;
  const Qs = k.shared("Qs", "u32x4", (s.stages * TILE) / 8), dOs = k.shared("dOs", "u32x4", (s.stages * TILE) / 8);
  const rv = k.shared("rowv", f32, s.stages * RV);
  const k0 = k.let(rank.mul(ROWS), "k0");
  const kf = k.let(k0.add(sg.mul(CM)), "kf");
  const tri = causalTriangle(k, tC, c.idxC, "below");
  const ka = rowFrags(c, K, "k", kf, D, "ka");
  const va = rowFrags(c, V, "v", kf, D, "va");
  const acc = (n: string) => Array.from({ length: D / CM }, (_, d) => k.var(tC, k.cmFill(tC, 0), `${n}${d}`));
  const dk = acc("dk"), dv = acc("dv");
  const G = s.pairs ? 2 : 1;
  const frag = (n: string) => Array.from({ length: G }, (_, g) => k.var(tC, k.cmFill(tC, 0), `${n}${g}`));
  const sv = frag("s"), dpv = frag("dp");
  const pa = Array.from({ length: G }, (_, g) => varPair(c, `pa${g}`)), dsa = Array.from({ length: G }, (_, g) => varPair(c, `dsa${g}`));
  const x: Kv = { c, s, D, LD, TILE, RV, Qs, dOs, rv, k0, kf, tri, ka, va, dk, dv, sv, dpv, pa, dsa };

  const { fetch, put } = staging(x, [Q, dO, L, Di], THREADS);
  stream(x, k.let(nblk.sub(rank).mul(ROWS / TR), "nt"), ROWS / TR, fetch, put);
  storeScaled(c, dk, c.scale, dK, "k", kf, D);
  storeScaled(c, dv, null, dV, "v", kf, D);
  return k.finish();
}

/**
 * The next tile's loads into registers (`fetch`, at its first query) and their stores into a stage
 * (`put`): Q and dO rows (128-bit copies), and each thread t < 64 carries lse2 of query q0 + t,
 * thread 64 + t its Di (threads >= 128).
 */
function staging(x: Kv, [Q, dO, L, Di]: Buffer[], threads: number): { fetch: (q0: Expr) => void; put: (slot: Expr) => void } {
  const { c, s, rv, RV } = x;
  const { k, tid, bh } = c;
  const tiles = pairStager(c, [Q, dO], ["q", "o"], [x.Qs, x.dOs], null, x.D, x.LD, TR);
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
      if (s.rowv === "stride0") return rv.store(slot.mul(RV).add(tid), colVal.get());
      // [lse2 | Di][fragment][r][c] = value of query 16 fragment + c
      const at0 = k.let(slot.mul(RV).add(which.mul(NF * 256)).add(cq.div(CM).mul(256)).add(cq.rem(CM)), "colat");
      for (let rr = 0; rr < CM; rr++) rv.store(at0.add(rr * CM), colVal.get());
    });
  };
  return { fetch, put };
}

/**
 * The tile loop over `nt` tiles from the block's first key: the first `P` (holding its diagonal)
 * with masks, then the rest straight-line in one loop per P/dS path. One stage: each iteration
 * stores the tile its predecessor loaded, then a barrier; two stages: the next tile is stored into
 * the other stage halfway through the math, and one barrier ends the tile. The next tile's loads
 * are clamped to the last tile (which the last iteration loads again) instead of guarded.
 */
function stream(x: Kv, nt: Expr, P: number, fetch: (q0: Expr) => void, put: (slot: Expr) => void): void {
  const { k } = x.c;
  const last = k.let(nt.sub(1), "last");
  const fetchNext = (t: Expr) => fetch(x.k0.add(t.add(1).min(last).mul(TR)));
  const u0 = lit("u32", 0);
  const two = x.s.stages === 2;
  const slotOf = (t: Expr) => (two ? k.let(t.band(1), "slot") : u0);
  fetch(x.k0);
  put(u0);
  k.barrier();
  k.for(u0, lit("u32", P), (t) => {
    if (!two && P > 1) {
      k.if(t.gt(0), () => {
        put(u0);
        k.barrier();
      });
    }
    const slot = slotOf(t);
    fetchNext(t);
    tileMath(x, t, slot, null, null);
    if (two) put(slot.bxor(1));
    k.barrier();
  });
  const rest = (regs: boolean) => {
    k.for(lit("u32", P), nt, (t) => {
      if (!two) {
        put(u0);
        k.barrier();
      }
      const slot = slotOf(t);
      fetchNext(t);
      tileMath(x, t, slot, regs, two ? () => put(slot.bxor(1)) : null);
      k.barrier();
    });
  };
  k.if(x.c.regP, () => rest(true), () => rest(false));
}

/**
 * One tile's math on stage `slot` (queries k0 + 64 t ..). `regs` null: a diagonal tile, each
 * fragment behind its mask test (as shipped); else straight-line on that P/dS path, with `mid`
 * (the next tile's shared stores) halfway.
 */
function tileMath(x: Kv, t: Expr, slot: Expr, regs: boolean | null, mid: (() => void) | null): void {
  const { c, s } = x;
  const { k } = c;
  const q0 = k.let(x.k0.add(t.mul(TR)), "q0");
  const off = k.let(slot.mul(x.TILE), "qoff");
  if (regs === null) {
    for (let j = 0; j < NF; j++) {
      const qj = k.let(q0.add(j * CM), "qj");
      // keys kf..kf+15 against queries qj..qj+15: all masked when kf > qj
      k.if(x.kf.le(qj), () => fragments(x, off, slot, [j], null, () => k.if(x.kf.eq(qj), () => x.sv[0].set(x.sv[0].get().add(x.tri.get())))));
    }
    return;
  }
  const groups = s.pairs ? [[0, 1], [2, 3]] : [[0], [1], [2], [3]];
  groups.forEach((js, gi) => {
    if (mid && gi === groups.length / 2) mid();
    fragments(x, off, slot, js, regs, null);
  });
}

/**
 * Query fragments `js` of the tile at half `off` of stage `slot`: S^T = K Q^T and dP^T = V dO^T
 * (with two fragments, their four chains issued interleaved), the diagonal hook, P^T and dS^T (on path `regs`, or behind the
 * laneLayout branch when null), then dV += P^T dO and dK += dS^T Q.
 */
function fragments(x: Kv, off: Expr, slot: Expr, js: number[], regs: boolean | null, diag: (() => void) | null): void {
  const { c, LD } = x;
  const { k, tC } = c;
  const Q = [x.Qs], O = [x.dOs];
  const sAcc = js.map(() => k.cmFill(tC, 0)), dpAcc = js.map(() => k.cmFill(tC, 0));
  x.ka.forEach((a, d) => {
    js.forEach((j, g) => {
      const at = off.add(j * CM * LD + d * CM).div(8);
      const next = { s: mma(k, a, tileFrag(c, Q, at, LD / 8, "col"), sAcc[g]), dp: mma(k, x.va[d], tileFrag(c, O, at, LD / 8, "col"), dpAcc[g]) };
      // with pairs, each step is its own value so the chains are issued interleaved
      sAcc[g] = js.length > 1 ? k.let(next.s, "sacc") : next.s;
      dpAcc[g] = js.length > 1 ? k.let(next.dp, "dpacc") : next.dp;
    });
  });
  js.forEach((_, g) => {
    x.sv[g].set(sAcc[g]);
    x.dpv[g].set(dpAcc[g]);
    const capL = c.capL;
    if (capL) elements(k, tC, (i) => x.sv[g].setAt(i, safeTanh(x.sv[g].at(i).mul(c.c2)).mul(capL)));
  });
  if (diag) diag();
  js.forEach((j, g) => {
    const { lse2, di } = rowValues(x, slot, j);
    if (regs === null) pAndDs(c, x.sv[g], x.dpv[g], lse2, di, x.pa[g], x.dsa[g]);
    else pAndDsOn(c, regs, x.sv[g], x.dpv[g], lse2, di, x.pa[g], x.dsa[g]);
  });
  js.forEach((j, g) => {
    for (let dn = 0; dn < x.dk.length; dn++) {
      const at = off.add(j * CM * LD + dn * CM).div(8);
      x.dv[dn].set(mma(k, pairOf(x.pa[g]), tileFrag(c, O, at, LD / 8, "row"), x.dv[dn].get()));
      x.dk[dn].set(mma(k, pairOf(x.dsa[g]), tileFrag(c, Q, at, LD / 8, "row"), x.dk[dn].get()));
    }
  });
}

/** lse2 and Di of fragment j's queries at stage `slot` as broadcast matrices (element (r, c) = query c's value). */
function rowValues(x: Kv, slot: Expr, j: number): { lse2: Var; di: Var } {
  const { c, rv, RV } = x;
  const { k, tC } = c;
  const base = slot.mul(RV);
  if (x.s.rowv === "stride0") {
    return {
      lse2: k.var(tC, rv.cmLoad(tC, base.add(j * CM), 0, "row"), "lsec"),
      di: k.var(tC, rv.cmLoad(tC, base.add(TR + j * CM), 0, "row"), "dic"),
    };
  }
  return {
    lse2: k.var(tC, rv.cmLoad(tC, base.add(j * 256), CM, "row"), "lsec"),
    di: k.var(tC, rv.cmLoad(tC, base.add(NF * 256 + j * 256), CM, "row"), "dic"),
  };
}
