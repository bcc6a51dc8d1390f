// Shared-memory staging of the A and B k-tiles of the KHR coopmat matmul (coopmat.ts): global →
// registers → shared copies, fragment loads, and the software pipeline of the k-loop.
//
// Shared layout: a tile is stored in its operand's own layout, rows padded by PAD = 8 elements
// (16 bytes) so that the 8 rows an ldmatrix-style fragment load touches fall in distinct banks.
// Copy width per chunk (`vw`, chosen by the planner from the alignment of the problem):
//   1  scalar copies (any shape)
//   4  64-bit for 16-bit data (f16x4 through the array's 4-wide view), 128-bit for f32 (f32x4)
//   8  128-bit for 16-bit data: the binding read through its u32x4 view (8 halves per load), the
//      shared array declared u32x4 (one 16-byte store), fragments loaded from that array with
//      offset and stride in u32x4 units (NVIDIA's shmem.comp does the same with uvec4). Needs the
//      chunk's 8 halves to be 16-byte aligned and either all in range or all out of range: the
//      contiguous dimension and K multiples of 8 (the planner checks; bindings start at offset 0).
// Pipeline (`stages` shared buffers, `prefetch` register sets; k-tile t is multiplied from stage
// t % stages while tiles t+1 .. t+prefetch are in registers or in flight):
//   stages 2, prefetch 1  load t+1 → R; mma(t); R → stage t+1; barrier                (1 barrier)
//   stages 1, prefetch 1  load t+1 → R; mma(t); barrier; R → stage; barrier            (2 barriers)
//   stages 2, prefetch 2  load t+2 → R[t%2]; mma(t); R[(t+1)%2] → stage t+1; barrier  (1 barrier)
// An operand may have its own stage count (Operand.stages): with one stage for B and two for A,
//   load t+1 → R; mma(t); R_A → A stage t+1; barrier; R_B → B stage; barrier
// so A's stores no longer wait for the barrier that frees B's stage. Where only half of A's second
// stage fits (the 256×256 tile), A's first half of rows is such a two-stage operand and its second
// half a one-stage one (splitRows). Both k-loops (pipeline,
// pairedPipeline) end with a workgroup barrier: after them the stages are free (CoopConfig.epiInStage).
// With register staging the latency a global load may take is the code between it and the
// store of its register, so a deeper pipeline needs another register set, not a third shared
// buffer: prefetch 2 keeps two tiles in flight for one more register set (12–16 registers at
// 128×256×16 / 128×128×32), where a third padded 128×128×32 stage (+18.5 KB) would not fit 48 KiB.
// Prefetch 2 runs the k-loop in pairs: an odd tile count multiplies one extra all-zero tile
// (every load past the k range is zero), which adds exactly 0 to the accumulators.
// Pair staging (two k-tiles per load of the K-contiguous operands) is coopmat-pair.ts.
import {
  lit, select, toBf16, vecOf, type Buffer, type CoopMatType, type Expr, type KernelBuilder, type Shared, type ValueType, type Var,
} from "../../ir/index.js";
import { read } from "./common.js";

/** Rows and columns of a cooperative-matrix fragment (16×16×16 MMAs). */
export const CM = 16;

export const PAD = 8;

export type ChunkWidth = 1 | 4 | 8;

export interface Stage {
  buf: Buffer;
  sh: Shared;
  /** bf16x3 mode: the low parts go here (sh holds the high parts). */
  shLo?: Shared;
  rows: number;
  cols: number;
  vw: ChunkWidth;
  /**
   * Every tile of the problem is whole (M, N, K multiples of the tile): chunks are loaded with no
   * bounds checks and no zero selects (fewer integer instructions per k-tile in the hot loop).
   */
  aligned?: boolean;
  /** Global position of the tile: row origin/limit, column origin/limit, leading dim, base. */
  r0: Expr; rLimit: Expr; c0: Expr; cLimit: Expr; ld: Expr; base: Expr;
}

export interface Slot {
  r: Expr; c: Expr; shOff: Expr;
  /** Aligned stages: the chunk's global offset within a tile, in load units (vw elements). */
  gOff?: Expr;
}

/** Elements of one padded stage of a rows×cols tile (a multiple of 8: one u32x4 row pad). */
export function stageLen(rows: number, cols: number): number {
  return rows * (cols + PAD);
}

