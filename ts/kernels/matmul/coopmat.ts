// Tensor-core matmul through subgroup-scope cooperative matrices (SPV_KHR_cooperative_matrix).
//
// Contract
//   bindings  0 A (read), 1 B (read), 2 C (write; f32 workspace under split-K),
//             then bias (read) and residual (read) when the epilogue uses them (not under split-K),
//             then, with streamK, the partial-tile workspace (write; streamk.ts)
//   push      PUSH_FIELDS (common.ts; streamK: kChunk = data-parallel tiles, splits = stream-K workgroups)
//   dispatch  [ceil(N/BN), ceil(M/BM), batch·splits] (streamK: [D + P, 1, 1]), workgroup 32·wm·wn
//             (subgroup size 32)
// Tiling: a workgroup owns a BM×BN tile (BM = wm·sm·16, BN = wn·sn·16); each of its wm×wn subgroups
// owns sm×sn 16×16 accumulators. K advances in bk-deep tiles staged in shared memory in the
// operand's own layout (so global→shared copies are straight, coalesced vector copies: 64-bit for
// 16-bit inputs, 128-bit for f32), rows padded by 8 elements (16 bytes) so that the 8 rows an
// ldmatrix-style load touches fall in distinct banks. Two shared stages plus a register prefetch:
// tile t+1 is read from global while tile t is multiplied; one barrier per k-tile.
// Edges: out-of-range elements are staged as zeros (clamped addresses, never an out-of-bounds
// read); output blocks fully inside C with a plain epilogue are stored directly, others go through a
// per-subgroup 16×16 f32 staging tile where each lane applies the epilogue to 8 elements and
// bounds-checks its stores.
// Numerics: f16/bf16 inputs, f32 accumulation (or f16 with accF16). f32 inputs are rounded to f16
// when staged ("tc-f16" path): relative Frobenius error ~5e-4 on unit-scale data, so it is not the
// default f32 path (the gate for exact f32 is 1e-4); values beyond ±65504 overflow.
import {
  coopmat, kernel, lit, packHalves, select, type Buffer, type CoopMatType, type Expr, type KernelBuilder,
  type KernelDesc, type Shared, type ValueType, type Var,
} from "../../ir/index.js";
import { activate, applyEpilogue, PUSH_FIELDS, type EpilogueRefs, read, tileOrigin, epilogueTag, isPlainEpilogue } from "./common.js";
import {
  chunkRegs, chunkSlots, fragLoad, PAD, pipeline, splitRows, stageArray, stageLen, type ChunkWidth, type Operand, type Stage,
} from "./coopmat-stage.js";
import { pairedPipeline, pairRotSlots, pairRowSlots, pairSlots } from "./coopmat-pair.js";
import { transposedSlots } from "./coopmat-probes.js";
import type { NormalizedProblem } from "./problem.js";
import { streamKGeometry, streamKRange, streamKSegment, streamKTile, streamKUnit } from "./streamk.js";
import { storeTileF16, TILE_SLOT } from "../store-tile.js";

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
  /** The output blocks' epilogue as one driver-unrolled IR loop over an accumulator array. */
  loopEpi?: boolean;
  /**
   * Mark the k-tile loop DontUnroll. H100 run 11's kernel stats show 255 registers for every
   * coopmat tile, 64×64 ones included: if the driver unrolls the k-loop for ILP, this is the
   * probe that tells (fewer registers could mean two workgroups per SM).
   */
  noUnrollK?: boolean;
  /**
   * Store full, plain-epilogue blocks straight from the accumulator (converted to the output type),
   * which needs an accumulator coopmat of the output type on the device (never bf16).
   */
  directStore?: boolean;
  /**
   * Load A and B fragments straight from global memory (no shared staging, no barriers in the
   * k-loop; L1 serves the reuse). Needs M, N, K multiples of 16 and 16-bit inputs.
   */
  direct?: boolean;
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
  /** Tile rows per band of the workgroup order (tileOrigin; default GROUP_ROWS). Name tag `_gN`. */
  groupRows?: number;
  /**
   * Presplit operands in two K blocks (presplit.ts): the kernel loops over K' = 3K (push k) while
   * A and B hold [hi | lo] along K (2K), and each k-tile's origin maps to its block: A reads
   * hi, hi, lo and B hi, lo, hi over the three thirds of K'. Needs aligned (whole k-tiles, K % bk
   * == 0, so no tile straddles two thirds). Name tag `_k2`.
   */
  kSeg2?: boolean;
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
   * A K-contiguous (NN, NT) staged transposed, as a `[k][m]` tile loaded column-major the way TN
   * loads it: 8×8 blocks transposed across lanes with subgroup shuffles between the global load
   * and the shared store (coopmat-probes.ts transposedSlots). Probe of what A's row-major staging
   * costs in NN (bench/MATMUL_NOTES.md, round 9). Planner: whole tiles, bk 32, 128-bit chunks.
   * Name tag `_ta`.
   */
  stageAT?: boolean;
  /**
   * K-contiguous tiles staged in spread chunk order (coopmat-probes.ts spreadSlots): conflict-free
   * 128-bit shared stores where row order has 2-way bank conflicts, but each 8-lane group of a
   * load then touches 8 lines; a probe, 6–40 % slower. Name tag `_sp`.
   */
  spread?: boolean;
  /**
   * Stream-K (streamk.ts): the tiles beyond the last whole wave are shared out by k-iterations,
   * partial tiles go to the workspace (binding after bias/residual) and a fixup dispatch finishes
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

export const CM = 16;

export function coopTile(c: CoopConfig): { bm: number; bn: number; threads: number } {
  return { bm: c.wm * c.sm * CM, bn: c.wn * c.sn * CM, threads: 32 * c.wm * c.wn };
}

export function coopName(p: NormalizedProblem, c: CoopConfig, split: boolean): string {
  const { bm, bn } = coopTile(c);
  const t = `${p.transA ? "T" : "N"}${p.transB ? "T" : "N"}`;
  const e = p.epilogue;
  const epi = split ? "_split" : epilogueTag(e);
  const input = p.dtype === "f32" ? (c.split3 ? "f32bf16x3" : "f32tc16") : p.dtype;
  const store = `${c.aligned ? (c.peel ? "_alp" : "_al") : ""}${c.directStore ? (c.halfOut ? "_so8" : c.wideOut32 ? "_so4" : "") : c.vecOut ? (c.wideOut16 ? "_staged8" : "_staged4") : "_staged"}`;
  const pipe = `${(c.stages ?? 2) !== 2 ? `_s${c.stages}` : ""}${(c.prefetch ?? 1) !== 1 ? `_pf${c.prefetch}` : ""}${c.loopK ? "_lk" : ""}${c.loopEpi ? "_le" : ""}${c.noUnrollK ? "_du" : ""}${c.groupRows ? `_g${c.groupRows}` : ""}${c.pairK ? `${c.pairRot ? "_kpr" : "_kp"}${c.pairRows ? "a" : ""}` : ""}${c.stageAT ? "_ta" : ""}${c.spread ? "_sp" : ""}${c.stagesA ? "_a2" : ""}${c.stagesB ? "_b2" : ""}${c.halfA2 ? "_ah2" : ""}${c.epiInStage ? "_es" : ""}${c.streamK ? "_stk" : ""}`;
  return `mm_cm${c.direct ? "d" : ""}_${input}_${p.accF16 ? "acc16" : "acc32"}_${p.outDtype}_${bm}x${bn}x${c.bk}_w${c.wm}x${c.wn}_${t}_v${c.vecA}${c.vecB}${pipe}${store}${c.kSeg2 ? "_k2" : ""}${epi}`;
}

/** Shared bytes a config needs (its stages of A and B, plus the epilogue staging tiles). */
export function coopSharedBytes(p: { dtype: string; transA?: boolean; transB?: boolean }, c: CoopConfig): number {
  const { bm, bn } = coopTile(c);
  if (c.direct) return 4 * 256 * c.wm * c.wn;
  const copies = c.split3 ? 2 : 1;
  const a = p.transA || c.stageAT ? c.bk * (bm + PAD) : bm * (c.bk + PAD);
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
  return !!c.aligned && c.vecB === 8 && !c.peel && !split && !c.split3 && !c.direct && bStageWords(p, c) >= 64 * c.wm * c.wn;
}

