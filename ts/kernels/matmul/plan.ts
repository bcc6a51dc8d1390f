// The one entry point the backend calls: planMatmul(problem, caps) -> the kernels to dispatch.
// Pure (no device access): it picks a variant (forced, given, or the default heuristic), builds
// the kernel descriptions (memoized) and computes dispatch sizes and push constants.
//
// Contract for callers (HeliosBackend):
//   const plan = planMatmul({m, n, k, batch, transA, transB, broadcastB, dtype, outDtype, accF16,
//                            epilogue: {scale, bias, act, residual, geluGrad}}, caps, {variant?})
//   (or chooseMatmul(runtime, problem) in autotune.ts: same plan, tuned and cached per shape class;
//   tuning submits its own batches, so call it with no batch open, or pass {tune: false} to get
//   the cached winner or the default without timing anything)
//   - layouts: A batch×M×K row-major (K×M when transA), B batch×K×N (N×K when transB; one K×N for
//     every batch when broadcastB), C batch×M×N row-major; bias length N, residual and preact
//     batch×M×N in the output dtype; all contiguous, element offsets < 2^32.
//   - plan.steps: dispatch each in order in one batch: compileKernel(step.desc) (memoize the
//     handle), buffers = step.bindings.map(role => yours[role]) with roles A, B, C, bias, residual,
//     preact, workspace, groups = step.groups, push = step.push (40 bytes).
//   - plan.scratch: for each role there (workspace: split-K partials or stream-K partial tiles;
//     splitA/splitB: presplit bf16 operands), bind a scratch buffer of at least that many bytes (fully overwritten before it is
//     read; may be leased and released after the batch).
//   - each step's push constants: step.push (packed), or step.pushFields + step.pushValues.
//   - C is fully overwritten (no read of C). plan.variant names the choice (bench rows, tuning
//     cache, HELIOS_MATMUL_VARIANT).
//   - bf16 needs a device with bf16 cooperative matrices; f32 is exact (SIMT, the in-kernel bf16x3
//     split cm3_*, or a bf16 tile over presplit hi/lo operands x3_*) unless allowLowPrecisionF32 /
//     a forced cm_* variant computes it on f16 tiles.
//   run.ts recordPlan(runtime, plan, buffers) does exactly this for the bench and tuner.
import type { KernelDesc } from "../../ir/index.js";
import { checkU32 } from "../common.js";
import { ceilDiv, epilogueRoles, isPlainEpilogue, packPush, PUSH_FIELDS, pushValues, type BindingRole, type PushValues, type ScratchRole } from "./common.js";
import { coopKernel, coopSharedBytes, coopTile, epiFitsInStage, halfA2Fits, type CoopConfig } from "./coopmat.js";
import type { ChunkWidth } from "./coopmat-stage.js";
import { readMatmulConfig } from "./config.js";
import { presplitKernel, presplitLimit, SPLIT_PUSH, splitJobs, type SplitJob } from "./presplit.js";
import { normalize, type MatmulProblem, type NormalizedProblem } from "./problem.js";
import { reduceKernel, REDUCE_THREADS } from "./reduce.js";
import { fixupKernel, FIXUP_SPAN, streamKSchedule, streamKUnit, type StreamKSchedule } from "./streamk.js";
import { simtBk, simtKernel, type SimtConfig } from "./simt.js";
import { VARIANTS, variantByName, withSplits, type VariantSpec } from "./variants.js";

/** The device facts the planner needs (a subset of the native DeviceInfo). */
export interface MatmulCaps {
  coopMatSupported: boolean;
  coopMat2Supported?: boolean;
  coopMatShapes?: readonly { m: number; n: number; k: number; a: string; b: string; c: string; result: string; scope?: string }[];
  f16Supported?: boolean;
  bf16Supported?: boolean;
  subgroupSize: number;
  maxSharedMemoryBytes: number;
  /** Multiprocessor count if known (sizes split-K and tile choice); 132 (H200) otherwise. */
  computeUnits?: number;
}

export interface MatmulStep {
  desc: KernelDesc;
  /** Workgroup counts. */
  groups: [number, number, number];
  push: ArrayBuffer;
  /** The same push constants as a record over `pushFields` (for callers with their own packing). */
  pushFields: Readonly<Record<string, "u32" | "f32">>;
  pushValues: Readonly<Record<string, number>>;
  /** What to bind at each binding index. */
  bindings: BindingRole[];
}

export interface MatmulPlan {
  /** Variant name (the key of VARIANTS): appears in bench rows and the tuning cache. */
  variant: string;
  spec: VariantSpec;
  problem: NormalizedProblem;
  steps: MatmulStep[];
  /** Bytes of each scratch buffer the caller binds (absent roles: none). */
  scratch: Partial<Record<ScratchRole, number>>;
  /** f32 inputs computed through f16 tensor-core tiles (not exact f32: ~5e-4 relative). */
  lowPrecision: boolean;
}

