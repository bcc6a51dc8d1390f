// Tensor-core matmul through subgroup-scope cooperative matrices (SPV_KHR_cooperative_matrix).
//
// Contract
//   bindings  0 A (read), 1 B (read), 2 C (write; f32 workspace under split-K),
//             then the epilogue's bias, residual and preact (read; common.ts epilogueRoles) when it
//             uses them (not under split-K),
//             then, with streamK, the partial-tile workspace (write; streamk.ts)
//   push      PUSH_FIELDS (common.ts; streamK: kChunk = data-parallel tiles, splits = stream-K workgroups)
//   dispatch  [ceil(N/BN), ceil(M/BM), batch·splits] (streamK: [D + P, 1, 1]), workgroup 32·wm·wn
//             (subgroup size 32)
// Tiling: a workgroup owns a BM×BN tile (BM = wm·sm·16, BN = wn·sn·16); each of its wm×wn subgroups
// owns sm×sn 16×16 accumulators. K advances in bk-deep tiles staged in shared memory in the
// operand's own layout (so global→shared copies are straight, coalesced vector copies of 64 or 128
// bits: coopmat-stage.ts), rows padded by 8 elements (16 bytes) so that the 8 rows an ldmatrix-style
// load touches fall in distinct banks. One or two shared stages and one or two register sets: tile
// t+1 is read from global while tile t is multiplied. K-contiguous operands may load two k-tiles
// at a time (pairK, coopmat-pair.ts); beside one stage, one operand or half of A's rows may have a
// second. Stream-K tiles walk k-ranges that span tiles (streamk.ts).
// Edges: out-of-range elements are staged as zeros (clamped addresses, never an out-of-bounds
// read); on whole tiles (aligned) the loads are unchecked. The output blocks: coopmat-epilogue.ts.
// Numerics: f16/bf16 inputs, f32 accumulation (or f16 with accF16). f32 inputs are rounded to f16
// when staged ("tc-f16" path): relative Frobenius error ~5e-4 on unit-scale data, so it is not the
// default f32 path (the gate for exact f32 is 1e-4); values beyond ±65504 overflow.
import {
  coopmat, kernel, select, type Buffer, type CoopMatType, type Expr, type KernelBuilder, type KernelDesc, type Shared, type Var,
} from "../../ir/index.js";
import { epilogueBuffers, PUSH_FIELDS, read, tileOrigin, epilogueTag } from "./common.js";
import { epilogue } from "./coopmat-epilogue.js";
import {
  chunkRegs, chunkSlots, CM, fragLoad, PAD, pipeline, splitRows, stageArray, stageLen, type ChunkWidth, type Operand, type Stage,
} from "./coopmat-stage.js";
import { pairedPipeline, pairRotSlots, pairRowSlots, pairSlots } from "./coopmat-pair.js";
import type { NormalizedProblem } from "./problem.js";
import { streamKGeometry, streamKRange, streamKSegment, streamKTile, streamKUnit } from "./streamk.js";
import { TILE_SLOT } from "../store-tile.js";

