// Stream-K for aligned coopmat tiles: the tiles that do not fill a last whole wave are shared out
// by k-iterations, so every workgroup of that last stretch does the same work (CUTLASS's
// "data-parallel + stream-K" split). 8192³ in 256×256 tiles is 1024 tiles on 132 SMs, 7.76 waves
// run as 8; 3072³ in 128×256 tiles is 288 tiles, 2.18 waves run as 3.
//
// Schedule (streamKSchedule): T tiles of I units each (a unit is one k-tile, two with pair
// staging), P stream-K workgroups (the SM count). The first D = ⌊T/P⌋·P tiles (the whole waves)
// run one per workgroup; the S = T − D others, S·I units, are cut into P contiguous ranges
// (⌊S·I/P⌋ units, one more for the first S·I mod P). A workgroup walks the tiles its range
// touches: whole ones it finishes and stores, partial ones it stores as a partial accumulator tile
// in its slot of the workspace (2c for its first tile, 2c+1 for its last). A second dispatch
// (fixupKernel) sums each split tile's partials and applies the epilogue. No workgroup waits for
// another, so correctness does not depend on P being the SM count.
// H200 session 10 (runs 2, 4): sharing only the partial wave beats sharing it with the whole wave
// before it (CUTLASS's choice, ranges of 1-2 tiles) everywhere measured — half the partial tiles
// to write and sum: 8192³ f16 accumulation 410 → 421 TF/s, 3072³ 340 → 368.
//
// Push constants: PUSH_FIELDS with kChunk = D and splits = P (neither is used otherwise: stream-K
// plans have no split-K).
//
// Fixup contract
//   bindings  0 workspace (read, accumulator dtype [2P][BM·BN] in 16×16 blocks), 1 C (write),
//             then the epilogue's bias, residual and preact (read; common.ts epilogueRoles)
//   dispatch  [S · BM·BN / FIXUP_SPAN, 1, 1], workgroup FIXUP_THREADS
import { f32, kernel, lit, packHalves, select, vecOf, type Expr, type KernelBuilder, type KernelDesc, type ValueType } from "../../ir/index.js";
import { applyEpilogue, epilogueTag, finishBindings, groupedTile, PUSH_FIELDS, read } from "./common.js";
import type { NormalizedProblem } from "./problem.js";

export const FIXUP_THREADS = 256;
/** Elements of one split tile per fixup workgroup (8 per thread). */
export const FIXUP_SPAN = FIXUP_THREADS * 8;

export interface StreamKSchedule {
  /** Tiles run one per workgroup first. */
  dp: number;
  /** Tiles shared out by k-iterations. */
  skTiles: number;
  /** Stream-K workgroups (P). */
  ctas: number;
}

/** K elements per stream-K unit: one k-tile, or a pair of them with pair staging (an even count per range). */
export function streamKUnit(c: { bk: number; pairK?: boolean }): number {
  return c.bk * (c.pairK ? 2 : 1);
}

/** The split of `tiles` over `ctas` workgroups, or null where whole waves leave nothing to share. */
export function streamKSchedule(tiles: number, ctas: number): StreamKSchedule | null {
  if (tiles <= 0 || ctas <= 0 || tiles % ctas === 0) return null;
  const dp = Math.floor(tiles / ctas) * ctas;
  return { dp, skTiles: tiles - dp, ctas };
}

/** Unit range [start, end) of workgroup `w` over T tiles of I units (the kernel's arithmetic, on the host: tests). */
export function unitRange(s: StreamKSchedule, unitsPerTile: number, w: number): [number, number] {
  if (w < s.dp) return [w * unitsPerTile, (w + 1) * unitsPerTile];
  const c = w - s.dp, total = s.skTiles * unitsPerTile;
  const base = Math.floor(total / s.ctas), rem = total % s.ctas;
  const start = s.dp * unitsPerTile + c * base + Math.min(c, rem);
  return [start, start + base + (c < rem ? 1 : 0)];
}

/** The grid and its stream-K split as IR values (kernel and fixup compute them alike). */
export interface StreamKGeometry {
  nx: Expr; ny: Expr; perBatch: Expr;
  /** Units per tile. */
  units: Expr;
  dp: Expr; ctas: Expr; base: Expr; rem: Expr;
}