export interface PlanOptions {
  /** A variant name (HELIOS_MATMUL_VARIANT, the tuner's winner). */
  variant?: string;
  /** Allow f32 inputs on f16 tensor-core tiles in the default choice. */
  allowLowPrecisionF32?: boolean;
  /**
   * Unchecked staging loads where the tiles divide M, N and K (default: HELIOS_MATMUL_ALIGNED,
   * on). false keeps the bounds-checked kernel for every problem (the A/B control).
   */
  aligned?: boolean;
  /**
   * How whole output blocks reach global memory: "wide" (default: f16 through a shared f16 tile
   * and one 16-byte store per lane where N % 8 == 0; f32 and split-K partials through the f32
   * tile and two 16-byte stores per lane where N % 4 == 0), "coopmat" (a coopmat store straight to
   * global memory, the A/B control), "staged4" (f16: an f32 shared tile and 8-byte stores).
   * Default: HELIOS_MATMUL_STORE (wide).
   */
  outStore?: "wide" | "coopmat" | "staged4";
  /**
   * Offer and default to the presplit variants (x3_*) for f32 inputs on devices with bf16
   * cooperative matrices. Default: HELIOS_MATMUL_PRESPLIT (on).
   */
  presplit?: boolean;
  /**
   * Stream-K twins (`<tile>_stk`) run as stream-K where they apply, and the tuner and the default
   * may choose them (default: HELIOS_MATMUL_STREAMK, on); false plans a twin as its tile.
   */
  streamK?: boolean;
  /**
   * The `_a2`/`_b2` twins keep one operand in two shared stages where it fits, and the tuner races
   * them (default: HELIOS_MATMUL_TWO_STAGE, on); false plans a twin as its one-stage tile.
   */
  twoStage?: boolean;
  /** Internal (planPresplit → the inner bf16 plan): A and B hold two K blocks (CoopConfig.kSeg2). */
  kSeg2?: boolean;
  /** Internal, with kSeg2: the fused form (CoopConfig.fuse3) of the inner tile `spec`. */
  fuse3?: boolean;
  /** Internal: the variant itself (a fused presplit variant's inner tile is not in the table). */
  spec?: VariantSpec;
}

let fromEnv: { aligned: boolean; outStore: NonNullable<PlanOptions["outStore"]>; presplit: boolean; streamK: boolean; twoStage: boolean } | undefined;
/** HELIOS_MATMUL_ALIGNED, _STORE, _PRESPLIT, _STREAMK and _TWO_STAGE, read once. */
function envDefaults(): NonNullable<typeof fromEnv> {
  fromEnv ??= readMatmulConfig();
  return fromEnv;
}

const descCache = new Map<string, KernelDesc>();

function memo(key: string, build: () => KernelDesc): KernelDesc {
  let d = descCache.get(key);
  if (!d) {
    d = build();
    descCache.set(key, d);
  }
  return d;
}

function hasShape(caps: MatmulCaps, elem: string, acc: string): boolean {
  if (!caps.coopMatSupported) return false;
  const shapes = caps.coopMatShapes;
  if (!shapes || shapes.length === 0) return elem !== "bf16" || !!caps.bf16Supported;
  return shapes.some((s) => s.m === 16 && s.n === 16 && s.k === 16 && s.a === elem && s.b === elem &&
    s.c === acc && s.result === acc && (s.scope === undefined || s.scope === "subgroup"));
}

/** Whether `v` computes f32 inputs through f16 tiles (gate 1e-2 instead of 1e-4). */
export function isLowPrecision(v: VariantSpec, p: NormalizedProblem): boolean {
  return p.dtype === "f32" && v.kind !== "simt" && v.kind !== "presplit" && !(v.kind === "coop" && v.cfg.split3);
}

/** The bf16 product a presplit variant runs for f32 problem p: K' = 3K over hi/lo operands. */
export function presplitProblem(p: NormalizedProblem): NormalizedProblem {
  return normalize({ ...p, k: 3 * p.k, dtype: "bf16" });
}

/** The problem whose K the variant's kernel loops over (split-K and tile choices use it): K' = 3K, or K when fused. */
function loopProblem(v: VariantSpec, p: NormalizedProblem): NormalizedProblem {
  return v.kind === "presplit" && p.dtype === "f32" && !v.fused ? presplitProblem(p) : p;
}