export interface CoopConfig {
  /** Subgroups along M and N. */
  wm: number;
  wn: number;
  /** 16×16 accumulators per subgroup along M and N. */
  sm: number;
  sn: number;
  bk: 16 | 32 | 64;
  /**
   * Global→shared chunk width in elements for A and B (coopmat-stage.ts): 4 needs the contiguous
   * dimension and K % 4 == 0; 8 (128-bit, 16-bit inputs only) % 8 == 0.
   */
  vecA: ChunkWidth;
  vecB: ChunkWidth;
  /**
   * Allow 128-bit chunks (vec 8) where the problem is aligned; the planner falls back to 64-bit
   * (or scalar) chunks otherwise, so a `wide` variant runs every shape.
   */
  wide?: boolean;
  /** Shared buffers per operand (default 2): 1 = one buffer and two barriers per k-tile. */
  stages?: 1 | 2;
  /** Register sets of the k-tile prefetch (default 1; 2 keeps two k-tiles in flight). */
  prefetch?: 1 | 2;
  /** The 16-deep steps of a k-tile as one driver-unrolled IR loop instead of unrolled here. */
  loopK?: boolean;
  /**
   * Store full, plain-epilogue blocks straight from the accumulator (converted to the output type),
   * which needs an accumulator coopmat of the output type on the device (never bf16).
   */
  directStore?: boolean;
  /**
   * f32 inputs on bf16 tensor cores, accurately: each element is split into bf16 hi + lo parts
   * (x ≈ hi + lo, 16 mantissa bits) and acc += Alo·Bhi + Ahi·Blo + Ahi·Bhi. Relative error ~1e-5
   * (passes the exact-f32 1e-4 gate), f32 range, 3 MMAs per product and twice the shared memory.
   */
  split3?: boolean;
  /**
   * N % 4 == 0: full blocks without directStore and with a plain epilogue (bf16 output) leave the
   * staging tile as f32x4 and reach global memory as 4-wide vector stores, no per-element checks.
   */
  vecOut?: boolean;
  /**
   * 16-bit output (bf16) with vecOut, N % 8 == 0 (planner): those blocks leave as one 16-byte store
   * per lane — the lane's 8 f32 values from the staging tile converted and packed into a u32x4 —
   * instead of two 8-byte stores (the same change as halfOut for f16, where no accumulator of the
   * output type exists). Kernel name tag `_staged8`.
   */
  wideOut16?: boolean;
  /**
   * Set by the planner when M, N and K are multiples of the tile (bm, bn, bk): staging loads skip
   * their bounds checks and every output block is stored as a full block. Kernel name tag `_al`.
   */
  aligned?: boolean;
  /**
   * f16 output, N % 8 == 0, with directStore (planner): full blocks leave through a per-subgroup
   * 16×16 f16 tile in shared memory (u32x4 elements) and one 16-byte store per lane, instead of a
   * coopmat store to global memory (store-tile.ts; the driver's global coopmat stores are narrow).
   */
  halfOut?: boolean;
  /**
   * f32 output or split-K partials, N % 4 == 0 (planner): full blocks leave through the f32 staging
   * tile and two 16-byte stores per lane instead of a coopmat store to global memory.
   */
  wideOut32?: boolean;
  /** Where aligned: the last k-tile's multiply peeled out of the loop (no clamped prefetch). */
  peel?: boolean;
  /**
   * Presplit operands in two K blocks (presplit.ts): the kernel loops over K' = 3K (push k) while
   * A and B hold [hi | lo] along K (2K), and each k-tile's origin maps to its block: A reads
   * hi, hi, lo and B hi, lo, hi over the three thirds of K'. Needs aligned (whole k-tiles, K % bk
   * == 0, so no tile straddles two thirds). Name tag `_k2`.
   */
  kSeg2?: boolean;
  /**
   * With kSeg2: the three products fused instead of looped (name tag `_f3`). The kernel loops over
   * K = K' / 3 only (split-K chunks count K too), stages each k-tile's hi and lo parts of both
   * operands side by side (the lo tile is K further along the K-contiguous dimension, or K rows
   * further down the stacked blocks) and runs acc += Alo·Bhi + Ahi·Blo + Ahi·Bhi per fragment pair,
   * as split3 does: per MMA, two thirds of the fragment loads, staging stores and barriers of the
   * looped form, in twice its shared memory. No stream-K, pair staging or second stages.
   */
  fuse3?: boolean;
  /**
   * Pair staging: the K-contiguous operands (A in NN/NT, B in NT/TT) load two k-tiles every other
   * k-tile, each row's 2·bk elements (128 bytes at bk 32 with 16-bit data) as whole lines, so each
   * 8-lane group of a 128-bit load reads one line instead of two halves; the second tile waits in
   * the registers of half the threads (coopmat-pair.ts pairSlots). H200 session 9: NT +7–18 %,
   * NN and TT +0–5 %. Set by the planner only where it holds: aligned, no split-K, K % 2·bk == 0,
   * some operand K-contiguous. Name tag `_kp`.
   */
  pairK?: boolean;
  /**
   * With pairK: the rotated form (coopmat-pair.ts pairRotSlots), where every lane stores one chunk
   * of each slot pair per k-tile by select instead of half the lanes storing under a branch.
   * 128-bit chunks only (the planner drops it otherwise). Name tag `_kpr`.
   */
  pairRot?: boolean;
  /**
   * With pairK: the operand whose rows run along K (B in NN, A in TT) loads two k-tiles every other
   * k-tile too (coopmat-pair.ts pairRowSlots), so both operands load on the same k-tiles. Name
   * tag `a` after `_kp`/`_kpr`.
   */
  pairRows?: boolean;
  /**
   * Stream-K (streamk.ts): the tiles beyond the last whole wave are shared out by k-iterations,
   * partial tiles go to the workspace (binding after the epilogue's) and a fixup dispatch finishes
   * them. Set by the planner only where it holds: aligned, no split-K, a tile count that is not a
   * multiple of the workgroups per wave. Name tag `_stk`.
   */
  streamK?: boolean;
  /**
   * With one shared stage: A gets two, so A's next k-tile is stored right after the multiply
   * (beside the MMAs still in flight) and only B's stores wait for the barrier that frees its
   * stage (coopmat-stage.ts Operand.stages). Fits 128×256 and 128×128 tiles with 32-deep k-tiles.
   * Name tag `_a2`.
   */
  stagesA?: 2;
  /** The same for B (A keeps one stage). Name tag `_b2`. */
  stagesB?: 2;
  /**
   * With one shared stage and A staged [m][k]: the first half of A's rows gets a second stage
   * (coopmat-stage.ts splitRows), so those rows of the next k-tile are stored right after the
   * multiply and only the other half and B wait for the barrier. Half of A's second stage is what
   * fits beside the 256×256 tile in 48 KiB (with the epilogue's tiles in B's stage, epiInStage),
   * where a whole one does not. Subgroups read one half each (wm even). Name tag `_ah2`.
   */
  halfA2?: boolean;
  /**
   * The epilogue's per-subgroup tiles (the f32 staging tile, the f16 output tile) live in B's
   * u32x4 stage array, free once the k-loop's last barrier has passed, instead of arrays of their
   * own: 4–8 KB that a second stage needs beside bf16 or f32 output. Whole tiles, 128-bit B chunks,
   * no peel or split-K (epiFitsInStage). Name tag `_es`.
   */
  epiInStage?: boolean;
}