export function streamKGeometry(k: KernelBuilder, pc: Record<keyof typeof PUSH_FIELDS, Expr>, bm: number, bn: number, unit: number): StreamKGeometry {
  const nx = k.let(pc.n.div(bn), "tiles_x");
  const ny = k.let(pc.m.div(bm), "tiles_y");
  const perBatch = k.let(nx.mul(ny), "tiles_b");
  const units = k.let(pc.k.div(unit), "units");
  const dp = pc.kChunk, ctas = pc.splits;
  const skUnits = k.let(perBatch.mul(pc.batch).sub(dp).mul(units), "sk_units");
  return { nx, ny, perBatch, units, dp, ctas, base: k.let(skUnits.div(ctas), "sk_base"), rem: k.let(skUnits.rem(ctas), "sk_rem") };
}

/** First stream-K unit (relative to the stream-K region) of stream-K workgroup c. */
function skStart(k: KernelBuilder, g: StreamKGeometry, c: Expr): Expr {
  return k.let(c.mul(g.base).add(c.min(g.rem)), "sk_start");
}

/** This workgroup's unit range and the tiles it touches. */
export function streamKRange(k: KernelBuilder, g: StreamKGeometry, lin: Expr): { start: Expr; end: Expr; firstTile: Expr; segments: Expr; cta: Expr } {
  const isDp = k.let(lin.lt(g.dp), "is_dp");
  // wraps for data-parallel workgroups, which never use it
  const cta = k.let(lin.sub(g.dp), "cta");
  const sk0 = k.let(g.dp.mul(g.units).add(skStart(k, g, cta)), "sk_from");
  const start = k.let(select(isDp, lin.mul(g.units), sk0), "u_start");
  const end = k.let(select(isDp, start.add(g.units), sk0.add(g.base).add(select(cta.lt(g.rem), lit("u32", 1), lit("u32", 0)))), "u_end");
  const firstTile = k.let(start.div(g.units), "t_first");
  // an empty range (more workgroups than units) touches no tile
  const segments = k.let(select(start.lt(end), end.sub(1).div(g.units).sub(firstTile).add(1), lit("u32", 0)), "nseg");
  return { start, end, firstTile, segments, cta };
}

/** Segment q of a range: its tile, k extent (elements) and whether it covers the whole tile. */
export function streamKSegment(k: KernelBuilder, g: StreamKGeometry, r: { start: Expr; end: Expr; firstTile: Expr }, q: Expr, unit: number): { tile: Expr; kBeg: Expr; kEnd: Expr; whole: Expr } {
  const tile = k.let(r.firstTile.add(q), "tile");
  const tBeg = k.let(tile.mul(g.units), "t_beg");
  const tEnd = k.let(tBeg.add(g.units), "t_end");
  const segBeg = k.let(r.start.max(tBeg), "seg_beg");
  const segEnd = k.let(r.end.min(tEnd), "seg_end");
  return {
    tile,
    kBeg: k.let(segBeg.sub(tBeg).mul(unit), "kbeg"),
    kEnd: k.let(segEnd.sub(tBeg).mul(unit), "kend"),
    whole: k.let(segBeg.eq(tBeg).and(segEnd.eq(tEnd)), "whole"),
  };
}

/** Tile t (batch-major, grouped order within a batch): its batch and origin. */
export function streamKTile(k: KernelBuilder, g: StreamKGeometry, t: Expr, bm: number, bn: number): { bt: Expr; row0: Expr; col0: Expr } {
  const bt = k.let(t.div(g.perBatch), "bt");
  const pid = k.let(t.rem(g.perBatch), "pid");
  return { bt, ...groupedTile(k, pid, g.nx, g.ny, bm, bn) };
}

export function fixupName(p: NormalizedProblem, t: FixupTile): string {
  return `mm_streamk_fixup_${p.accF16 ? "acc16" : "acc32"}_${p.outDtype}_${t.wm * t.sm * 16}x${t.wn * t.sn * 16}_w${t.wm}x${t.wn}_u${t.unit}${epilogueTag(p)}`;
}

/** The tile's shape as the fixup needs it: subgroups (wm × wn), 16×16 blocks per subgroup (sm × sn), the unit. */
export interface FixupTile { wm: number; wn: number; sm: number; sn: number; unit: number }