/** A tile config as the fused presplit products run it (CoopConfig.fuse3): two-block operands, one stage per operand, no pair staging or stream-K. */
function fusedForm(cfg: CoopConfig): CoopConfig {
  return { ...cfg, kSeg2: true, fuse3: true, pairK: undefined, streamK: undefined, stagesA: undefined, stagesB: undefined, halfA2: undefined, epiInStage: undefined };
}

/** The config of fused presplit variant v's inner tile on f32 problem p, or why it cannot run p. */
function fusedConfig(v: Extract<VariantSpec, { kind: "presplit" }>, p: NormalizedProblem, caps: MatmulCaps): CoopConfig | string {
  // whole tiles: every k-tile's hi and lo parts are inside their blocks
  if (!envDefaults().aligned || !isAligned(p, v.inner)) return "the fused hi/lo products need whole tiles (M, N, K multiples of the tile)";
  const pp = presplitProblem(p);
  const cfg = fusedForm(coopConfig(pp, v.inner, caps, v.splits > 1, true, envDefaults().outStore, false));
  const bytes = coopSharedBytes(pp, cfg);
  return bytes > caps.maxSharedMemoryBytes ? `needs ${bytes} B shared memory (device: ${caps.maxSharedMemoryBytes})` : cfg;
}

/** Why `v` cannot run `p` on this device, or null when it can. */
export function unsupported(v: VariantSpec, p: NormalizedProblem, caps: MatmulCaps): string | null {
  if (v.kind === "simt") {
    if (p.dtype === "bf16") return "the SIMT path does not read bf16";
    return null;
  }
  if (v.kind === "presplit") {
    if (p.dtype !== "f32") return "the presplit variants are for f32 inputs";
    if (p.outDtype !== "f32") return "the presplit variants write f32";
    const limit = presplitLimit(p);
    if (limit || !v.fused) return limit ?? unsupported(v.inner, presplitProblem(p), caps);
    const inner = unsupported(v.inner, presplitProblem(p), caps);
    if (inner) return inner;
    const cfg = fusedConfig(v, p, caps);
    return typeof cfg === "string" ? cfg : null;
  }
  if (v.cfg.split3 && p.dtype !== "f32") return "the bf16x3 split is for f32 inputs";
  const elem = p.dtype === "f32" ? (v.cfg.split3 ? "bf16" : "f16") : p.dtype;
  if (!hasShape(caps, elem, p.accF16 ? "f16" : "f32")) return `no 16x16x16 ${elem} cooperative matrix on this device`;
  if (caps.subgroupSize !== 32) return `cooperative-matrix kernels assume subgroup size 32 (device: ${caps.subgroupSize})`;
  // with the output path the planner would choose (aligned problems need no f32 edge tile)
  const cfg = coopConfig(p, v, caps, v.splits > 1, envDefaults().aligned, envDefaults().outStore, envDefaults().twoStage);
  const bytes = coopSharedBytes(p, cfg);
  if (bytes > caps.maxSharedMemoryBytes) return `needs ${bytes} B shared memory (device: ${caps.maxSharedMemoryBytes})`;
  return null;
}

function tileOf(v: VariantSpec): { bm: number; bn: number; bk: number } {
  if (v.kind === "presplit") return tileOf(v.inner);
  if (v.kind === "simt") return { bm: v.cfg.bm, bn: v.cfg.bn, bk: simtBk(v.cfg) };
  const t = coopTile({ ...v.cfg, vecA: 1, vecB: 1 });
  return { bm: t.bm, bn: t.bn, bk: v.cfg.bk };
}

/** Workgroups of a grid of bm×bn tiles over the problem's batches. */
function gridTiles(p: { m: number; n: number; batch: number }, bm: number, bn: number): number {
  return ceilDiv(p.m, bm) * ceilDiv(p.n, bn) * p.batch;
}

/** Split-K factor for small M·N with long K: fill about two waves of workgroups. */
export function defaultSplits(problem: NormalizedProblem, v: VariantSpec, units: number): number {
  const p = loopProblem(v, problem);
  const { bm, bn, bk } = tileOf(v);
  const wgs = gridTiles(p, bm, bn);
  let s = 1;
  while (s < 16 && wgs * s * 2 <= units * 2 && p.k / (s * 2) >= 4 * bk && p.k >= 1024) s *= 2;
  return s;
}