export function coopTile(c: CoopConfig): { bm: number; bn: number; threads: number } {
  return { bm: c.wm * c.sm * CM, bn: c.wn * c.sn * CM, threads: 32 * c.wm * c.wn };
}

export function coopName(p: NormalizedProblem, c: CoopConfig, split: boolean): string {
  const { bm, bn } = coopTile(c);
  const t = `${p.transA ? "T" : "N"}${p.transB ? "T" : "N"}`;
  const epi = split ? "_split" : epilogueTag(p);
  const input = p.dtype === "f32" ? (c.split3 ? "f32bf16x3" : "f32tc16") : p.dtype;
  const store = `${c.aligned ? (c.peel ? "_alp" : "_al") : ""}${c.directStore ? (c.halfOut ? "_so8" : c.wideOut32 ? "_so4" : "") : c.vecOut ? (c.wideOut16 ? "_staged8" : "_staged4") : "_staged"}`;
  const pair = c.pairK ? `${c.pairRot ? "_kpr" : "_kp"}${c.pairRows ? "a" : ""}` : "";
  const pipe = `${(c.stages ?? 2) !== 2 ? `_s${c.stages}` : ""}${(c.prefetch ?? 1) !== 1 ? `_pf${c.prefetch}` : ""}${c.loopK ? "_lk" : ""}${pair}${c.stagesA ? "_a2" : ""}${c.stagesB ? "_b2" : ""}${c.halfA2 ? "_ah2" : ""}${c.epiInStage ? "_es" : ""}${c.streamK ? "_stk" : ""}`;
  return `mm_cm_${input}_${p.accF16 ? "acc16" : "acc32"}_${p.outDtype}_${bm}x${bn}x${c.bk}_w${c.wm}x${c.wn}_${t}_v${c.vecA}${c.vecB}${pipe}${store}${c.kSeg2 ? "_k2" : ""}${c.fuse3 ? "_f3" : ""}${epi}`;
}

/** Shared bytes a config needs (its stages of A and B, plus the epilogue staging tiles). */
export function coopSharedBytes(p: { dtype: string; transA?: boolean; transB?: boolean }, c: CoopConfig): number {
  const { bm, bn } = coopTile(c);
  const copies = c.split3 || c.fuse3 ? 2 : 1;
  const a = p.transA ? c.bk * (bm + PAD) : bm * (c.bk + PAD);
  const b = p.transB ? bn * (c.bk + PAD) : c.bk * (bn + PAD);
  // epilogue tiles per subgroup: 1 KB of f32 (edge blocks, staged paths; not needed when every
  // block is whole and leaves by a direct or f16 store), 512 B of f16 (halfOut)
  const f32Stage = c.epiInStage || (c.aligned && c.directStore && !c.wideOut32) ? 0 : 1024;
  const halfStage = c.halfOut && !c.epiInStage ? 512 : 0;
  const stages = c.stages ?? 2;
  const aStages = c.halfA2 ? 1.5 : (c.stagesA ?? stages);
  return copies * 2 * (aStages * a + (c.stagesB ?? stages) * b) + (f32Stage + halfStage) * c.wm * c.wn;
}

