// Pieces the cooperative-matrix attention kernels share (forward: attention-cm-acc.ts, backward:
// attention-cm-bwd.ts): element loops over a fragment, the accumulator/A lane-layout probe, the
// causal triangle of a diagonal fragment, the register-prefetched staging of [rows, D] f16
// tiles into shared memory, and the loops that stream those tiles.
import {
  f16, f32, floor, lit, select, toBf16,
  type Buffer, type BufferView, type CoopMatType, type Expr, type KernelBuilder, type Shared, type SharedView, type Var,
} from "../ir/index.js";

/** Fragment side: every product is 16x16x16 (f16 or bf16 inputs, f32 accumulators). */
export const CM = 16;

/** Element type of the MMA operands: f16, or bf16 for the split (x3) kernels. */
export type HalfType = "f16" | "bf16";

/**
 * An f32 accumulator fragment `x` as A operands through the subgroup's stage tiles (the path for
 * devices whose accumulator and A lane layouts differ): `hi` gets x rounded to `el`, and `lo`
 * (when given) the rounding remainder x - hi, also rounded, so hi + lo carries x to ~2^-16
 * relative in bf16. `st` (f32) and `pt` (el) are the subgroup's 256-element tiles at `off`.
 */
export function accToOperands(
  k: KernelBuilder, o: { tC: CoopMatType; tA: CoopMatType; el: HalfType; st: Shared; pt: Shared; off: Expr; lane: Expr },
  x: Expr, hi: Var, lo: Var | null,
): void {
  const sync = () => k.barrier({ scope: "subgroup", mem: ["workgroup"] });
  sync();
  o.st.cmStore(x, o.off, CM, "row");
  sync();
  const at = Array.from({ length: 8 }, (_, e) => k.let(o.off.add(o.lane.mul(8)).add(e), "at"));
  const vals = at.map((a) => k.let(o.st.load(a), "x"));
  const his = vals.map((val, e) => {
    const h = k.let(to16(o.el, val), "h");
    o.pt.store(at[e], h);
    return h;
  });
  sync();
  hi.set(o.pt.cmLoad(o.tA, o.off, CM, "row"));
  if (!lo) return;
  sync();
  vals.forEach((val, e) => o.pt.store(at[e], to16(o.el, val.sub(his[e].cast(f32)))));
  sync();
  lo.set(o.pt.cmLoad(o.tA, o.off, CM, "row"));
}

/** A fragment operand: its high (or only) part and, for the split kernels, its low part. */
export interface Pair { hi: Expr; lo: Expr | null }

/** acc + a·b, or with split parts acc + a·b + a·bL + aL·b (the dropped aL·bL is ~2^-16 relative). */
export function splitMma(k: KernelBuilder, a: Pair, b: Pair, acc: Expr): Expr {
  const hh = k.cmMulAdd(a.hi, b.hi, acc);
  return a.lo && b.lo ? k.cmMulAdd(a.lo, b.hi, k.cmMulAdd(a.hi, b.lo, hh)) : hh;
}

/** f32 to el: bf16 rounded to nearest in integer arithmetic (toBf16; devices may truncate). */
function to16(el: HalfType, x: Expr): Expr {
  return el === "bf16" ? toBf16(x) : x.cast(el);
}

/** x split into `hi` (x rounded to el) and `lo` (the remainder, rounded): element i of A operands. */
export function splitElement(k: KernelBuilder, el: HalfType, x: Expr, hi: Var, lo: Var | null, i: Expr): void {
  if (!lo) return hi.setAt(i, x.cast(el));
  const h = k.let(to16(el, x), "h");
  hi.setAt(i, h);
  lo.setAt(i, to16(el, x.sub(h.cast(f32))));
}

/** `for i < cmlen(t)`, unrolled by the driver. */
export function elements(k: KernelBuilder, t: CoopMatType, body: (i: Expr) => void): void {
  k.for(lit("u32", 0), k.cmLen(t), body, { unroll: true, name: "e" });
}

/**
 * Whether an accumulator fragment can become an A operand element for element in registers:
 * index matrices (element (r, c) = 16 r + c) loaded through `st` (f32) and `pt` (f16) show how
 * each type sits in the lanes (on NVIDIA both follow mma.m16n8k16's layout). Uses the first 256
 * entries of both and ends with a workgroup barrier, after which they are free again. Also
 * returns the accumulator index matrix, from which causal triangles are built.
 */