/** The default variant without tuning: tensor cores for 16-bit inputs, SIMT for exact f32. */
export function defaultVariant(p: NormalizedProblem, caps: MatmulCaps, opts: PlanOptions = {}): VariantSpec {
  const units = caps.computeUnits ?? 132;
  const coopOk = (name: string) => unsupported(variantByName(name), p, caps) === null;
  if (p.dtype === "f32" && !opts.allowLowPrecisionF32 && (opts.presplit ?? envDefaults().presplit) && coopOk("x3_cm_64x64x32_w2x2")) {
    // the bf16 tile the planner would pick for the tripled-K product, over presplit operands
    const inner = defaultVariant(presplitProblem(p), caps, opts);
    const twin = variantByName(`x3_${inner.name}`);
    // The big tile whole (no stream-K, no split) is a poor f32 default: on the H100 (device call
    // 5, session 18) its x3 form took 6.77 ms at 4096³ and 20.7 at 8192³ against 1.35 and 10.8 for
    // x3 of the 4-subgroup 128×128 tile with the peeled last k-tile, the tuner's pick for those
    // shapes and for most large f32 classes in the shipped data (H100 and H200).
    const peeled = VARIANTS.get("x3_cm_128x128x32_w2x2_v128_s1_pl");
    if (inner.name === "cm_128x256x32_w2x4_v128_s1" && peeled && unsupported(peeled, p, caps) === null) return peeled;
    if (unsupported(twin, p, caps) === null) return twin;
  }
  const useCoop = (p.dtype !== "f32" || opts.allowLowPrecisionF32) && coopOk("cm_64x64x32_w2x2");
  if (p.dtype === "bf16" && !useCoop) {
    throw new Error(`bf16 matmul needs bf16 cooperative matrices (${unsupported(variantByName("cm_64x64x32_w2x2"), p, caps)}); convert to f16 or f32 on this device`);
  }
  let base: VariantSpec;
  if (useCoop) {
    // H100 run 4 sweep (bench/results/h100-matmul-run4): 128×256×16 (8 subgroups × 4×4) is the
    // fastest tile at 2048³ and 4096³; 128×128×32 with 8 subgroups (4×2 each) next and best for
    // 4096×512×14336; the 4-subgroup 128×128 tile is 1.4× slower than either.
    const wgs256 = gridTiles(p, 128, 256);
    const wgs128 = gridTiles(p, 128, 128);
    // (4096×512×14336: 128 workgroups of 128×128 at 158 TF/s beat 512 of 64×64 at 63)
    // H100 run 15 (bench/results/h100-matmul128-run15): the single-stage 32-deep 128-bit tile
    // cm_128x256x32_w2x4_v128_s1 beats cm_128x256x16_w2x4 at 4096³ (198 vs 157 TF/s) and 8192³
    // (239 vs 189), with 232 registers instead of 255 and no spills.
    const big = coopOk("cm_128x256x32_w2x4_v128_s1") ? "cm_128x256x32_w2x4_v128_s1" : "cm_128x256x16_w2x4";
    // H100 session 5 (unchecked loads on whole tiles): the 4-subgroup single-stage 128×128 tile
    // beats cm_128x128x32_w2x4 on grids under one wave of 128×256 (2048³: 227 vs 182 TF/s)
    const medium = coopOk("cm_128x128x32_w2x2_v128_s1") ? "cm_128x128x32_w2x2_v128_s1" : "cm_128x128x32_w2x4";
    const tile = wgs256 >= units ? big : 2 * wgs128 >= units ? medium : "cm_64x64x32_w2x2";
    // B K-contiguous: the all-operand pair-staged twin (H200 session 9: NT +7-18 %, TT 0 to +9 %;
    // in NN it depends on the tile, -9 to +2 %, so the tuner decides there)
    const paired = p.transB && VARIANTS.has(`${tile}_kpa`) ? `${tile}_kpa` : tile;
    // the big tile over more than a wave whose last wave is far from full: the stream-K twin
    // (H200 session 10: 3072³, 2.18 waves of 128×256 tiles, +24 % with f32 accumulation)
    const twin = VARIANTS.get(`${paired}_stk`);
    const streamK = (opts.streamK ?? envDefaults().streamK) && tile === big && twin && streamKHelps(twin, p, units) && waveWaste(p, twin, units) > 0.1;
    base = streamK && twin ? twin : variantByName(paired);
  } else {
    const wgs = gridTiles(p, 128, 128);
    base = variantByName(wgs >= units ? "simt_128x128_8x8_sm" : "simt_64x64_4x4");
  }
  return withSplits(base, defaultSplits(p, base, units));
}

