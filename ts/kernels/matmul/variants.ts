// The table of shipped matmul variants: what the tuner races (plan.ts candidateVariants) and what the
// planner's default picks (defaultVariant), nothing else. A variant is a typed struct (kernel
// family, tile config, split-K factor); its name is only a key for humans, HELIOS_MATMUL_VARIANT,
// the tuning cache and the shipped tuning data — looked up in this table, never parsed. Tiles that
// lost a race are gone from it (their evidence: bench/MATMUL_NOTES.md, bench/RESULTS.md and git
// history); bench/ and tests add tiles of their own with registerLabVariants (lab/matmul-variants.ts),
// which the tuner and the default never see.
import type { CoopConfig } from "./coopmat.js";
import type { SimtConfig } from "./simt.js";

/** A coopmat tile as the table gives it; the planner adds the problem-dependent fields (coopConfig). */
export type CoopTile = Omit<CoopConfig, "vecA" | "vecB">;
export type SimtTile = Omit<SimtConfig, "vecA" | "vecB" | "vecOut">;

export type CoopSpec = { kind: "coop"; name: string; base: string; cfg: CoopTile; splits: number };

export type VariantSpec =
  | { kind: "simt"; name: string; base: string; cfg: SimtTile; splits: number }
  | CoopSpec
  // f32 inputs split once into bf16 hi/lo operands, then `inner` (a bf16 tile) over K' = 3K
  // (presplit.ts), or with `fused` over K, the three products per staged k-tile (CoopConfig.fuse3);
  // the split factor is the inner kernel's
  | { kind: "presplit"; name: string; base: string; inner: CoopSpec; splits: number; fused?: boolean };

/** Base tiles and their twins; every base also gets split-K forms and (staged 16-bit tiles) an x3_ twin. */
export interface VariantTables {
  simt?: readonly [string, SimtTile][];
  coop?: readonly [string, CoopTile][];
  /** Single-stage tiles whose one operand (or half of A) gets a second stage: `_a2`, `_b2`, `_ah2`. */
  twoStage?: readonly [string, "A" | "B" | "halfA"][];
  /** Tiles with a stream-K twin `<tile>_stk` (streamk.ts). */
  streamK?: readonly string[];
  /** Tiles that run only as fused presplit products, `x3f_<tile>` (CoopConfig.fuse3). */
  fused?: readonly [string, CoopTile][];
}

const SIMT: [string, SimtTile][] = [
  ["simt_64x64_4x4", { bm: 64, bn: 64, tm: 4, tn: 4 }],
  // _sm: the next k-tile stored halfway through the k-steps (H100 session 15, 4096³ f32 on whole
  // tiles 37.8 -> 41.5 TF/s, checked loads 33.4 -> 37.5); the default 128×128 tile
  ["simt_128x128_8x8_sm", { bm: 128, bn: 128, tm: 8, tn: 8, stageMid: true }],
  // _t128: 4 warps, 128 accumulators per thread (6 f32x4 shared reads per 128 FMAs instead of 4 per
  // 64, barriers of 4 warps): 42.1 TF/s at 4096³ on whole tiles, 30.6 at 4000³
  ["simt_128x128_8x16_t128_sm", { bm: 128, bn: 128, tm: 8, tn: 16, threads: 128, stageMid: true }],
];