/** u32x4 elements of B's stage array (all its stages). */
function bStageWords(p: { transB?: boolean }, c: CoopConfig): number {
  const { bn } = coopTile(c);
  const rows = p.transB ? bn : c.bk, cols = p.transB ? c.bk : bn;
  return ((c.stagesB ?? c.stages ?? 2) * stageLen(rows, cols)) / 8;
}

/**
 * Whether the epilogue's tiles can live in B's stage array (CoopConfig.epiInStage): whole tiles
 * (every block leaves through the tile paths that take 4-wide or u32x4 reads), B staged in
 * 128-bit chunks (a u32x4 array), no peeled multiply after the loop, no split-K partials, and room
 * for one 1 KB f32 tile per subgroup.
 */
export function epiFitsInStage(p: { transB?: boolean }, c: CoopConfig, split: boolean): boolean {
  return !!c.aligned && c.vecB === 8 && !c.peel && !split && !c.split3 && bStageWords(p, c) >= 64 * c.wm * c.wn;
}

/**
 * Where half of A's rows can have a second stage (CoopConfig.halfA2): one shared stage, A staged
 * [m][k] (not transposed or split in bf16 halves), an even number of subgroup rows, and each
 * thread's chunk slots within one half of the rows (an even count per half for the rotated pairs,
 * which store slots two by two; coopmat-stage.ts splitRows).
 */
export function halfA2Fits(p: { transA?: boolean }, c: CoopConfig): boolean {
  if (p.transA || c.split3 || (c.stages ?? 2) !== 1 || c.stagesA || c.stagesB || c.wm % 2) return false;
  const { bm, threads } = coopTile(c);
  const rps = threads / (((c.pairK ? 2 : 1) * c.bk) / c.vecA);
  const perHalf = bm / 2 / rps;
  return Number.isInteger(rps) && Number.isInteger(perHalf) && !(c.pairRot && perHalf % 2);
}

/** What the parts of one coopmat kernel share: the problem, the config, its bindings, arrays and ids. */
export interface Kern {
  k: KernelBuilder;
  p: NormalizedProblem;
  c: CoopConfig;
  split: boolean;
  bm: number; bn: number; threads: number;
  /** What the register prefetch holds: raw f32 in split3 mode (split at store time). */
  regElem: "f16" | "bf16" | "f32";
  outElem: "f16" | "bf16" | "f32";
  tA: CoopMatType; tB: CoopMatType; tC: CoopMatType; tC32: CoopMatType;
  A: Buffer; B: Buffer; C: Buffer; bias?: Buffer; residual?: Buffer; preact?: Buffer;
  pc: Record<keyof typeof PUSH_FIELDS, Expr>;
  shA: Shared; shB: Shared; shALo?: Shared; shBLo?: Shared;
  /** The per-subgroup f32 staging tile of edge blocks and the 4-wide path (see declare). */
  f32Tile: F32Tile;
  /** The per-subgroup f16 output tile (halfOut). */
  stageH?: Shared;
  wg: Expr; lid: Expr; sg: Expr; lane: Expr;
}

export interface F32Tile {
  /** The f32 matrix x at f32x4 offset at4 (rows of 4 f32x4). */
  store(x: Expr, at4: Expr): void;
  load4(at4: Expr): Expr;
  /** Element `at`, whose place in its f32x4 is q % 4 (a compile-time lane of the word). */
  load1(at: Expr, q: number): Expr;
}

/** One tile's k-range and where its accumulators go. */
export interface TileRun {
  row0: Expr; col0: Expr; aBase: Expr; bBase: Expr; kBeg: Expr; kEnd: Expr; nt: Expr;
  sgRow: Expr; sgCol: Expr; acc: Var[][];
}

export function coopKernel(p: NormalizedProblem, c: CoopConfig, split: boolean): KernelDesc {
  const x = declare(p, c, split);
  const { k, pc, wg, bm, bn } = x;
  if (c.streamK) {
    streamKTiles(x);
    return k.finish();
  }
  const z = k.let(wg.z, "z");
  const bt = k.let(z.div(pc.splits), "bt");
  const sp = k.let(z.rem(pc.splits), "sp");
  const kBeg = k.let(sp.mul(pc.kChunk), "kbeg");
  // fuse3: the loop runs over K = K' / 3 (each k-tile stages its hi and lo parts)
  const kEnd = k.let(kBeg.add(pc.kChunk).min(c.fuse3 ? pc.k.div(3) : pc.k), "kend");
  const { row0, col0 } = tileOrigin(k, wg, bm, bn);
  const nt = k.let(kEnd.sub(kBeg.min(kEnd)).add(c.bk - 1).div(c.bk), "nt");

  const aBase = k.let(bt.mul(pc.strideA), "abase");
  const bBase = k.let(bt.mul(pc.strideB), "bbase");
  const { sgRow, sgCol, acc } = subgroupTile(x);
  const t: TileRun = { row0, col0, aBase, bBase, kBeg, kEnd, nt, sgRow, sgCol, acc };
  stagedLoop(x, t);
  epilogue(x, t, k.let(split ? sp.mul(pc.batch).add(bt).mul(pc.strideC) : bt.mul(pc.strideC), "cbase"));
  return k.finish();
}