/** Candidate variants the tuner times for this problem (supported ones only). */
export function candidateVariants(p: NormalizedProblem, caps: MatmulCaps, opts: PlanOptions = {}): VariantSpec[] {
  const units = caps.computeUnits ?? 132;
  const out: VariantSpec[] = [];
  const coop = p.dtype !== "f32" || opts.allowLowPrecisionF32;
  const presplit = opts.presplit ?? envDefaults().presplit;
  for (const v of VARIANTS.values()) {
    if (v.splits !== 1) continue;
    // f32 inputs: SIMT and the accurate bf16x3 forms always; f16 tiles only when allowed
    const accurateF32 = (v.kind === "coop" && !!v.cfg.split3) || v.kind === "presplit";
    if (v.kind === "presplit" && !presplit) continue;
    // pair-staged tiles differ from their twins only where an operand is K-contiguous
    if ((v.kind === "coop" && v.cfg.pairK && !hasKContiguous(p)) || (v.kind === "presplit" && v.inner.cfg.pairK)) continue;
    if (v.kind !== "simt" && !coop && !accurateF32) continue;
    if (unsupported(v, p, caps)) continue;
    // more than 16 f32 accumulators per subgroup spill (see variants.ts)
    const cfg = v.kind === "presplit" ? v.inner.cfg : v.kind === "coop" ? v.cfg : undefined;
    if (cfg && cfg.sm * cfg.sn > 16 && !p.accF16) continue;
    if (cfg && (cfg.stagesA || cfg.stagesB || cfg.halfA2) && !(opts.twoStage ?? envDefaults().twoStage)) continue;
    // stream-K twins: only where the tiles are whole and leave a partial last wave
    if (cfg?.streamK) {
      if ((opts.streamK ?? envDefaults().streamK) && streamKHelps(v, p, units)) out.push(v);
      continue;
    }
    const s = defaultSplits(p, v, units);
    out.push(v);
    if (s > 1) out.push(withSplits(v, s));
    // deeper splits while the grid stays within about two waves of two workgroups per SM: the
    // weight-gradient products (M·N of one wave or less, K = tokens) gain from them on the H100
    const lp = loopProblem(v, p);
    const { bm, bn, bk } = tileOf(v);
    const wgs = gridTiles(lp, bm, bn);
    for (const d of [2 * s, 4 * s]) {
      if (d <= 16 && lp.k >= 1024 && lp.k / d >= 4 * bk && wgs * d <= 4 * units) out.push(withSplits(v, d));
    }
  }
  return out;
}

/** Workgroup slots a one-per-SM grid of v's tiles leaves idle in its last wave, as a fraction of the work (0 under one wave). */
function waveWaste(p: NormalizedProblem, v: VariantSpec, units: number): number {
  const { bm, bn } = tileOf(v);
  const tiles = gridTiles(p, bm, bn);
  return tiles < units ? 0 : Math.ceil(tiles / units) / (tiles / units) - 1;
}

/** Whether a stream-K twin would run as stream-K on p (whole tiles, a tile count off whole waves). */
function streamKHelps(v: VariantSpec, problem: NormalizedProblem, units: number): boolean {
  const p = loopProblem(v, problem);
  const { bm, bn, bk } = tileOf(v);
  if (!envDefaults().aligned || p.m % bm || p.n % bn || p.k % bk) return false;
  return streamKSchedule(gridTiles(p, bm, bn), units) !== null;
}

function simtConfig(p: NormalizedProblem, v: Extract<VariantSpec, { kind: "simt" }>, split: boolean, allowAligned: boolean): SimtConfig {
  const contigA = p.transA ? p.m : p.k;
  const contigB = p.transB ? p.k : p.n;
  const { bm, bn, bk } = tileOf(v);
  const aligned = allowAligned && p.m > 0 && p.n > 0 && p.k > 0 && p.m % bm === 0 && p.n % bn === 0 && p.k % bk === 0;
  return {
    ...v.cfg,
    ...(aligned ? { aligned } : {}),
    vecA: p.transA && contigA % 4 === 0 && p.k % 4 === 0,
    vecB: !p.transB && contigB % 4 === 0,
    // the split-K partials are f32 whatever the output dtype
    vecOut: p.n % 4 === 0 && (p.outDtype === "f32" || split),
  };
}