/**
 * Where half of A's rows can have a second stage (CoopConfig.halfA2): one shared stage, A staged
 * [m][k] in row order (not transposed, spread or split in bf16 halves), an even number of subgroup
 * rows, and each thread's chunk slots within one half of the rows (an even count per half for the
 * rotated pairs, which store slots two by two; coopmat-stage.ts splitRows).
 */
export function halfA2Fits(p: { transA?: boolean }, c: CoopConfig): boolean {
  if (p.transA || c.stageAT || c.spread || c.split3 || c.direct || (c.stages ?? 2) !== 1 || c.stagesA || c.stagesB || c.wm % 2) return false;
  const { bm, threads } = coopTile(c);
  const rps = threads / (((c.pairK ? 2 : 1) * c.bk) / c.vecA);
  const perHalf = bm / 2 / rps;
  return Number.isInteger(rps) && Number.isInteger(perHalf) && !(c.pairRot && perHalf % 2);
}

export function coopKernel(p: NormalizedProblem, c: CoopConfig, split: boolean): KernelDesc {
  const { bm, bn, threads } = coopTile(c);
  if (c.split3 && p.dtype !== "f32") throw new Error("coopmat: split3 is for f32 inputs");
  const elem = p.dtype === "f32" ? (c.split3 ? "bf16" : "f16") : p.dtype;
  /** What the register prefetch holds: raw f32 in split3 mode (split at store time). */
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
  const e = p.epilogue;
  const bias = !split && e.bias ? k.buffer("bias", p.outDtype, "read") : undefined;
  const residual = !split && e.residual ? k.buffer("residual", p.outDtype, "read") : undefined;
  const pc = k.push(PUSH_FIELDS);

  // the shared A tile is [k][m] when A is transposed in memory or staged transposed
  const aT = p.transA || !!c.stageAT;
  const aRows = aT ? c.bk : bm, aCols = aT ? bm : c.bk;
  const bRows = p.transB ? bn : c.bk, bCols = p.transB ? c.bk : bn;
  const aLen = stageLen(aRows, aCols), bLen = stageLen(bRows, bCols);
  const stages = c.stages ?? 2;
  if ((c.stagesA || c.stagesB) && (stages !== 1 || (c.stagesA && c.stagesB))) throw new Error("coopmat: one operand in two stages goes with one stage for the other");
  if (c.halfA2 && !halfA2Fits(p, c)) throw new Error("coopmat: half of A in two stages does not hold for this tile (halfA2Fits)");
  // halfA2: the first half of A's rows in two stages, the second in one (three half tiles)
  const shA = c.direct ? undefined : c.halfA2 ? stageArray(k, "sha", elem, c.vecA, (3 * aLen) / 2, 1) : stageArray(k, "sha", elem, c.vecA, aLen, c.stagesA ?? stages);
  const shB = c.direct ? undefined : stageArray(k, "shb", elem, c.vecB, bLen, c.stagesB ?? stages);
  const shALo = c.split3 ? stageArray(k, "shalo", elem, c.vecA, aLen, c.stagesA ?? stages) : undefined;
  const shBLo = c.split3 ? stageArray(k, "shblo", elem, c.vecB, bLen, c.stagesB ?? stages) : undefined;
  const nsg = c.wm * c.wn;
  // the f32 staging tile of edge blocks and the 4-wide path, declared only when some path uses it;
  // with epiInStage it is B's stage array (u32x4: stores of the f32 matrix through it, reads
  // bitcast), free for the epilogue because every staged k-loop ends with a workgroup barrier
  if (c.epiInStage && !epiFitsInStage(p, c, split)) throw new Error("coopmat: the epilogue tiles do not fit in B's stage here");
  const epiSh = c.epiInStage ? shB : undefined;
  let stageArr: Shared | undefined;
  const stageF32 = (): Shared => (stageArr ??= k.shared("stage", "f32", 256 * nsg));
  const f32Tile = {
    /** The f32 matrix x at f32x4 offset at4 (rows of 4 f32x4). */
    store: (x: Expr, at4: Expr) => (epiSh ? epiSh.cmStore(x, at4, CM / 4, "row") : stageF32().vec(4).cmStore(x, at4, CM / 4, "row")),
    load4: (at4: Expr): Expr => (epiSh ? epiSh.load(at4).bitcast("f32x4") : stageF32().vec(4).load(at4)),
    /** Element `at`, whose place in its f32x4 is q % 4 (a compile-time lane of the word). */
    load1: (at: Expr, q: number): Expr => (epiSh ? epiSh.load(at.div(4)).swz("xyzw"[q % 4]).bitcast("f32") : stageF32().load(at)),
  };
  const stageH = c.halfOut ? (epiSh ?? k.shared("stageh", "u32x4", TILE_SLOT * nsg)) : undefined;

  const wg = k.let(k.workgroupId, "wg");
  const lid = k.let(k.localIndex, "lid");
  const sg = k.let(k.subgroupId, "sg");
  const lane = k.let(k.subgroupInvocation, "lane");
  /** The k-loop over [kBeg, kEnd) of the tile at (row0, col0), into acc. */
  const kLoop = (t: TileRun) => {
    const { row0, col0, aBase, bBase, kBeg, kEnd, nt, sgRow, sgCol, acc } = t;
    if (c.direct) {
      directLoop(k, p, c, { A, B, tA, tB, acc, aBase, bBase, row0, col0, sgRow, sgCol, kBeg, kEnd, m: pc.m, n: pc.n, k: pc.k });
    } else {
      stagedLoop(k, p, c, {
        A, B, shA: shA!, shB: shB!, shALo, shBLo, tA, tB, acc, aBase, bBase, row0, col0, sgRow, sgCol, kBeg, kEnd, nt,
        m: pc.m, n: pc.n, k: pc.k, lid, regElem,
      });
    }
  };
  /** The tile's output blocks: epilogue and store to C (cBase: the batch's first element of C). */
  const epilogue = (t: TileRun, cBase: Expr) => {
    const { row0, col0, sgRow, sgCol, acc } = t;
    const refs: EpilogueRefs = { scale: pc.scale, bias, residual, dtype: p.outDtype };
    const plainEpi = isPlainEpilogue(e);
    const plain = (split || plainEpi) && !!c.directStore;
    // Full blocks with an epilogue apply it on the accumulator fragment (no staging round trip, no
    // per-element bounds checks): scale as a coopmat×scalar, bias as a coopmat loaded with stride 0
    // (every row reads the same 16 bias values), the activation element-wise over the invocation's
    // cmlen elements (it needs no index), the residual as a coopmat load of the residual tile.
    const fragEpi = !split && !plain && !!c.directStore;
    const vecStaged = !split && !c.directStore && plainEpi && !!c.vecOut;
    const stOff = k.let(sg.mul(256), "stoff");
    const tOut: CoopMatType = coopmat("acc", outElem, CM, CM);
    // Aligned tiles load each column block's bias once for all sm row blocks (every block is whole,
    // so no load sits in a branch): H200 session 10, 16384×3072×768, the bias cost 15 µs of 284
    const biasByCol: Expr[] = [];
    const biasOf = (b: Buffer, gc0: Expr, j?: number): Expr => {
      const load = () => b.cmLoad(tOut, gc0, lit("u32", 0), "row");
      if (j === undefined || !c.aligned) return load();
      return (biasByCol[j] ??= load());
    };
    const fragment = (v: Expr, gr0: Expr, gc0: Expr, j?: number): Expr => {
      const y = k.var(tC32, v.cast(tC32), "ep");
      if (e.scale !== 1) y.set(read(y).mul(pc.scale));
      if (e.bias && bias) y.set(read(y).add(biasOf(bias, gc0, j).cast(tC32)));
      if (e.act !== "none") k.for(0, k.cmLen(tC32), (q) => y.setAt(q, activate(k, e.act, y.at(q))), { name: "eq", unroll: true });
      if (e.residual && residual) {
        y.set(read(y).add(residual.cmLoad(tOut, cBase.add(gr0.mul(pc.n)).add(gc0), pc.n, "row").cast(tC32)));
      }
      return read(y).cast(tOut);
    };
    const storeBlock = (v: Expr, gr0: Expr, gc0: Expr, j?: number) => {
      const staged = () => {
        // through the 4-wide view always: the array's widest view, which its coopmat stores must use
        f32Tile.store(v.cast(tC32), stOff.div(4));
        k.barrier({ scope: "subgroup", mem: ["workgroup"] });
        for (let q = 0; q < 8; q++) {
          const flat = k.let(lane.mul(8).add(q), "fl");
          const gr = k.let(gr0.add(flat.shr(4)), "gr");
          const gc = k.let(gc0.add(flat.band(15)), "gc");
          k.if(gr.lt(pc.m).and(gc.lt(pc.n)), () => {
            const x = f32Tile.load1(stOff.add(flat), q);
            const oi = k.let(cBase.add(gr.mul(pc.n)).add(gc), "oi");
            const y = split ? x : applyEpilogue(k, p, refs, x, gc, oi);
            C.store(oi, y.cast(outElem));
          });
        }
        k.barrier({ scope: "subgroup", mem: ["workgroup"] });
      };
      // the tile through the staging array's 4-wide view (so its coopmat store uses that view
      // too); lane l writes row l/2, columns 8·(l%2) .. +8 as two 4-wide stores
      const stagedVec = (x: Expr = v.cast(tC32)) => {
        f32Tile.store(x, stOff.div(4));
        k.barrier({ scope: "subgroup", mem: ["workgroup"] });
        const r = k.let(lane.shr(1), "vr");
        const cc = k.let(lane.band(1).mul(8), "vc");
        if (c.wideOut16 && outElem !== "f32") {
          const at = k.let(stOff.add(r.mul(CM)).add(cc).div(4), "va");
          const halves = [0, 1].map((h) => k.let(f32Tile.load4(at.add(h)).cast(`${outElem}x4` as ValueType), "vh"));
          const packed = packHalves(halves.flatMap((x) => [x.swz("xy"), x.swz("zw")]));
          const oi = k.let(cBase.add(gr0.add(r).mul(pc.n)).add(gc0).add(cc), "oi");
          C.as("u32", 4).store(oi.div(8), packed);
          k.barrier({ scope: "subgroup", mem: ["workgroup"] });
          return;
        }
        for (let h = 0; h < 2; h++) {
          const x = f32Tile.load4(stOff.add(r.mul(CM)).add(cc).add(h * 4).div(4));
          const oi = k.let(cBase.add(gr0.add(r).mul(pc.n)).add(gc0).add(cc).add(h * 4), "oi");
          C.store(oi.div(4), outElem === "f32" ? x : x.cast(`${outElem}x4` as ValueType));
        }
        k.barrier({ scope: "subgroup", mem: ["workgroup"] });
      };
      const storeWhole = (x: Expr) => {
        if (stageH) storeTileF16(k, C, stageH, k.let(sg.mul(TILE_SLOT), "hs"), lane, x, cBase.add(gr0.mul(pc.n)).add(gc0), pc.n);
        else if (c.wideOut32) stagedVec(x);
        else C.cmStore(x, cBase.add(gr0.mul(pc.n)).add(gc0), pc.n, "row");
      };
      // aligned: every block is full, so the bounds test and the edge path are not generated
      const ifFull = (whole: () => void, edge: () => void) => {
        if (c.aligned) whole();
        else k.if(k.let(gr0.add(CM).le(pc.m).and(gc0.add(CM).le(pc.n)), "full"), whole, edge);
      };
      if (vecStaged) {
        ifFull(stagedVec, staged);
      } else if (plain || fragEpi) {
        ifFull(() => storeWhole(plain ? v.cast(tOut) : fragment(v, gr0, gc0, j)), staged);
      } else {
        staged();
      }
    };
    if (c.loopEpi) {
      // one driver-unrolled loop over the sm×sn blocks (the body is described once): the
      // accumulators are copied into an array indexed by the loop variable
      const accs = k.array(tC, c.sm * c.sn, "accs");
      for (let i = 0; i < c.sm; i++) for (let j = 0; j < c.sn; j++) accs.set(i * c.sn + j, read(acc[i][j]));
      k.for(0, c.sm * c.sn, (q) => {
        const gr0 = k.let(row0.add(sgRow).add(q.div(c.sn).mul(CM)), "gr0");
        const gc0 = k.let(col0.add(sgCol).add(q.rem(c.sn).mul(CM)), "gc0");
        storeBlock(accs.at(q), gr0, gc0);
      }, { name: "blk", unroll: true });
    } else {
      for (let i = 0; i < c.sm; i++) {
        for (let j = 0; j < c.sn; j++) {
          storeBlock(read(acc[i][j]), k.let(row0.add(sgRow).add(i * CM), "gr0"), k.let(col0.add(sgCol).add(j * CM), "gc0"), j);
        }
      }
    }
  };
  /** The subgroup's place in the tile and its sm×sn accumulators (zeroed). */
  const subgroupTile = () => {
    const sgRow = k.let(sg.div(c.wn).mul(c.sm * CM), "sgrow");
    const sgCol = k.let(sg.rem(c.wn).mul(c.sn * CM), "sgcol");
    const acc: Var[][] = [];
    for (let i = 0; i < c.sm; i++) {
      acc.push([]);
      for (let j = 0; j < c.sn; j++) acc[i].push(k.var(tC, k.cmFill(tC, 0), `acc${i}_${j}`));
    }
    return { sgRow, sgCol, acc };
  };
  if (c.streamK) {
    if (split || c.direct || !c.aligned) throw new Error("coopmat: stream-K needs staged, aligned tiles without split-K");
    // binding after bias and residual: the partial tiles (streamk.ts)
    const ws = k.buffer("ws", accElem, "write");
    const unit = streamKUnit(c);
    const { sgRow, sgCol, acc } = subgroupTile();
    const g = streamKGeometry(k, pc, bm, bn, unit);
    const range = streamKRange(k, g, k.let(wg.x, "lin"));
    k.for(0, range.segments, (q) => {
      // epiInStage: the previous segment's epilogue read B's stage array, which this one's k-loop writes
      if (c.epiInStage) k.barrier();
      const seg = streamKSegment(k, g, range, q, unit);
      const { bt, row0, col0 } = streamKTile(k, g, seg.tile, bm, bn, c.groupRows);
      const nt = k.let(seg.kEnd.sub(seg.kBeg).div(c.bk), "nt");
      const aBase = k.let(bt.mul(pc.strideA), "abase");
      const bBase = k.let(bt.mul(pc.strideB), "bbase");
      for (const row of acc) for (const a of row) a.set(k.cmFill(tC, 0));
      const t: TileRun = { row0, col0, aBase, bBase, kBeg: seg.kBeg, kEnd: seg.kEnd, nt, sgRow, sgCol, acc };
      kLoop(t);
      k.if(seg.whole, () => epilogue(t, k.let(bt.mul(pc.strideC), "cbase")), () => {
        // a partial tile: the range's first tile goes to slot 2c, its last to 2c + 1, each 16×16
        // block as 256 contiguous elements (whole lines; streamk.ts partialBlock)
        const slot = k.let(select(q.eq(0), range.cta.mul(2), range.cta.mul(2).add(1)), "slot");
        const at = k.let(slot.mul(bm * bn).add(sg.mul(c.sm * c.sn * CM * CM)), "wsbase");
        for (let i = 0; i < c.sm; i++) {
          for (let j = 0; j < c.sn; j++) ws.cmStore(read(acc[i][j]), at.add((i * c.sn + j) * CM * CM), CM, "row");
        }
      });
    }, { name: "seg" });
    return k.finish();
  }
  const z = k.let(wg.z, "z");
  const bt = k.let(z.div(pc.splits), "bt");
  const sp = k.let(z.rem(pc.splits), "sp");
  const kBeg = k.let(sp.mul(pc.kChunk), "kbeg");
  const kEnd = k.let(kBeg.add(pc.kChunk).min(pc.k), "kend");
  const { row0, col0 } = tileOrigin(k, wg, bm, bn, c.groupRows);
  const nt = k.let(kEnd.sub(kBeg.min(kEnd)).add(c.bk - 1).div(c.bk), "nt");

  const aBase = k.let(bt.mul(pc.strideA), "abase");
  const bBase = k.let(bt.mul(pc.strideB), "bbase");
  const { sgRow, sgCol, acc } = subgroupTile();
  const t: TileRun = { row0, col0, aBase, bBase, kBeg, kEnd, nt, sgRow, sgCol, acc };
  kLoop(t);
  epilogue(t, k.let(split ? sp.mul(pc.batch).add(bt).mul(pc.strideC) : bt.mul(pc.strideC), "cbase"));
  return k.finish();
}