// Tile shapes per shape class (see bench/MATMUL_NOTES.md): large squares want 128×128 or 128×256
// workgroup tiles with 4×4 (or 4×2) 16×16 accumulators per subgroup; medium shapes 64×128; small
// ones 64×64 plus split-K. Shared bytes (f16, NN; the epilogue staging tiles included) in the
// comments of the 128-bit tiles.
const COOP: [string, CoopTile][] = [
  ["cm_128x128x32_w2x4", { wm: 2, wn: 4, sm: 4, sn: 2, bk: 32 }],
  ["cm_128x256x16_w2x4", { wm: 2, wn: 4, sm: 4, sn: 4, bk: 16 }],
  ["cm_256x128x16_w4x2", { wm: 4, wn: 2, sm: 4, sn: 4, bk: 16 }],
  // 4 subgroups × 4×8 accumulators (64×128 per subgroup, 128 threads): half the fragment loads per
  // MMA of 4×4; only sensible with f16 accumulators (f32 ones need 256 registers: spills), so the
  // tuner offers it for accF16 only (candidateVariants).
  ["cm_128x256x16_w2x2", { wm: 2, wn: 2, sm: 4, sn: 8, bk: 16 }],
  ["cm_64x64x32_w2x2", { wm: 2, wn: 2, sm: 2, sn: 2, bk: 32 }],
  // 128-bit staging (coopmat-stage.ts): u32x4 global loads and shared stores, fragments loaded from
  // the u32x4 arrays; unaligned problems (contiguous dim or K not a multiple of 8, f32 inputs) run
  // the same tile with 64-bit chunks. _pf2: two register sets, two k-tiles in flight. _s1: one
  // shared buffer (two barriers per k-tile, NVIDIA shmem.comp's structure), which is what lets a
  // 32-deep k-tile fit beside a 128×256 or 256×128 tile (and a 64-deep one beside 128×128);
  // bk > 16 steps through a k-tile in a driver-unrolled IR loop (loopK).
  ["cm_128x256x16_w2x4_v128_pf2", { wm: 2, wn: 4, sm: 4, sn: 4, bk: 16, wide: true, prefetch: 2 }], // 37376
  ["cm_128x256x32_w2x4_v128_s1", { wm: 2, wn: 4, sm: 4, sn: 4, bk: 32, wide: true, stages: 1, loopK: true }], // 35328
  ["cm_256x128x32_w4x2_v128_s1", { wm: 4, wn: 2, sm: 4, sn: 4, bk: 32, wide: true, stages: 1, loopK: true }], // 37376
  ["cm_128x128x64_w2x4_v128_s1", { wm: 2, wn: 4, sm: 4, sn: 2, bk: 64, wide: true, stages: 1, loopK: true }], // 44032
  // 256×256 with 8 subgroups of 4×8 f16 accumulators: half the L2 traffic per flop of 128×256
  // (the f16-acc 420 TF/s target needs it); one shared buffer so it fits
  ["cm_256x256x32_w4x2_v128_s1", { wm: 4, wn: 2, sm: 4, sn: 8, bk: 32, wide: true, stages: 1, loopK: true }], // 45568
  // Pair staging (H200 session 9 runs 1–14): the K-contiguous operands load two k-tiles every other
  // k-tile, whole 128-byte lines per 8-lane group (CoopConfig.pairK); _kpa: the operand whose rows
  // run along K loads its two k-tiles together too (pairRows), so both operands load on the same
  // k-tiles; _kpr: every lane stores one chunk of each k-tile by select (pairRot). Which wins
  // depends on the tile and layout (f16 acc. 256×256 at 8192³: NN plain 390 → _kpa 405, NT 359 →
  // _kpr 407; f32 acc. 128×256 NN 302 → _kpr 317, 128×128 TT 286 → _kpa 312), so the tuner races them.
  ["cm_128x128x32_w2x2_v128_s1_kpa", { wm: 2, wn: 2, sm: 4, sn: 4, bk: 32, wide: true, stages: 1, loopK: true, pairK: true, pairRows: true }], // 23040
  ["cm_128x256x32_w2x4_v128_s1_kpa", { wm: 2, wn: 4, sm: 4, sn: 4, bk: 32, wide: true, stages: 1, loopK: true, pairK: true, pairRows: true }], // 35328
  ["cm_128x256x32_w2x4_v128_s1_kpr", { wm: 2, wn: 4, sm: 4, sn: 4, bk: 32, wide: true, stages: 1, loopK: true, pairK: true, pairRot: true }], // 35328
  // the 256×256 ones for f16 accumulation (32 accumulators per subgroup; 128×64 per subgroup, so 4
  // B fragments and 8 A per k-step)
  ["cm_256x256x32_w2x4_v128_s1_kpa", { wm: 2, wn: 4, sm: 8, sn: 4, bk: 32, wide: true, stages: 1, loopK: true, pairK: true, pairRows: true }], // 45568
  ["cm_256x256x32_w2x4_v128_s1_kpr", { wm: 2, wn: 4, sm: 8, sn: 4, bk: 32, wide: true, stages: 1, loopK: true, pairK: true, pairRot: true }], // 45568
  // 128×128 with 4 subgroups of 4×4 (64×64 each, CUTLASS's 128×128 warp layout) is 128 threads:
  // even at 255 registers two workgroups fit an SM, so their barriers no longer coincide (H100
  // run 18: 249 TF/s f16 at 8192³, 256 with f16 accumulation, 236 at 4096³ f16-acc)
  ["cm_128x128x32_w2x2_v128_s1", { wm: 2, wn: 2, sm: 4, sn: 4, bk: 32, wide: true, stages: 1, loopK: true }], // 23040
  // _pl: on aligned problems the last k-tile's multiply is peeled out of the loop (CoopConfig.peel)
  ["cm_128x128x32_w2x2_v128_s1_pl", { wm: 2, wn: 2, sm: 4, sn: 4, bk: 32, wide: true, stages: 1, loopK: true, peel: true }], // 23040
  ["cm_128x256x32_w2x4_v128_s1_pl", { wm: 2, wn: 4, sm: 4, sn: 4, bk: 32, wide: true, stages: 1, loopK: true, peel: true }], // 35328
  ["cm_128x128x64_w2x4_v128_s1_pl", { wm: 2, wn: 4, sm: 4, sn: 2, bk: 64, wide: true, stages: 1, loopK: true, peel: true }], // 44032
  // the f16-accumulation 256×256 tile (H100 session 6: 394 TF/s at 8192³, the fastest there), peeled
  ["cm_256x256x32_w4x2_v128_s1_pl", { wm: 4, wn: 2, sm: 4, sn: 8, bk: 32, wide: true, stages: 1, loopK: true, peel: true }], // 45568
  // f32 inputs as bf16 hi+lo on tensor cores (3 MMAs; twice the shared memory, so smaller tiles).
  ["cm3_64x64x32_w2x2", { wm: 2, wn: 2, sm: 2, sn: 2, bk: 32, split3: true }],
  ["cm3_128x64x16_w2x2", { wm: 2, wn: 2, sm: 4, sn: 2, bk: 16, split3: true }],
  ["cm3_64x128x16_w2x2", { wm: 2, wn: 2, sm: 2, sn: 4, bk: 16, split3: true }],
];