function coopConfig(p: NormalizedProblem, v: Extract<VariantSpec, { kind: "coop" }>, caps: MatmulCaps, split: boolean, allowAligned: boolean, outStore: PlanOptions["outStore"] = "wide", twoStage = true): CoopConfig {
  const contigA = p.transA ? p.m : p.k;
  const contigB = p.transB ? p.k : p.n;
  // The k extent of a tile ends at K (or a split boundary, a multiple of bk): vector chunks along
  // k need K % 4 == 0 too. 128-bit chunks of 16-bit data (wide variants) need % 8: every chunk is
  // then 16-byte aligned (bindings start at offset 0; batch strides are multiples of 8 halves)
  // and wholly inside or outside the matrix; otherwise the variant runs with 64-bit chunks.
  const width = (contig: number): ChunkWidth => {
    if (v.cfg.wide && p.dtype !== "f32" && contig % 8 === 0 && p.k % 8 === 0) return 8;
    return contig % 4 === 0 && p.k % 4 === 0 ? 4 : 1;
  };
  const directStore = split || p.outDtype === "f32" || (p.outDtype === "f16" && hasShape(caps, "f16", "f16") && outStore !== "staged4");
  const cfg: CoopConfig = {
    ...v.cfg,
    vecA: width(contigA),
    vecB: width(contigB),
    directStore,
    halfOut: directStore && !split && p.outDtype === "f16" && p.n % 8 === 0 && outStore === "wide",
    wideOut32: (split || p.outDtype === "f32") && p.n % 4 === 0 && outStore === "wide",
    vecOut: p.n % 4 === 0,
    aligned: allowAligned && isAligned(p, v),
  };
  // 16-bit outputs without an accumulator of their type (bf16): 16-byte stores from the f32 tile
  // (plain epilogue only: that is the path which stores whole blocks from the tile, vecStaged)
  cfg.wideOut16 = !directStore && !split && isPlainEpilogue(p.epilogue) && p.outDtype !== "f32" && p.n % 8 === 0 && outStore === "wide";
  if (cfg.pairK && !pairable(p, cfg, split)) cfg.pairK = undefined;
  // the rotated form: 128-bit chunks on every K-contiguous operand, an even slot count per operand,
  // 8-row multiples per slot
  if (cfg.pairRot && !(cfg.pairK && rotatable(p, cfg))) cfg.pairRot = undefined;
  if (cfg.pairRows && !(cfg.pairK && rowPairable(p, cfg))) cfg.pairRows = undefined;
  // a second stage for one operand goes only where it fits beside the output path the tile takes
  // without it, with the epilogue's tiles moved into B's stage array if need be (bf16 and f32
  // output on whole tiles); elsewhere, or with HELIOS_MATMUL_TWO_STAGE=0, the twin is its tile
  if (cfg.halfA2 && !halfA2Fits(p, cfg)) cfg.halfA2 = undefined;
  if ((cfg.stagesA || cfg.stagesB || cfg.halfA2) && (!twoStage || coopSharedBytes(p, cfg) > caps.maxSharedMemoryBytes)) {
    if (twoStage && epiFitsInStage(p, cfg, split)) cfg.epiInStage = true;
    if (!twoStage || coopSharedBytes(p, cfg) > caps.maxSharedMemoryBytes) {
      cfg.epiInStage = undefined;
      cfg.stagesA = undefined;
      cfg.stagesB = undefined;
      cfg.halfA2 = undefined;
    }
  }
  // the f16 output tile must fit beside the staged k-tiles (edge problems keep the f32 tile too)
  if ((cfg.halfOut || cfg.wideOut32) && coopSharedBytes(p, cfg) > caps.maxSharedMemoryBytes) {
    cfg.halfOut = false;
    cfg.wideOut32 = false;
  }
  return cfg;
}

/**
 * Where pair staging (CoopConfig.pairK) holds: some operand K-contiguous, whole tiles, one k-range
 * (no split-K), an even number of k-tiles, and each K-contiguous operand's pair rows split over
 * the threads with a thread's chunks in one k-tile of the pair.
 */
function pairable(p: NormalizedProblem, c: CoopConfig, split: boolean): boolean {
  if (!hasKContiguous(p) || !c.aligned || split || c.peel || (c.prefetch ?? 1) !== 1 || p.k % (2 * c.bk) !== 0) return false;
  const { bm, bn, threads } = coopTile(c);
  const fits = (rows: number, vw: number) => threads % ((2 * c.bk) / vw) === 0 && (rows * ((2 * c.bk) / vw)) % threads === 0;
  return (p.transA || fits(bm, c.vecA)) && (!p.transB || fits(bn, c.vecB));
}

function rotatable(p: NormalizedProblem, c: CoopConfig): boolean {
  const { bm, bn, threads } = coopTile(c);
  const ok = (rows: number, vw: number) => {
    const perRow = (2 * c.bk) / vw;
    return vw === 8 && ((rows * perRow) / threads) % 2 === 0 && (threads / perRow) % 8 === 0;
  };
  return (p.transA || ok(bm, c.vecA)) && (!p.transB || ok(bn, c.vecB));
}

/** Row-pair staging (CoopConfig.pairRows) of the operands whose rows run along K. */
function rowPairable(p: NormalizedProblem, c: CoopConfig): boolean {
  const { bm, bn, threads } = coopTile(c);
  const ok = (cols: number, vw: number) => threads % (cols / vw) === 0 && c.bk % (threads / (cols / vw)) === 0;
  return (!p.transA || ok(bm, c.vecA)) && (!!p.transB || ok(bn, c.vecB));
}

/** An operand whose rows run along K: A in NN/NT, B in NT/TT. */
function hasKContiguous(p: { transA?: boolean; transB?: boolean }): boolean {
  return !p.transA || !!p.transB;
}