/** A staging array of `stages` padded tiles: u32x4 elements for 128-bit chunks. */
export function stageArray(k: KernelBuilder, name: string, elem: ValueType, vw: ChunkWidth, len: number, stages: number): Shared {
  return vw === 8 ? k.shared(name, "u32x4", (stages * len) / 8) : k.shared(name, elem, stages * len);
}

/** Per-thread chunk coordinates of one tile (fixed across k-tiles). */
export function chunkSlots(k: KernelBuilder, s: Stage, lid: Expr, threads: number, tag: string): Slot[] {
  const perRow = s.cols / s.vw;
  const total = s.rows * perRow;
  if (total % threads) throw new Error(`coopmat: ${tag} tile ${s.rows}x${s.cols} does not split over ${threads} threads`);
  const out: Slot[] = [];
  for (let it = 0; it < total / threads; it++) {
    const { r, c, gOff } = rowOrderChunk(k, s, lid, it, threads, tag);
    out.push({ r, c, shOff: k.let(r.mul(s.cols + PAD).add(c), `${tag}sh`), gOff });
  }
  return out;
}

/**
 * Chunk `it` of a thread in row order (chunk q = lid + it·threads: row q / perRow, column
 * (q % perRow)·vw) and, for whole tiles, its offset within the tile in load units.
 */
export function rowOrderChunk(k: KernelBuilder, s: Stage, lid: Expr, it: number, threads: number, tag: string): { r: Expr; c: Expr; gOff?: Expr } {
  const perRow = s.cols / s.vw;
  const q = k.let(lid.add(it * threads), `${tag}q`);
  const r = k.let(q.div(perRow), `${tag}r`);
  const c = k.let(q.rem(perRow).mul(s.vw), `${tag}c`);
  const gOff = s.aligned ? k.let(r.mul(s.ld).add(c).div(s.vw), `${tag}g`) : undefined;
  return { r, c, gOff };
}

/** The registers one k-tile's chunks of a thread occupy (one set per prefetch depth). */
export function chunkRegs(k: KernelBuilder, s: Stage, slots: Slot[], elem: ValueType, tag: string): Var[] {
  const t = (s.vw === 8 ? "u32x4" : s.vw === 4 ? `${elem}x4` : elem) as ValueType;
  return slots.map(() => k.var(t, undefined, `${tag}reg`));
}

function zeroOf(t: ValueType): Expr {
  return t.includes("x") ? vecOf("f32x4", 0).cast(t) : vecOf("f32x4", 0).x.cast(t);
}

/** Loads the chunks of the tile whose moving origin is given, converted to the register type. */
export function loadChunks(k: KernelBuilder, s: Stage, slots: Slot[], regs: Var[], regElem: "f16" | "bf16" | "f32"): void {
  if (s.aligned) {
    // whole tiles: one tile origin per operand and k-tile, plus each chunk's fixed offset, all in
    // load units (base, leading dim, tile origins and chunk columns are multiples of vw here)
    const tile = k.let(s.base.add(s.r0.mul(s.ld)).add(s.c0).div(s.vw), "gt");
    const view = s.vw === 8 ? s.buf.as("u32", 4) : undefined;
    const t = (s.vw === 1 ? regElem : `${regElem}x4`) as ValueType;
    slots.forEach((sl, n) => {
      const at = tile.add(sl.gOff!);
      if (view) regs[n].set(view.load(at));
      else regs[n].set((s.vw === 1 ? s.buf.load(at) : s.buf.loadVec(at, 4)).cast(t));
    });
    return;
  }
  slots.forEach((sl, n) => {
    const gr = k.let(s.r0.add(sl.r), "gr");
    const gc = k.let(s.c0.add(sl.c), "gc");
    const ok = k.let(gr.lt(s.rLimit).and(gc.lt(s.cLimit)), "ok");
    const idx = k.let(select(ok, s.base.add(gr.mul(s.ld)).add(gc), 0), "gi");
    if (s.vw === 8) {
      // 8 halves as raw bits: no conversion, zero bits for an out-of-range chunk
      regs[n].set(select(ok, s.buf.as("u32", 4).load(idx.div(8)), 0));
      return;
    }
    const t = (s.vw === 1 ? regElem : `${regElem}x4`) as ValueType;
    const v = s.vw === 1 ? s.buf.load(idx) : s.buf.loadVec(idx.div(4), 4);
    regs[n].set(select(ok, v.cast(t), zeroOf(t)));
  });
}