/**
 * One operand in two shared stages beside the other's one (CoopConfig.stagesA, stagesB; tags
 * `_a2`, `_b2`), so that operand's stores need not wait for the barrier that frees the other's
 * stage. H200 session 11 runs 2 and 6, f32 accumulation, the rotated-pair 128×256 tile: `_a2` 8192³
 * 320 → 326–329 TF/s, 2048³ 317 → 330–331; `_b2` 330 at 8192³ and 327 at 4096³ (+1.4–2.3 % over
 * `_a2`) but 299 at 2048³, and it fits only B's [k][n] tile (NN, TN; bf16 and f32 output with the
 * epilogue's tiles in B's stage, CoopConfig.epiInStage), so the tuner races both. Where the second
 * stage does not fit (edge tiles, NT for `_b2`) the planner drops it: the twin is its tile. The
 * 256×256 f16-accumulation tile has room for neither operand's second stage, only for half of A's
 * (CoopConfig.halfA2, tag `_ah2`; NN on whole tiles, the epilogue's tiles in B's stage).
 */
const TWO_STAGE: [string, "A" | "B" | "halfA"][] = [
  ["cm_128x256x32_w2x4_v128_s1_kpr", "A"], ["cm_128x256x32_w2x4_v128_s1_kpr", "B"], ["cm_256x256x32_w2x4_v128_s1_kpa", "halfA"],
];