/** Whole tiles everywhere (and at least one k-tile): the unchecked staging loads are safe. */
function isAligned(p: NormalizedProblem, v: Extract<VariantSpec, { kind: "coop" }>): boolean {
  if ((v.cfg.prefetch ?? 1) !== 1) return false;
  const { bm, bn } = coopTile({ ...v.cfg, vecA: 1, vecB: 1 });
  return p.m > 0 && p.n > 0 && p.k > 0 && p.m % bm === 0 && p.n % bn === 0 && p.k % v.cfg.bk === 0;
}

function problemKey(p: NormalizedProblem): string {
  const e = p.epilogue;
  return [p.dtype, p.outDtype, p.accF16, p.transA, p.transB, e.scale !== 1, e.bias && e.biasDtype, e.act, e.residual, e.geluGrad].join("|");
}

export function planMatmul(problem: MatmulProblem, caps: MatmulCaps, opts: PlanOptions = {}): MatmulPlan {
  const p = normalize(problem);
  const spec = opts.spec ?? (opts.variant ? variantByName(opts.variant) : defaultVariant(p, caps, opts));
  const why = unsupported(spec, p, caps);
  if (why) throw new Error(`matmul variant ${spec.name}: ${why}`);
  if (spec.kind === "presplit") return planPresplit(p, spec, caps, opts);
  const { bm, bn, bk } = tileOf(spec);
  // fuse3: the kernel loops over K = K' / 3, and split-K chunks count K
  const kLoop = opts.fuse3 ? p.k / 3 : p.k;
  const kChunk = Math.max(bk, ceilDiv(ceilDiv(kLoop, spec.splits), bk) * bk);
  const splits = ceilDiv(kLoop, kChunk);
  const split = splits > 1;
  const pv = pushValues(p, splits, kChunk);
  let desc: KernelDesc;
  if (spec.kind === "simt") {
    const cfg = simtConfig(p, spec, split, opts.aligned ?? envDefaults().aligned);
    desc = memo(`simt|${JSON.stringify(cfg)}|${split}|${problemKey(p)}`, () => simtKernel(p, cfg, split));
  } else {
    const cfg = coopConfig(p, spec, caps, split, opts.aligned ?? envDefaults().aligned, opts.outStore ?? envDefaults().outStore, opts.twoStage ?? envDefaults().twoStage);
    if (opts.kSeg2) {
      if (!cfg.aligned || p.k % 3 !== 0) throw new Error(`helios: internal error: matmul variant ${spec.name}: two-block operands need an aligned tile`);
      cfg.kSeg2 = true;
      // a pair could straddle two blocks of K'
      cfg.pairK = undefined;
      // the operands hold 2K of K' = 3K per row or block
      pv.strideA = (pv.strideA / 3) * 2;
      pv.strideB = (pv.strideB / 3) * 2;
      if (opts.fuse3) Object.assign(cfg, fusedForm(cfg));
    }
    const bytes = coopSharedBytes(p, cfg);
    if (bytes > caps.maxSharedMemoryBytes) throw new Error(`matmul variant ${spec.name}: needs ${bytes} B shared memory here (device: ${caps.maxSharedMemoryBytes})`);
    const sk = cfg.streamK && (opts.streamK ?? envDefaults().streamK) ? streamKFor(p, cfg, caps, split) : null;
    if (!sk) cfg.streamK = undefined;
    desc = memo(`coop|${JSON.stringify(cfg)}|${split}|${problemKey(p)}`, () => coopKernel(p, cfg, split));
    if (sk) return planStreamK(p, spec, cfg, desc, pv, sk);
  }
  const push = packPush(pv);
  const main: MatmulStep = {
    desc,
    groups: [ceilDiv(p.n, bn), ceilDiv(p.m, bm), p.batch * splits],
    push,
    pushFields: PUSH_FIELDS,
    pushValues: pv,
    bindings: split
      ? ["A", "B", "workspace"]
      : ["A", "B", "C", ...epilogueRoles(p)],
  };
  if (main.groups[1] > 65535 || main.groups[2] > 65535) throw new Error(`matmul ${p.m}x${p.n}x${p.k}: grid too large`);
  const steps = [main];
  if (split) {
    const total = p.batch * p.m * p.n;
    steps.push({
      desc: memo(`reduce|${problemKey(p)}`, () => reduceKernel(p)),
      groups: [Math.min(65535, ceilDiv(total, REDUCE_THREADS)), 1, 1],
      push,
      pushFields: PUSH_FIELDS,
      pushValues: pv,
      bindings: ["workspace", "C", ...epilogueRoles(p)],
    });
  }
  return {
    variant: spec.name,
    spec,
    problem: p,
    steps,
    scratch: split ? { workspace: splits * p.batch * p.m * p.n * 4 } : {},
    lowPrecision: isLowPrecision(spec, p),
  };
}