/** The kernel's bindings, push constants, shared arrays and invocation ids. */
function declare(p: NormalizedProblem, c: CoopConfig, split: boolean): Kern {
  const { bm, bn, threads } = coopTile(c);
  if (c.split3 && p.dtype !== "f32") throw new Error("coopmat: split3 is for f32 inputs");
  const elem = p.dtype === "f32" ? (c.split3 ? "bf16" : "f16") : p.dtype;
  const regElem = c.split3 ? "f32" : elem;
  const accElem = p.accF16 ? "f16" : "f32";
  const tA: CoopMatType = coopmat("a", elem, CM, CM);
  const tB: CoopMatType = coopmat("b", elem, CM, CM);
  const tC: CoopMatType = coopmat("acc", accElem, CM, CM);
  const tC32: CoopMatType = coopmat("acc", "f32", CM, CM);
  const k = kernel(coopName(p, c, split), { workgroup: [threads] });
  const A = k.buffer("a", p.dtype, "read");
  const B = k.buffer("b", p.dtype, "read");
  const outElem = split ? "f32" : p.outDtype;
  const C = k.buffer("c", outElem, "write");
  const epi = split ? {} : epilogueBuffers(k, p);
  const pc = k.push(PUSH_FIELDS);

  // the shared A tile is [k][m] when A is transposed in memory
  const aRows = p.transA ? c.bk : bm, aCols = p.transA ? bm : c.bk;
  const bRows = p.transB ? bn : c.bk, bCols = p.transB ? c.bk : bn;
  const aLen = stageLen(aRows, aCols), bLen = stageLen(bRows, bCols);
  const stages = c.stages ?? 2;
  if ((c.stagesA || c.stagesB) && (stages !== 1 || (c.stagesA && c.stagesB))) throw new Error("coopmat: one operand in two stages goes with one stage for the other");
  if (c.halfA2 && !halfA2Fits(p, c)) throw new Error("coopmat: half of A in two stages does not hold for this tile (halfA2Fits)");
  // halfA2: the first half of A's rows in two stages, the second in one (three half tiles)
  const shA = c.halfA2 ? stageArray(k, "sha", elem, c.vecA, (3 * aLen) / 2, 1) : stageArray(k, "sha", elem, c.vecA, aLen, c.stagesA ?? stages);
  const shB = stageArray(k, "shb", elem, c.vecB, bLen, c.stagesB ?? stages);
  if (c.fuse3 && (!c.kSeg2 || !c.aligned || c.pairK || c.streamK || c.halfA2 || c.stagesA || c.stagesB || c.split3)) {
    throw new Error("coopmat: fused hi/lo products need two-block aligned operands, no pair staging, stream-K or second stages");
  }
  const lo = c.split3 || c.fuse3;
  const shALo = lo ? stageArray(k, "shalo", elem, c.vecA, aLen, c.stagesA ?? stages) : undefined;
  const shBLo = lo ? stageArray(k, "shblo", elem, c.vecB, bLen, c.stagesB ?? stages) : undefined;
  const nsg = c.wm * c.wn;
  // the f32 staging tile of edge blocks and the 4-wide path, declared only when some path uses it;
  // with epiInStage it is B's stage array (u32x4: stores of the f32 matrix through it, reads
  // bitcast), free for the epilogue because every staged k-loop ends with a workgroup barrier
  if (c.epiInStage && !epiFitsInStage(p, c, split)) throw new Error("coopmat: the epilogue tiles do not fit in B's stage here");
  const epiSh = c.epiInStage ? shB : undefined;
  let stageArr: Shared | undefined;
  const stageF32 = (): Shared => (stageArr ??= k.shared("stage", "f32", 256 * nsg));
  const f32Tile: F32Tile = {
    store: (x, at4) => (epiSh ? epiSh.cmStore(x, at4, CM / 4, "row") : stageF32().vec(4).cmStore(x, at4, CM / 4, "row")),
    load4: (at4) => (epiSh ? epiSh.load(at4).bitcast("f32x4") : stageF32().vec(4).load(at4)),
    load1: (at, q) => (epiSh ? epiSh.load(at.div(4)).swz("xyzw"[q % 4]).bitcast("f32") : stageF32().load(at)),
  };
  const stageH = c.halfOut ? (epiSh ?? k.shared("stageh", "u32x4", TILE_SLOT * nsg)) : undefined;

  const wg = k.let(k.workgroupId, "wg");
  const lid = k.let(k.localIndex, "lid");
  const sg = k.let(k.subgroupId, "sg");
  const lane = k.let(k.subgroupInvocation, "lane");
  return {
    k, p, c, split, bm, bn, threads, regElem, outElem, tA, tB, tC, tC32, A, B, C, ...epi, pc,
    shA, shB, shALo, shBLo, f32Tile, stageH, wg, lid, sg, lane,
  };
}