export function storeChunks(k: KernelBuilder, s: Stage, slots: Slot[], regs: Var[], stageOff: Expr): void {
  slots.forEach((sl, n) => {
    const base = k.let(stageOff.add(sl.shOff), "so");
    const v = read(regs[n]);
    if (s.vw === 8) {
      // offsets, row pitches (cols + PAD) and stage lengths are multiples of 8 halves
      s.sh.store(base.div(8), v);
      return;
    }
    if (s.shLo) {
      const tf = (s.vw === 1 ? "f32" : "f32x4") as ValueType;
      // rounded to nearest in integer arithmetic (toBf16): the device's conversion may truncate
      const hi = k.let(toBf16(v), "hi");
      const lo = k.let(toBf16(v.sub(hi.cast(tf))), "lo");
      for (const [dst, x] of [[s.sh, hi], [s.shLo, lo]] as const) {
        if (s.vw === 1) dst.store(base, x);
        else dst.vec(4).store(base.div(4), x);
      }
      return;
    }
    // 4-wide chunks go in as one vector store (64 bits for 16-bit data): chunk offsets, row pitches
    // (cols + PAD) and stage offsets are all multiples of 4 elements.
    if (s.vw === 1) s.sh.store(base, v);
    else s.sh.vec(4).store(base.div(4), v);
  });
}

/**
 * A fragment load from a staged tile, through the view the tile was written with (the IR requires
 * a coopmat to use an array's widest view): `idx` and `stride` in elements here, converted to
 * vectors (f16x4 / u32x4) for 4- and 8-wide chunks.
 */
export function fragLoad(sh: Shared, vw: ChunkWidth, t: CoopMatType, idx: Expr, stride: number, layout: "row" | "col"): Expr {
  if (vw === 8) return sh.cmLoad(t, idx.div(8), stride / 8, layout);
  return vw === 1 ? sh.cmLoad(t, idx, stride, layout) : sh.vec(4).cmLoad(t, idx.div(4), stride / 4, layout);
}

/** What the k-loop moves for one operand: its stage description at a k origin, slots, registers. */
export interface Operand {
  at: (k0: Expr) => Stage;
  slots: Slot[];
  /** One register set per prefetch depth. */
  regs: Var[][];
  len: number;
  /**
   * Pair staging: the k-tile of each loaded pair this thread's chunks belong to (pairSlots); `at`
   * then describes the pair at an even k-tile's origin.
   */
  half?: Expr;
  /**
   * Rotated pair staging (pairRotSlots): slot pairs (2i, 2i + 1) hold one chunk of each k-tile per
   * lane; `half` is then the lane's k-tile in its even slots, and every lane stores one chunk of
   * each slot pair per k-tile, picked by select (no branch).
   */
  rotated?: boolean;
  /** Row-pair staging (pairRowSlots): the k-tile of the pair each slot belongs to. */
  slotHalf?: number[];
  /** Shared stages of this operand where they differ from PipelineShape.stages. */
  stages?: 1 | 2;
  /** Element offset of this operand's stages in its array (the one-stage half of splitRows). */
  offset?: number;
}

/**
 * CoopConfig.halfA2: a [rows][k] operand split by rows into two operands over one array — the
 * first half in two stages of half tiles, the second in one stage after them (`len` is a half
 * tile). Slot `it` of the row-order layouts (chunkSlots, pairSlots, pairRotSlots) covers rows
 * [it·rps, (it + 1)·rps), rps = threads / chunks per row; coopmat.ts halfA2Fits checks that each
 * slot falls in one half.
 */
export function splitRows(o: Operand, rows: number, pitch: number, threads: number, perRow: number): [Operand, Operand] {
  const rps = threads / perRow;
  const pick = (top: boolean) => {
    const mine = (_: unknown, i: number) => i * rps < rows / 2 === top;
    return { slots: o.slots.filter(mine), regs: o.regs.map((set) => set.filter(mine)) };
  };
  const half = (rows / 2) * pitch;
  return [{ ...o, ...pick(true), len: half, stages: 2 }, { ...o, ...pick(false), len: half, stages: 1, offset: half }];
}