export function laneLayout(
  k: KernelBuilder,
  o: { tA: CoopMatType; tC: CoopMatType; st: Shared; pt: Shared; tid: Expr; threads: number; forceShared?: boolean; el?: HalfType },
): { regP: Expr; idxC: Var } {
  const { tA, tC, st, pt } = o;
  k.for(o.tid, lit("u32", 256), (e) => {
    st.store(e, e.cast(f32));
    // 0..255 are exact in f16 and in bf16 (8-bit significand)
    pt.store(e, o.el === "bf16" ? e.cast(f32).cast("bf16") : e.cast(f16));
  }, { step: o.threads });
  k.barrier();
  const idxC = k.var(tC, st.cmLoad(tC, 0, CM, "row"), "idxc");
  const idxA = k.var(tA, pt.cmLoad(tA, 0, CM, "row"), "idxa");
  const same = k.var("bool", k.cmLen(tC).eq(k.cmLen(tA)), "same");
  elements(k, tC, (i) => {
    k.if(i.lt(k.cmLen(tA)), () => same.set(same.get().and(idxC.at(i).eq(idxA.at(i).cast(f32)))));
  });
  const regP = k.let(o.forceShared ? lit("bool", false) : k.sgAll(same.get()), "regp");
  k.barrier();
  return { regP, idxC };
}

/**
 * The additive causal mask of a diagonal fragment: -inf above the diagonal (column > row: keys
 * after the query when rows are queries) or below it (row > column: when rows are keys).
 */
export function causalTriangle(k: KernelBuilder, tC: CoopMatType, idxC: Var, masked: "above" | "below"): Var {
  const tri = k.var(tC, k.cmFill(tC, 0), masked === "above" ? "tri" : "trib");
  elements(k, tC, (i) => {
    const x = idxC.at(i);
    const row = k.let(floor(x.mul(1 / CM)), "row");
    const col = x.sub(row.mul(CM));
    tri.setAt(i, select(masked === "above" ? col.gt(row) : row.gt(col), lit(f32, "-inf"), lit(f32, 0)));
  });
  return tri;
}

export interface TileStager {
  /** Loads rows [row0, row0 + rows) of every source into registers. */
  fetch(row0: Expr): void;
  /** Stores the registers into stage `slot` of every destination (rows padded to `ld` halves). */
  put(slot: Expr): void;
}

/**
 * Register-prefetched copies of [rows, D] 16-bit tiles at element `base` + row0 * D of each source
 * into shared memory, 8 halves per copy (u32x4 views of the sources and the u32x4 destinations).
 * Sources and destinations pair up by position; each stage of a destination is rows * ld halves.
 * With `strided` instead of `base`, source b's tile rows are `strided.strides[b]` halves apart from
 * `strided.bases[b]` (a head's rows inside [B*T, ...] rows, HeadLayout "rows"; strides and bases
 * multiples of 8 halves).
 */
export function tileStager(
  k: KernelBuilder,
  o: {
    srcs: (Buffer | BufferView)[]; dsts: (Shared | SharedView)[]; D: number; ld: number; rows: number; tid: Expr; threads: number;
    base?: Expr; strided?: { bases: Expr[]; strides: Expr[] };
  },
): TileStager {
  const { D, rows, tid, threads } = o;
  const VW = 8;
  const chunks = (rows * D) / VW;
  const slots = Math.ceil(chunks / threads);
  const guarded = chunks % threads !== 0;
  const regs = o.srcs.map((_, b) => Array.from({ length: slots }, (_, i) => k.var("u32x4", undefined, `tr${b}_${i}`)));
  const chunk = (i: number) => tid.add(i * threads);
  const guard = (i: number, body: () => void) => (guarded ? k.if(chunk(i).lt(chunks), body) : body());
  const strided = o.strided;
  if (strided) {
    // chunk e of a tile: row e / (D / 8), 8-half column e % (D / 8); sources with one stride share the offsets
    const uniq = [...new Set(strided.strides)];
    const offs = uniq.map((st, u) => slotsOf(k, slots, chunk, D / VW, k.let(st.div(VW), `gstride${u}`), u));
    const at = strided.strides.map((st) => offs[uniq.indexOf(st)]);
    return {
      fetch(row0) {
        const g0 = strided.bases.map((b, i) => k.let(b.add(row0.mul(strided.strides[i])).div(VW), `g0${i}`));
        for (let i = 0; i < slots; i++) guard(i, () => o.srcs.forEach((src, b) => regs[b][i].set(src.load(g0[b].add(at[b][i])))));
      },
      put: (slot) => putRegs(k, o, regs, slots, chunk, guard, slot),
    };
  }
  const base = o.base;
  if (!base) throw new Error("tileStager: neither base nor strided given");
  return {
    fetch(row0) {
      const g0 = k.let(base.add(row0.mul(D)).div(VW), "g0");
      for (let i = 0; i < slots; i++) guard(i, () => o.srcs.forEach((src, b) => regs[b][i].set(src.load(g0.add(chunk(i))))));
    },
    put: (slot) => putRegs(k, o, regs, slots, chunk, guard, slot),
  };
}

/** Each register slot's u32x4 offset from a strided tile's first row (fixed per thread: computed once). */
function slotsOf(k: KernelBuilder, slots: number, chunk: (i: number) => Expr, perRow: number, strideV: Expr, u: number): Expr[] {
  return Array.from({ length: slots }, (_, i) => k.let(chunk(i).div(perRow).mul(strideV).add(chunk(i).rem(perRow)), `gat${u}_${i}`));
}