/** The subgroup's place in the tile and its sm×sn accumulators (zeroed). */
function subgroupTile({ k, c, sg, tC }: Kern): Pick<TileRun, "sgRow" | "sgCol" | "acc"> {
  const sgRow = k.let(sg.div(c.wn).mul(c.sm * CM), "sgrow");
  const sgCol = k.let(sg.rem(c.wn).mul(c.sn * CM), "sgcol");
  const acc: Var[][] = [];
  for (let i = 0; i < c.sm; i++) {
    acc.push([]);
    for (let j = 0; j < c.sn; j++) acc[i].push(k.var(tC, k.cmFill(tC, 0), `acc${i}_${j}`));
  }
  return { sgRow, sgCol, acc };
}

/**
 * Stream-K (streamk.ts): workgroup `lin` walks the segments of its unit range; whole tiles get the
 * epilogue, partial ones go to the workspace (the binding after the epilogue's) for the fixup.
 */
function streamKTiles(x: Kern): void {
  const { k, c, pc, wg, sg, bm, bn, split } = x;
  if (split || !c.aligned) throw new Error("coopmat: stream-K needs aligned tiles without split-K");
  const ws = k.buffer("ws", x.p.accF16 ? "f16" : "f32", "write");
  const unit = streamKUnit(c);
  const { sgRow, sgCol, acc } = subgroupTile(x);
  const g = streamKGeometry(k, pc, bm, bn, unit);
  const range = streamKRange(k, g, k.let(wg.x, "lin"));
  k.for(0, range.segments, (q) => {
    // epiInStage: the previous segment's epilogue read B's stage array, which this one's k-loop writes
    if (c.epiInStage) k.barrier();
    const seg = streamKSegment(k, g, range, q, unit);
    const { bt, row0, col0 } = streamKTile(k, g, seg.tile, bm, bn);
    const nt = k.let(seg.kEnd.sub(seg.kBeg).div(c.bk), "nt");
    const aBase = k.let(bt.mul(pc.strideA), "abase");
    const bBase = k.let(bt.mul(pc.strideB), "bbase");
    for (const row of acc) for (const a of row) a.set(k.cmFill(x.tC, 0));
    const t: TileRun = { row0, col0, aBase, bBase, kBeg: seg.kBeg, kEnd: seg.kEnd, nt, sgRow, sgCol, acc };
    stagedLoop(x, t);
    k.if(seg.whole, () => epilogue(x, t, k.let(bt.mul(pc.strideC), "cbase")), () => {
      // a partial tile: the range's first tile goes to slot 2c, its last to 2c + 1, each 16×16
      // block as 256 contiguous elements (whole lines; streamk.ts partialBlock)
      const slot = k.let(select(q.eq(0), range.cta.mul(2), range.cta.mul(2).add(1)), "slot");
      const at = k.let(slot.mul(bm * bn).add(sg.mul(c.sm * c.sn * CM * CM)), "wsbase");
      for (let i = 0; i < c.sm; i++) {
        for (let j = 0; j < c.sn; j++) ws.cmStore(read(acc[i][j]), at.add((i * c.sn + j) * CM * CM), CM, "row");
      }
    });
  }, { name: "seg" });
}