export interface PipelineShape {
  bk: number;
  stages: 1 | 2;
  prefetch: 1 | 2;
  regElem: "f16" | "bf16" | "f32";
  /**
   * Unchecked loads (Stage.aligned): the prefetch past the last tile re-reads the last tile
   * instead of loading zeros beyond K (its copy is staged but never multiplied). Prefetch 1 only:
   * prefetch 2's extra all-zero tile needs the checked loads.
   */
  aligned?: boolean;
  /**
   * With aligned: the loop runs nt - 1 tiles with an unclamped prefetch and the last tile's
   * multiply follows it (its code emitted twice), so the load addresses stay plain induction
   * variables.
   */
  peel?: boolean;
}

/** Element offset of the shared stage k-tile `tile` is staged in (stage tile % 2 of two). */
export function stageOffset(k: KernelBuilder, stages: 1 | 2, tile: Expr, len: number): Expr {
  return stages === 1 ? lit("u32", 0) : k.let(tile.band(1).mul(len), "st");
}

/** Where the operand stages k-tile `tile`: its stage's offset plus the operand's own (Operand.offset). */
export function operandStage(k: KernelBuilder, ps: PipelineShape, o: Operand, tile: Expr): Expr {
  const st = stageOffset(k, stagesOf(ps, o), tile, o.len);
  return o.offset ? k.let(st.add(o.offset), "st") : st;
}

/** The operand's shared stages (its own, or the pipeline's). */
export function stagesOf(ps: PipelineShape, o: Operand): 1 | 2 {
  return o.stages ?? ps.stages;
}

/**
 * The stores that follow a k-tile's multiply: two-stage operands store into their other stage at
 * once; one-stage operands wait for the barrier that ends every read of their only stage.
 */
export function storeAfterMultiply(k: KernelBuilder, ps: PipelineShape, ops: Operand[], store: (o: Operand) => void): void {
  for (const o of ops) if (stagesOf(ps, o) === 2) store(o);
  const single = ops.filter((o) => stagesOf(ps, o) === 1);
  if (!single.length) return;
  k.barrier();
  for (const o of single) store(o);
}

/**
 * The pipelined k-loop over `nt` tiles starting at `kBeg`; `mma(cur)` multiplies the tile staged
 * at element offset cur[i] of operand i's array.
 */
export function pipeline(k: KernelBuilder, ps: PipelineShape, ops: Operand[], kBeg: Expr, nt: Expr, mma: (cur: Expr[]) => void): void {
  if (ps.aligned && ps.prefetch !== 1) throw new Error("coopmat: unchecked staging needs prefetch 1");
  if (ps.peel && !ps.aligned) throw new Error("coopmat: a peeled k-loop needs unchecked staging");
  const last = ps.aligned && !ps.peel ? k.let(nt.sub(1), "tlast") : undefined;
  const origin = (tile: Expr) => k.let(kBeg.add((last ? tile.min(last) : tile).mul(ps.bk)), "k0");
  const stageOf = (tile: Expr, o: Operand): Expr => operandStage(k, ps, o, tile);
  for (const o of ops) loadChunks(k, o.at(kBeg), o.slots, o.regs[0], ps.regElem);
  for (const o of ops) storeChunks(k, o.at(kBeg), o.slots, o.regs[0], lit("u32", o.offset ?? 0));
  if (ps.prefetch === 2) {
    const k1 = origin(lit("u32", 1));
    for (const o of ops) loadChunks(k, o.at(k1), o.slots, o.regs[1], ps.regElem);
  }
  k.barrier();
  const step = (tile: Expr, u: number) => {
    // registers holding tile+1 (X) and receiving tile+prefetch (Y)
    const x = (u + 1) % ps.prefetch, y = u % ps.prefetch;
    const kNext = origin(tile.add(ps.prefetch));
    for (const o of ops) loadChunks(k, o.at(kNext), o.slots, o.regs[y], ps.regElem);
    mma(ops.map((o) => stageOf(tile, o)));
    storeAfterMultiply(k, ps, ops, (o) => storeChunks(k, o.at(kNext), o.slots, o.regs[x], stageOf(tile.add(1), o)));
    k.barrier();
  };
  const loopTiles = ps.peel ? k.let(nt.sub(1), "tloop") : nt;
  k.for(0, loopTiles, (t) => {
    for (let u = 0; u < ps.prefetch; u++) step(u === 0 ? t : k.let(t.add(u), "t1"), u);
  }, { name: "t", step: ps.prefetch });
  if (ps.peel) mma(ops.map((o) => stageOf(loopTiles, o)));
}