/** Stores the registers into stage `slot` (rows padded to `ld` halves). */
function putRegs(
  k: KernelBuilder, o: { dsts: (Shared | SharedView)[]; D: number; ld: number; rows: number }, regs: Var[][], slots: number,
  chunk: (i: number) => Expr, guard: (i: number, body: () => void) => void, slot: Expr,
): void {
  const VW = 8;
  for (let i = 0; i < slots; i++) {
    guard(i, () => {
      const e = chunk(i);
      const at = k.let(slot.mul((o.rows * o.ld) / VW).add(e.div(o.D / VW).mul(o.ld / VW)).add(e.rem(o.D / VW)), "shv");
      o.dsts.forEach((dst, b) => dst.store(at, regs[b][i].get()));
    });
  }
}

/**
 * The streaming loop over `nt` tiles through one shared stage: tile 0 is staged before it; each
 * iteration stores the tile prefetched by the previous one (after a barrier ends the reads of the
 * stage), prefetches the next into registers and runs `math` on the staged one. `slot` is the
 * stage (always 0, one stage: kept as the math's offset base).
 */
export function streamTiles(
  k: KernelBuilder, nt: Expr, tileRows: number, first: Expr,
  fetch: (row0: Expr) => void, put: (slot: Expr) => void, math: (t: Expr, slot: Expr) => void,
): void {
  fetch(first);
  put(lit("u32", 0));
  k.barrier();
  k.for(lit("u32", 0), nt, (t) => {
    const slot = k.let(lit("u32", 0), "slot");
    const more = k.let(t.add(1).lt(nt), "more");
    k.if(t.gt(0), () => {
      put(slot);
      k.barrier();
    });
    k.if(more, () => fetch(first.add(t.add(1).mul(tileRows))));
    math(t, slot);
    k.barrier();
  });
}

/** The straight-line tile stream of the backward kernels (streamStraight). */
export interface StraightStream {
  /** `nt` tiles of `rows` rows from row `first`. */
  nt: Expr; rows: number; first: Expr;
  /** How many tiles hold the block's diagonal (they run with masks), and where: first (dK/dV: queries from the block's first key on) or last (dQ: keys up to the block's last query). */
  masked: number; maskedAt: "first" | "last";
  stages: 1 | 2;
  /** laneLayout's regP: the branch-free loop is emitted once per P/dS path and chosen once. */
  regP: Expr;
  fetch(row0: Expr): void;
  put(slot: Expr): void;
  /** Tile t on stage `slot`: with masks (`regs` null) or branch-free on that P/dS path, calling `mid` (two stages: the next tile's stores) halfway. */
  math(t: Expr, slot: Expr, regs: boolean | null, mid: (() => void) | null): void;
}

/**
 * Streams tiles so that only the `masked` tiles holding the block's diagonal carry branches; the
 * rest run in a loop with none (the P/dS path chosen outside it, the next tile's loads clamped to
 * the last tile, which the last iteration loads again, instead of guarded). One stage: a tile is
 * stored from the registers, a barrier, the next one loaded into registers, the math, a barrier
 * (diagonal first: tile 0 is stored before the loop; diagonal last: every iteration stores its
 * own tile, so the branch-free loop needs no first-iteration test). Two stages: the next tile is
 * stored into the other stage halfway through the branch-free math (after the masked math), and
 * one barrier ends each tile.
 */
export function streamStraight(k: KernelBuilder, o: StraightStream): void {
  const P = o.masked;
  const last = k.let(o.nt.sub(1), "last");
  const fetchNext = (t: Expr) => o.fetch(o.first.add(t.add(1).min(last).mul(o.rows)));
  const u0 = lit("u32", 0);
  const two = o.stages === 2;
  const head = o.maskedAt === "first";
  const slotOf = (t: Expr) => (two ? k.let(t.band(1), "slot") : u0);
  const stage = () => {
    o.put(u0);
    k.barrier();
  };
  o.fetch(o.first);
  if (two || head) stage();
  const masked = (lo: Expr, hi: Expr) => k.for(lo, hi, (t) => {
    if (!two && !head) stage();
    else if (!two && P > 1) k.if(t.gt(0), stage);
    const slot = slotOf(t);
    fetchNext(t);
    o.math(t, slot, null, null);
    if (two) o.put(slot.bxor(1));
    k.barrier();
  });
  const straight = (lo: Expr, hi: Expr, regs: boolean) => k.for(lo, hi, (t) => {
    if (!two) stage();
    const slot = slotOf(t);
    fetchNext(t);
    o.math(t, slot, regs, two ? () => o.put(slot.bxor(1)) : null);
    k.barrier();
  });
  const branchFree = (lo: Expr, hi: Expr) => k.if(o.regP, () => straight(lo, hi, true), () => straight(lo, hi, false));
  if (head) {
    masked(u0, lit("u32", P));
    branchFree(lit("u32", P), o.nt);
    return;
  }
  const split = k.let(o.nt.sub(P), "nstraight");
  branchFree(u0, split);
  masked(split, o.nt);
}