/**
 * Tiles with a stream-K twin `<tile>_stk` (streamk.ts): the one-workgroup-per-SM tiles of 128×256
 * and more, where a partial last wave costs most (8192³ in 256×256 tiles: 7.76 waves run as 8;
 * 3072³ in 128×256: 2.18 as 3). The twin is the tile itself where the tile count fills whole waves.
 */
const STREAMK: string[] = [
  "cm_128x256x32_w2x4_v128_s1", "cm_128x256x32_w2x4_v128_s1_kpa", "cm_128x256x32_w2x4_v128_s1_kpr",
  "cm_128x256x32_w2x4_v128_s1_kpr_a2", "cm_128x256x32_w2x4_v128_s1_kpr_b2", "cm_256x128x32_w4x2_v128_s1", "cm_256x256x32_w4x2_v128_s1",
  "cm_256x256x32_w2x4_v128_s1_kpa", "cm_256x256x32_w2x4_v128_s1_kpr", "cm_256x256x32_w2x4_v128_s1_kpa_ah2",
];

/**
 * Fused presplit tiles (`x3f_<tile>`: f32 products over bf16 hi/lo operands, the three products
 * per staged k-tile, CoopConfig.fuse3). Their hi and lo stages take twice the shared memory, so
 * they are one-stage tiles whose doubled stages fit 48 KiB beside the f32 output tiles. Session 25
 * (75 shape classes tuned on the H200 and H100): the 8-subgroup 128×128×32 tile wins most, peeled
 * (`_pl`) on the H200; the 4-subgroup one and 128×256×16 one class each. A 256×128×16 tile and a
 * two-stage 16-deep 128×128 one won none and went.
 */
const FUSED: [string, CoopTile][] = [
  ["cm_128x256x16_w2x4_v128_s1", { wm: 2, wn: 4, sm: 4, sn: 4, bk: 16, wide: true, stages: 1 }],
  ["cm_128x128x32_w2x4_v128_s1", { wm: 2, wn: 4, sm: 4, sn: 2, bk: 32, wide: true, stages: 1, loopK: true }],
  ["cm_128x128x32_w2x2_v128_s1", { wm: 2, wn: 2, sm: 4, sn: 4, bk: 32, wide: true, stages: 1, loopK: true }],
  // the last k-tile's multiply peeled (CoopConfig.peel)
  ["cm_128x128x32_w2x4_v128_s1_pl", { wm: 2, wn: 4, sm: 4, sn: 2, bk: 32, wide: true, stages: 1, loopK: true, peel: true }],
];

export const SPLITS = [1, 2, 4, 8, 16] as const;

/**
 * The variants of `t`: every base tile in every split-K form, the two-stage and stream-K twins,
 * and the x3_ twins of the staged 16-bit coopmat variants. Twins may name a base of `known`.
 */