/** One tile's k-range and where its accumulators go. */
interface TileRun {
  row0: Expr; col0: Expr; aBase: Expr; bBase: Expr; kBeg: Expr; kEnd: Expr; nt: Expr;
  sgRow: Expr; sgCol: Expr; acc: Var[][];
}

interface StagedRefs {
  A: Buffer; B: Buffer; shA: Shared; shB: Shared; shALo?: Shared; shBLo?: Shared;
  tA: CoopMatType; tB: CoopMatType; acc: Var[][];
  aBase: Expr; bBase: Expr; row0: Expr; col0: Expr; sgRow: Expr; sgCol: Expr;
  kBeg: Expr; kEnd: Expr; nt: Expr; m: Expr; n: Expr; k: Expr; lid: Expr;
  regElem: "f16" | "bf16" | "f32";
}

/** The k-loop of the shared-staged variants: tiles staged and pipelined by coopmat-stage.ts (pair staging: coopmat-pair.ts). */
function stagedLoop(k: KernelBuilder, p: NormalizedProblem, c: CoopConfig, r: StagedRefs): void {
  const { bm, bn, threads } = coopTile(c);
  // aT: the shared A tile is [k][m] (A transposed in memory, or staged transposed: stageAT)
  const aT = p.transA || !!c.stageAT;
  const aRows = aT ? c.bk : bm, aCols = aT ? bm : c.bk;
  const bRows = p.transB ? bn : c.bk, bCols = p.transB ? c.bk : bn;
  const aLen = stageLen(aRows, aCols), bLen = stageLen(bRows, bCols);
  const al = !!c.aligned;
  if (c.stageAT && (p.transA || c.pairK)) throw new Error("coopmat: transposed staging is for a K-contiguous A without pair staging");
  if (c.kSeg2 && !al) throw new Error("coopmat: two-block presplit operands need aligned tiles");
  // kSeg2: the K extent of each block (K' / 3), the K-contiguous leading dim (2K), and each
  // operand's block per third of K' (A: hi, hi, lo; B: hi, lo, hi); bounds are never checked
  const seg = c.kSeg2 ? k.let(r.k.div(3), "kseg") : undefined;
  const kLd = seg ? k.let(seg.mul(2), "kld") : r.k;
  const physA = (k0: Expr): Expr => (seg ? k.let(select(k0.ge(seg), k0.sub(seg), k0), "ka0") : k0);
  const physB = (k0: Expr): Expr => (seg ? k.let(select(k0.ge(seg.mul(2)), k0.sub(seg.mul(2)), k0), "kb0") : k0);
  // stageAT: the lane's row in its 8-lane group (set by the slots below, read when storing)
  let aT8: Expr | undefined;
  const mkA = (k0: Expr): Stage => p.transA
    ? { buf: r.A, sh: r.shA, shLo: r.shALo, rows: aRows, cols: aCols, vw: c.vecA, aligned: al, r0: physA(k0), rLimit: r.kEnd, c0: r.row0, cLimit: r.m, ld: r.m, base: r.aBase }
    : { buf: r.A, sh: r.shA, shLo: r.shALo, rows: bm, cols: c.bk, vw: c.vecA, aligned: al, r0: r.row0, rLimit: r.m, c0: physA(k0), cLimit: r.kEnd, ld: kLd, base: r.aBase, t8: aT8, spread: c.spread };
  const mkB = (k0: Expr): Stage => p.transB
    ? { buf: r.B, sh: r.shB, shLo: r.shBLo, rows: bRows, cols: bCols, vw: c.vecB, aligned: al, r0: r.col0, rLimit: r.n, c0: physB(k0), cLimit: r.kEnd, ld: kLd, base: r.bBase, spread: c.spread }
    : { buf: r.B, sh: r.shB, shLo: r.shBLo, rows: bRows, cols: bCols, vw: c.vecB, aligned: al, r0: physB(k0), rLimit: r.kEnd, c0: r.col0, cLimit: r.n, ld: r.n, base: r.bBase };
  const prefetch = c.prefetch ?? 1;
  const operand = (one: (k0: Expr) => Stage, len: number, tag: string, pair: boolean, rowPair = false, transposed = false): Operand => {
    // a pair operand's loads describe two k-tiles at an even tile's origin: cols = 2·bk for a
    // K-contiguous one, rows = 2·bk for the other (pairRows)
    if (rowPair) {
      const atRows = (k0: Expr): Stage => ({ ...one(k0), rows: 2 * c.bk });
      const rs = pairRowSlots(k, atRows(r.kBeg), r.lid, threads, tag);
      const regsR = Array.from({ length: prefetch }, () => chunkRegs(k, atRows(r.kBeg), rs.slots, r.regElem, tag));
      return { at: atRows, slots: rs.slots, regs: regsR, len, slotHalf: rs.slotHalf };
    }
    const at = pair ? (k0: Expr): Stage => ({ ...one(k0), cols: 2 * c.bk }) : one;
    const s0 = at(r.kBeg);
    const paired = !pair ? undefined : c.pairRot ? pairRotSlots(k, s0, r.lid, threads, tag) : pairSlots(k, s0, r.lid, threads, tag);
    let slots = paired?.slots;
    if (!slots && transposed) {
      const t = transposedSlots(k, s0, r.lid, threads, tag, bm + PAD);
      aT8 = t.t8;
      slots = t.slots;
    }
    slots ??= chunkSlots(k, s0, r.lid, threads, tag);
    const regs = Array.from({ length: prefetch }, () => chunkRegs(k, s0, slots, r.regElem, tag));
    return { at, slots, regs, len, half: paired?.half, rotated: !!paired && !!c.pairRot };
  };
  const opA: Operand = { ...operand(mkA, aLen, "a", !!c.pairK && !p.transA, !!c.pairK && !!c.pairRows && p.transA, !!c.stageAT), ...(c.stagesA ? { stages: c.stagesA } : {}) };
  const opB: Operand = { ...operand(mkB, bLen, "b", !!c.pairK && !!p.transB, !!c.pairK && !!c.pairRows && !p.transB), ...(c.stagesB ? { stages: c.stagesB } : {}) };
  const mma = (curA: Expr, curB: Expr, kk: Expr | number) => {
    const a: Expr[] = [], aLo: Expr[] = [];
    const kq = (x: number) => (typeof kk === "number" ? kk * x : kk.mul(x));
    for (let i = 0; i < c.sm; i++) {
      const idx = k.let(aT
        ? curA.add(kq(CM * (aCols + PAD))).add(r.sgRow).add(i * CM)
        : curA.add(r.sgRow.add(i * CM).mul(aCols + PAD)).add(kq(CM)), "ai");
      a.push(fragLoad(r.shA, c.vecA, r.tA, idx, aCols + PAD, aT ? "col" : "row"));
      if (r.shALo) aLo.push(fragLoad(r.shALo, c.vecA, r.tA, idx, aCols + PAD, aT ? "col" : "row"));
    }
    const b: Expr[] = [], bLo: Expr[] = [];
    for (let j = 0; j < c.sn; j++) {
      const idx = k.let(p.transB
        ? curB.add(r.sgCol.add(j * CM).mul(bCols + PAD)).add(kq(CM))
        : curB.add(kq(CM * (bCols + PAD))).add(r.sgCol).add(j * CM), "bi");
      b.push(fragLoad(r.shB, c.vecB, r.tB, idx, bCols + PAD, p.transB ? "col" : "row"));
      if (r.shBLo) bLo.push(fragLoad(r.shBLo, c.vecB, r.tB, idx, bCols + PAD, p.transB ? "col" : "row"));
    }
    for (let i = 0; i < c.sm; i++)
      for (let j = 0; j < c.sn; j++) {
        if (c.split3) {
          // small terms first: they are below the rounding of the big one
          r.acc[i][j].set(k.cmMulAdd(aLo[i], b[j], read(r.acc[i][j])));
          r.acc[i][j].set(k.cmMulAdd(a[i], bLo[j], read(r.acc[i][j])));
        }
        r.acc[i][j].set(k.cmMulAdd(a[i], b[j], read(r.acc[i][j])));
      }
  };
  const paired = [opA, opB].some((o) => o.half || o.slotHalf);
  // halfA2: A's first half of rows in two stages, its second in one; each subgroup reads one half
  const perRowA = ((c.pairK ? 2 : 1) * c.bk) / c.vecA;
  const ops = c.halfA2 ? [...splitRows(opA, bm, c.bk + PAD, threads, perRowA), opB] : [opA, opB];
  const topRows = c.halfA2 ? k.let(r.sgRow.lt(bm / 2), "atop") : undefined;
  (paired ? pairedPipeline : pipeline)(k, { bk: c.bk, stages: c.stages ?? 2, prefetch, regElem: r.regElem, unroll: c.noUnrollK ? false : undefined, aligned: al, peel: al && !!c.peel }, ops, r.kBeg, r.nt, (cur) => {
    const curA = topRows ? k.let(select(topRows, cur[0], cur[1]), "ca") : cur[0];
    const curB = cur[cur.length - 1];
    // the 16-deep steps of a k-tile: one driver-unrolled loop (loopK) or unrolled here
    if (c.loopK && c.bk > CM) k.for(0, c.bk / CM, (kk) => mma(curA, curB, kk), { name: "kk", unroll: true });
    else for (let kk = 0; kk < c.bk / CM; kk++) mma(curA, curB, kk);
  });
}