/**
 * Where element e of a partial tile sits in the tile: the kernel stores subgroup sg's block (i, j)
 * as 256 contiguous elements at ((sg·sm + i)·sn + j)·256, row-major within the block.
 */
function partialBlock(k: KernelBuilder, t: FixupTile, e: Expr): { row: Expr; col: Expr } {
  const b = k.let(e.shr(8), "blk");
  const w = k.let(e.band(255), "inblk");
  const sg = k.let(b.div(t.sm * t.sn), "bsg");
  const row = k.let(sg.div(t.wn).mul(t.sm * 16).add(b.div(t.sn).rem(t.sm).mul(16)).add(w.shr(4)), "brow");
  const col = k.let(sg.rem(t.wn).mul(t.sn * 16).add(b.rem(t.sn).mul(16)).add(w.band(15)), "bcol");
  return { row, col };
}

/** Sums the partial tiles of every split stream-K tile and applies the epilogue (see the contract above). */
export function fixupKernel(p: NormalizedProblem, t: FixupTile): KernelDesc {
  const bm = t.wm * t.sm * 16, bn = t.wn * t.sn * 16;
  const k = kernel(fixupName(p, t), { workgroup: [FIXUP_THREADS] });
  const accElem = p.accF16 ? "f16" : "f32";
  const { ws, C, pc, refs } = finishBindings(k, p, accElem);
  const g = streamKGeometry(k, pc, bm, bn, t.unit);
  const chunks = (bm * bn) / FIXUP_SPAN;
  const wg = k.let(k.workgroupId.x, "wgx");
  const s = k.let(wg.div(chunks), "s");
  const chunk = k.let(wg.rem(chunks), "chunk");
  // the stream-K workgroups whose ranges hold this tile's first and last unit
  const big = k.let(g.rem.mul(g.base.add(1)), "big");
  const ctaOf = (x: Expr) => k.let(select(x.lt(big), x.div(g.base.add(1)), g.rem.add(x.sub(big).div(g.base.max(1)))), "c");
  const x0 = k.let(s.mul(g.units), "x0");
  const c0 = ctaOf(x0);
  const c1 = ctaOf(k.let(x0.add(g.units).sub(1), "x1"));
  // a tile inside one workgroup's range was finished and stored there
  k.if(c0.lt(c1), () => {
    const { bt, row0, col0 } = streamKTile(k, g, k.let(g.dp.add(s), "t"), bm, bn);
    // 8 consecutive elements per thread: half a block row, 8 consecutive columns of C
    const el = k.let(chunk.mul(FIXUP_SPAN).add(k.localIndex.mul(8)), "el");
    const acc = Array.from({ length: 8 }, (_, q) => k.var(f32, 0, `acc${q}`));
    k.for(c0, c1.add(1), (c) => {
      const first = k.let(skStart(k, g, c).div(g.units), "first");
      const slot = k.let(select(first.eq(s), c.mul(2), c.mul(2).add(1)), "slot");
      const at = k.let(slot.mul(bm * bn).add(el).div(4), "at");
      for (let h = 0; h < 2; h++) {
        const v = ws.as(accElem, 4).load(at.add(h));
        for (let q = 0; q < 4; q++) acc[4 * h + q].set(read(acc[4 * h + q]).add(v.swz("xyzw"[q]).cast(f32)));
      }
    }, { name: "cc" });
    const { row, col } = partialBlock(k, t, el);
    const gc = k.let(col0.add(col), "gc");
    const oi = k.let(bt.mul(pc.strideC).add(row0.add(row).mul(pc.n)).add(gc), "oi");
    const y = acc.map((a, q) => k.let(applyEpilogue(k, p, refs, read(a), gc.add(q), oi.add(q)), "y"));
    if (p.outDtype === "f32") {
      for (let h = 0; h < 2; h++) C.as("f32", 4).store(oi.div(4).add(h), vecOf("f32x4", ...y.slice(4 * h, 4 * h + 4)));
    } else {
      const pair = (q: number) => vecOf(`${p.outDtype}x2` as ValueType, y[q].cast(p.outDtype), y[q + 1].cast(p.outDtype));
      C.as("u32", 4).store(oi.div(8), packHalves([0, 2, 4, 6].map(pair)));
    }
  });
  return k.finish();
}