/** The k-loop over the tile's k-range: tiles staged and pipelined by coopmat-stage.ts (pair staging: coopmat-pair.ts). */
function stagedLoop(x: Kern, t: TileRun): void {
  const { k, p, c, bm, bn, threads, pc } = x;
  const aRows = p.transA ? c.bk : bm, aCols = p.transA ? bm : c.bk;
  const bRows = p.transB ? bn : c.bk, bCols = p.transB ? c.bk : bn;
  const aLen = stageLen(aRows, aCols), bLen = stageLen(bRows, bCols);
  const al = !!c.aligned;
  if (c.kSeg2 && !al) throw new Error("coopmat: two-block presplit operands need aligned tiles");
  // kSeg2: the K extent of each block (K' / 3), the K-contiguous leading dim (2K), and each
  // operand's block per third of K' (A: hi, hi, lo; B: hi, lo, hi); bounds are never checked
  const seg = c.kSeg2 ? k.let(pc.k.div(3), "kseg") : undefined;
  const kLd = seg ? k.let(seg.mul(2), "kld") : pc.k;
  // fuse3: k origins stay in [0, K) (the hi block); the lo tiles are staged by the twins below
  const physA = (k0: Expr): Expr => (seg && !c.fuse3 ? k.let(select(k0.ge(seg), k0.sub(seg), k0), "ka0") : k0);
  const physB = (k0: Expr): Expr => (seg && !c.fuse3 ? k.let(select(k0.ge(seg.mul(2)), k0.sub(seg.mul(2)), k0), "kb0") : k0);
  // split3 splits f32 into sh and shLo while storing; fuse3 stages the lo parts as operands of their own
  const shALo = c.split3 ? x.shALo : undefined, shBLo = c.split3 ? x.shBLo : undefined;
  const mkA = (k0: Expr): Stage => p.transA
    ? { buf: x.A, sh: x.shA, shLo: shALo, rows: aRows, cols: aCols, vw: c.vecA, aligned: al, r0: physA(k0), rLimit: t.kEnd, c0: t.row0, cLimit: pc.m, ld: pc.m, base: t.aBase }
    : { buf: x.A, sh: x.shA, shLo: shALo, rows: bm, cols: c.bk, vw: c.vecA, aligned: al, r0: t.row0, rLimit: pc.m, c0: physA(k0), cLimit: t.kEnd, ld: kLd, base: t.aBase };
  const mkB = (k0: Expr): Stage => p.transB
    ? { buf: x.B, sh: x.shB, shLo: shBLo, rows: bRows, cols: bCols, vw: c.vecB, aligned: al, r0: t.col0, rLimit: pc.n, c0: physB(k0), cLimit: t.kEnd, ld: kLd, base: t.bBase }
    : { buf: x.B, sh: x.shB, shLo: shBLo, rows: bRows, cols: bCols, vw: c.vecB, aligned: al, r0: physB(k0), rLimit: t.kEnd, c0: t.col0, cLimit: pc.n, ld: pc.n, base: t.bBase };
  // fuse3's lo tiles: K further along a K-contiguous operand's rows ([hi | lo], ld 2K), K rows
  // further down a stacked one ([hi ; lo]); aligned, so the limits are never read
  const loOf = (hi: (k0: Expr) => Stage, kContig: boolean, sh: Shared) => (k0: Expr): Stage => {
    const s = hi(k0);
    return kContig ? { ...s, sh, c0: k.let(s.c0.add(seg!), "klo") } : { ...s, sh, r0: k.let(s.r0.add(seg!), "klo") };
  };
  const prefetch = c.prefetch ?? 1;
  const operand = (one: (k0: Expr) => Stage, len: number, tag: string, pair: boolean, rowPair: boolean): Operand => {
    // a pair operand's loads describe two k-tiles at an even tile's origin: cols = 2·bk for a
    // K-contiguous one, rows = 2·bk for the other (pairRows)
    if (rowPair) {
      const atRows = (k0: Expr): Stage => ({ ...one(k0), rows: 2 * c.bk });
      const rs = pairRowSlots(k, atRows(t.kBeg), x.lid, threads, tag);
      const regsR = Array.from({ length: prefetch }, () => chunkRegs(k, atRows(t.kBeg), rs.slots, x.regElem, tag));
      return { at: atRows, slots: rs.slots, regs: regsR, len, slotHalf: rs.slotHalf };
    }
    const at = pair ? (k0: Expr): Stage => ({ ...one(k0), cols: 2 * c.bk }) : one;
    const s0 = at(t.kBeg);
    const paired = !pair ? undefined : c.pairRot ? pairRotSlots(k, s0, x.lid, threads, tag) : pairSlots(k, s0, x.lid, threads, tag);
    const slots = paired?.slots ?? chunkSlots(k, s0, x.lid, threads, tag);
    const regs = Array.from({ length: prefetch }, () => chunkRegs(k, s0, slots, x.regElem, tag));
    return { at, slots, regs, len, half: paired?.half, rotated: !!paired && !!c.pairRot };
  };
  const opA: Operand = { ...operand(mkA, aLen, "a", !!c.pairK && !p.transA, !!c.pairK && !!c.pairRows && p.transA), ...(c.stagesA ? { stages: c.stagesA } : {}) };
  const opB: Operand = { ...operand(mkB, bLen, "b", !!c.pairK && !!p.transB, !!c.pairK && !!c.pairRows && !p.transB), ...(c.stagesB ? { stages: c.stagesB } : {}) };
  const paired = [opA, opB].some((o) => o.half || o.slotHalf);
  // halfA2: A's first half of rows in two stages, its second in one; each subgroup reads one half
  const perRowA = ((c.pairK ? 2 : 1) * c.bk) / c.vecA;
  // fuse3: the lo twins after A and B, at the same stage offsets (same lengths and stage counts)
  const los = c.fuse3 && x.shALo && x.shBLo
    ? [operand(loOf(mkA, !p.transA, x.shALo), aLen, "al", false, false), operand(loOf(mkB, !!p.transB, x.shBLo), bLen, "bl", false, false)]
    : [];
  const ops = c.halfA2 ? [...splitRows(opA, bm, c.bk + PAD, threads, perRowA), opB] : [opA, opB, ...los];
  const topRows = c.halfA2 ? k.let(t.sgRow.lt(bm / 2), "atop") : undefined;
  (paired ? pairedPipeline : pipeline)(k, { bk: c.bk, stages: c.stages ?? 2, prefetch, regElem: x.regElem, aligned: al, peel: al && !!c.peel }, ops, t.kBeg, t.nt, (cur) => {
    const curA = topRows ? k.let(select(topRows, cur[0], cur[1]), "ca") : cur[0];
    const curB = c.halfA2 ? cur[cur.length - 1] : cur[1];
    // the 16-deep steps of a k-tile: one driver-unrolled loop (loopK) or unrolled here
    if (c.loopK && c.bk > CM) k.for(0, c.bk / CM, (kk) => mma(x, t, curA, curB, kk), { name: "kk", unroll: true });
    else for (let kk = 0; kk < c.bk / CM; kk++) mma(x, t, curA, curB, kk);
  });
}