/** Where a stream-K twin runs as stream-K: its schedule, or null (then it is the plain tile). */
function streamKFor(p: NormalizedProblem, cfg: CoopConfig, caps: MatmulCaps, split: boolean): StreamKSchedule | null {
  const unit = streamKUnit(cfg);
  if (split || !cfg.aligned || p.k % unit !== 0) return null;
  const { bm, bn } = coopTile(cfg);
  const s = streamKSchedule(gridTiles(p, bm, bn), caps.computeUnits ?? 132);
  return s && s.dp + s.ctas <= 65535 ? s : null;
}

/** The stream-K kernel over D + P workgroups, then the fixup of the split tiles (streamk.ts). */
function planStreamK(p: NormalizedProblem, spec: VariantSpec, cfg: CoopConfig, desc: KernelDesc, pv0: PushValues, sk: StreamKSchedule): MatmulPlan {
  const { bm, bn } = coopTile(cfg);
  const unit = streamKUnit(cfg);
  const pv: PushValues = { ...pv0, kChunk: sk.dp, splits: sk.ctas };
  const push = packPush(pv);
  const epi = epilogueRoles(p);
  return {
    variant: spec.name,
    spec,
    problem: p,
    steps: [
      { desc, groups: [sk.dp + sk.ctas, 1, 1], push, pushFields: PUSH_FIELDS, pushValues: pv, bindings: ["A", "B", "C", ...epi, "workspace"] },
      {
        desc: memo(`streamk|${cfg.wm}|${cfg.wn}|${cfg.sm}|${cfg.sn}|${unit}|${p.accF16}|${problemKey(p)}`,
          () => fixupKernel(p, { wm: cfg.wm, wn: cfg.wn, sm: cfg.sm, sn: cfg.sn, unit })),
        groups: [sk.skTiles * ((bm * bn) / FIXUP_SPAN), 1, 1],
        push, pushFields: PUSH_FIELDS, pushValues: pv, bindings: ["workspace", "C", ...epi],
      },
    ],
    scratch: { workspace: 2 * sk.ctas * bm * bn * (p.accF16 ? 2 : 4) },
    lowPrecision: isLowPrecision(spec, p),
  };
}

/**
 * Split A and B into bf16 hi/lo operands (two small dispatches), then the inner bf16 plan. Where
 * the inner tile is aligned (whole k-tiles) the operands are two K blocks [hi | lo] and the
 * kernel maps each third of K' to its block (CoopConfig.kSeg2): a third less to write than the
 * three-block layout, and a third less scratch.
 */
function planPresplit(p: NormalizedProblem, spec: Extract<VariantSpec, { kind: "presplit" }>, caps: MatmulCaps, opts: PlanOptions): MatmulPlan {
  const pp = presplitProblem(p);
  const inner0 = spec.inner;
  const twoBlocks = inner0.kind === "coop" && (opts.aligned ?? envDefaults().aligned) && isAligned(pp, inner0);
  if (spec.fused && !twoBlocks) throw new Error(`matmul variant ${spec.name}: the fused hi/lo products need whole tiles`);
  const inner = planMatmul(pp, caps, { ...opts, variant: undefined, spec: spec.inner, kSeg2: twoBlocks, fuse3: !!spec.fused });
  const jobs = splitJobs(p, twoBlocks ? 2 : 3);
  const splitStep = (job: SplitJob, from: BindingRole, to: BindingRole): MatmulStep => {
    const buf = new ArrayBuffer(8);
    new Uint32Array(buf).set([checkU32("n", job.push.n), checkU32("seg", job.push.seg)]);
    return {
      desc: memo(`presplit|${job.vec4}|${job.lo}|${job.blocks}`, () => presplitKernel(job.vec4, job.lo, job.blocks)),
      groups: job.groups,
      push: buf,
      pushFields: SPLIT_PUSH,
      pushValues: job.push,
      bindings: [from, to],
    };
  };
  const rename = (r: BindingRole): BindingRole => (r === "A" ? "splitA" : r === "B" ? "splitB" : r);
  return {
    variant: spec.name,
    spec,
    problem: p,
    steps: [
      splitStep(jobs.a, "A", "splitA"),
      splitStep(jobs.b, "B", "splitB"),
      ...inner.steps.map((st) => ({ ...st, bindings: st.bindings.map(rename) })),
    ],
    scratch: { ...inner.scratch, splitA: jobs.a.bytes, splitB: jobs.b.bytes },
    lowPrecision: false,
  };
}