interface DirectRefs {
  A: Buffer; B: Buffer; tA: CoopMatType; tB: CoopMatType; acc: Var[][];
  aBase: Expr; bBase: Expr; row0: Expr; col0: Expr; sgRow: Expr; sgCol: Expr;
  kBeg: Expr; kEnd: Expr; m: Expr; n: Expr; k: Expr;
}

/**
 * The k-loop of the direct variant: fragments come straight from the storage buffers. Blocks past
 * M or N (whole 16-row/column blocks, since M and N are multiples of 16) load a clamped in-bounds
 * block; their results are never stored.
 */
function directLoop(k: KernelBuilder, p: NormalizedProblem, c: CoopConfig, r: DirectRefs): void {
  const rowsA: Expr[] = [];
  for (let i = 0; i < c.sm; i++) rowsA.push(k.let(r.row0.add(r.sgRow).add(i * CM).min(r.m.sub(CM)), "ra"));
  const colsB: Expr[] = [];
  for (let j = 0; j < c.sn; j++) colsB.push(k.let(r.col0.add(r.sgCol).add(j * CM).min(r.n.sub(CM)), "cb"));
  k.for(r.kBeg, r.kEnd, (kk) => {
    const a = rowsA.map((row) => p.transA
      ? r.A.cmLoad(r.tA, r.aBase.add(kk.mul(r.m)).add(row), r.m, "col")
      : r.A.cmLoad(r.tA, r.aBase.add(row.mul(r.k)).add(kk), r.k, "row"));
    const b = colsB.map((col) => p.transB
      ? r.B.cmLoad(r.tB, r.bBase.add(col.mul(r.k)).add(kk), r.k, "col")
      : r.B.cmLoad(r.tB, r.bBase.add(kk.mul(r.n)).add(col), r.n, "row"));
    for (let i = 0; i < c.sm; i++)
      for (let j = 0; j < c.sn; j++) r.acc[i][j].set(k.cmMulAdd(a[i], b[j], read(r.acc[i][j])));
  }, { step: CM, name: "kk" });
}