/** The products of k-step kk of the staged tiles at curA, curB (split3: the hi/lo terms too). */
function mma(x: Kern, t: TileRun, curA: Expr, curB: Expr, kk: Expr | number): void {
  const { k, p, c, bm, bn } = x;
  const aCols = p.transA ? bm : c.bk, bCols = p.transB ? c.bk : bn;
  const a: Expr[] = [], aLo: Expr[] = [];
  const kq = (n: number) => (typeof kk === "number" ? kk * n : kk.mul(n));
  for (let i = 0; i < c.sm; i++) {
    const idx = k.let(p.transA
      ? curA.add(kq(CM * (aCols + PAD))).add(t.sgRow).add(i * CM)
      : curA.add(t.sgRow.add(i * CM).mul(aCols + PAD)).add(kq(CM)), "ai");
    a.push(fragLoad(x.shA, c.vecA, x.tA, idx, aCols + PAD, p.transA ? "col" : "row"));
    if (x.shALo) aLo.push(fragLoad(x.shALo, c.vecA, x.tA, idx, aCols + PAD, p.transA ? "col" : "row"));
  }
  const b: Expr[] = [], bLo: Expr[] = [];
  for (let j = 0; j < c.sn; j++) {
    const idx = k.let(p.transB
      ? curB.add(t.sgCol.add(j * CM).mul(bCols + PAD)).add(kq(CM))
      : curB.add(kq(CM * (bCols + PAD))).add(t.sgCol).add(j * CM), "bi");
    b.push(fragLoad(x.shB, c.vecB, x.tB, idx, bCols + PAD, p.transB ? "col" : "row"));
    if (x.shBLo) bLo.push(fragLoad(x.shBLo, c.vecB, x.tB, idx, bCols + PAD, p.transB ? "col" : "row"));
  }
  for (let i = 0; i < c.sm; i++)
    for (let j = 0; j < c.sn; j++) {
      if (x.shALo && x.shBLo) {
        // (split3, fuse3) small terms first: they are below the rounding of the big one
        t.acc[i][j].set(k.cmMulAdd(aLo[i], b[j], read(t.acc[i][j])));
        t.acc[i][j].set(k.cmMulAdd(a[i], bLo[j], read(t.acc[i][j])));
      }
      t.acc[i][j].set(k.cmMulAdd(a[i], b[j], read(t.acc[i][j])));
    }
}