function build(t: VariantTables, known: ReadonlyMap<string, VariantSpec> = new Map()): Map<string, VariantSpec> {
  const m = new Map<string, VariantSpec>();
  const coopBase = (n: string): CoopTile => {
    const v = m.get(n) ?? known.get(n);
    if (v?.kind !== "coop") throw new Error(`matmul variants: ${n} is not a coopmat tile`);
    return v.cfg;
  };
  const addSplits = (n: string, f: (name: string, splits: number) => VariantSpec) => {
    for (const s of SPLITS) {
      const name = s === 1 ? n : `${n}_sk${s}`;
      m.set(name, f(name, s));
    }
  };
  for (const [n, cfg] of t.simt ?? []) addSplits(n, (name, splits) => ({ kind: "simt", name, base: n, cfg, splits }));
  for (const [n, cfg] of t.coop ?? []) addSplits(n, (name, splits) => ({ kind: "coop", name, base: n, cfg, splits }));
  for (const [n, op] of t.twoStage ?? []) {
    const cfg = coopBase(n);
    if (cfg.stages !== 1) throw new Error(`matmul variants: two-stage base ${n} is not a single-stage coopmat tile`);
    const [twin, c2] = op === "halfA" ? [`${n}_ah2`, { ...cfg, halfA2: true }] : op === "A" ? [`${n}_a2`, { ...cfg, stagesA: 2 as const }] : [`${n}_b2`, { ...cfg, stagesB: 2 as const }];
    addSplits(twin, (name, splits) => ({ kind: "coop", name, base: twin, cfg: c2, splits }));
  }
  // <tile>_stk: stream-K twins of the big tiles (streamk.ts), where the last wave is partial
  for (const n of t.streamK ?? []) m.set(`${n}_stk`, { kind: "coop", name: `${n}_stk`, base: n, cfg: { ...coopBase(n), streamK: true }, splits: 1 });
  // x3_<tile>: the presplit twin (an f32 product over bf16 hi/lo operands, so f32 accumulation)
  // of every staged 16-bit tile with at most 16 accumulators per subgroup; of the pair-staged
  // tiles only the _kpa ones, the default's pick where B is K-contiguous (the tuner races no
  // pair-staged presplit twin: on two-block operands a pair would straddle two blocks)
  for (const [name, v] of [...m]) {
    if (v.kind !== "coop" || v.cfg.split3 || v.cfg.sm * v.cfg.sn > 16 || v.cfg.pairRot) continue;
    m.set(`x3_${name}`, { kind: "presplit", name: `x3_${name}`, base: `x3_${v.base}`, inner: v, splits: v.splits });
  }
  // x3f_<tile>: the fused presplit products, every split-K form
  for (const [n, cfg] of t.fused ?? []) {
    for (const s of SPLITS) {
      const name = s === 1 ? `x3f_${n}` : `x3f_${n}_sk${s}`;
      m.set(name, { kind: "presplit", name, base: `x3f_${n}`, inner: { kind: "coop", name: s === 1 ? n : `${n}_sk${s}`, base: n, cfg, splits: s }, splits: s, fused: true });
    }
  }
  return m;
}

/** The shipped variants. */
export const VARIANTS: ReadonlyMap<string, VariantSpec> = build({ simt: SIMT, coop: COOP, twoStage: TWO_STAGE, streamK: STREAMK, fused: FUSED });

const lab = new Map<string, VariantSpec>();

/**
 * Adds lab variants (lab/matmul-variants.ts: probes, controls, small twins for the interpreter) to
 * what variantByName finds, for bench/ and tests; never raced, never a default. A shipped name
 * cannot be registered again.
 */
export function registerLabVariants(t: VariantTables): void {
  for (const [name, v] of build(t, new Map([...VARIANTS, ...lab]))) {
    if (VARIANTS.has(name)) throw new Error(`matmul variants: lab variant ${name} is shipped`);
    lab.set(name, v);
  }
}

export function variantByName(name: string): VariantSpec {
  const v = VARIANTS.get(name) ?? lab.get(name);
  if (!v) {
    throw new Error(`matmul variant '${name}' is unknown; known: ${[...VARIANTS.keys()].filter((k) => !k.includes("_sk") && !k.startsWith("x3_")).join(", ")} (+ _sk2/_sk4/_sk8/_sk16 split-K; x3_<staged cm tile> for f32 on presplit bf16 operands)`);
  }
  return v;
}

export function withSplits(v: VariantSpec, splits: number): VariantSpec {
  // (a stream-K twin is its own split-free form; its split-K forms are the tile's)
  if (splits === v.splits) return v;
  return variantByName(splits === 1 ? v.base : `${v.base}_sk${splits}`);
}
