// The table of matmul variants: a variant is a typed struct (kernel family, tile config, split-K
// factor); its name is only a key for humans, HELIOS_MATMUL_VARIANT and the tuning cache — looked
// up in this table, never parsed.
import type { CoopConfig } from "./coopmat.js";
import type { Coop2Config } from "./coopmat2.js";
import type { SimtConfig } from "./simt.js";

export type CoopSpec = { kind: "coop"; name: string; base: string; cfg: Omit<CoopConfig, "vecA" | "vecB">; splits: number };

export type VariantSpec =
  | { kind: "simt"; name: string; base: string; cfg: Omit<SimtConfig, "vecA" | "vecB" | "vecOut">; splits: number }
  | CoopSpec
  | { kind: "coop2"; name: string; base: string; cfg: Coop2Config; splits: number }
  // f32 inputs split once into bf16 hi/lo operands, then `inner` (a bf16 tile) over K' = 3K
  // (presplit.ts); the split factor is the inner kernel's
  | { kind: "presplit"; name: string; base: string; inner: CoopSpec; splits: number };

const SIMT_BASES: [string, Omit<SimtConfig, "vecA" | "vecB" | "vecOut">][] = [
  ["simt_128x128_8x8", { bm: 128, bn: 128, tm: 8, tn: 8 }],
  ["simt_64x64_4x4", { bm: 64, bn: 64, tm: 4, tn: 4 }],
  // _sm: the next k-tile stored halfway through the k-steps (H100 session 15, 4096³ f32 on whole
  // tiles 37.8 -> 41.5 TF/s, checked loads 33.4 -> 37.5); the default 128×128 tile
  ["simt_128x128_8x8_sm", { bm: 128, bn: 128, tm: 8, tn: 8, stageMid: true }],
  // _t128: 4 warps, 128 accumulators per thread (6 f32x4 shared reads per 128 FMAs instead of 4 per
  // 64, barriers of 4 warps): 42.1 TF/s at 4096³ on whole tiles, 30.6 at 4000³ (tuner candidate)
  ["simt_128x128_8x16_t128_sm", { bm: 128, bn: 128, tm: 8, tn: 16, threads: 128, stageMid: true }],
];

// Tile shapes per shape class (see bench/MATMUL_NOTES.md): large squares want 128×128 or 128×256
// workgroup tiles with 4×4 (or 4×2) 16×16 accumulators per subgroup; medium shapes 64×128; small
// ones 64×64 plus split-K.
const COOP_BASES: [string, Omit<CoopConfig, "vecA" | "vecB">][] = [
  ["cm_128x128x32_w2x2", { wm: 2, wn: 2, sm: 4, sn: 4, bk: 32 }],
  ["cm_128x128x32_w2x4", { wm: 2, wn: 4, sm: 4, sn: 2, bk: 32 }],
  ["cm_128x256x16_w2x4", { wm: 2, wn: 4, sm: 4, sn: 4, bk: 16 }],
  ["cm_256x128x16_w4x2", { wm: 4, wn: 2, sm: 4, sn: 4, bk: 16 }],
  // 4 subgroups × 4×8 accumulators (64×128 per subgroup, 128 threads): half the fragment loads per
  // MMA of 4×4; only sensible with f16 accumulators (f32 ones need 256 registers: spills), so the
  // tuner offers it for accF16 only (candidateVariants).
  ["cm_128x256x16_w2x2", { wm: 2, wn: 2, sm: 4, sn: 8, bk: 16 }],
  ["cm_64x128x32_w2x2", { wm: 2, wn: 2, sm: 2, sn: 4, bk: 32 }],
  ["cm_64x64x32_w2x2", { wm: 2, wn: 2, sm: 2, sn: 2, bk: 32 }],
  ["cm_64x64x64_w2x2", { wm: 2, wn: 2, sm: 2, sn: 2, bk: 64 }],
  // 128-bit staging (coopmat-stage.ts): u32x4 global loads and shared stores, fragments loaded from
  // the u32x4 arrays; unaligned problems (contiguous dim or K not a multiple of 8, f32 inputs) run
  // the same tile with 64-bit chunks. _pf2: two register sets, two k-tiles in flight. _s1: one
  // shared buffer (two barriers per k-tile, NVIDIA shmem.comp's structure), which is what lets a
  // 32-deep k-tile fit beside a 128×256 or 256×128 tile (and a 64-deep one beside 128×128);
  // bk > 16 steps through a k-tile in a driver-unrolled IR loop. _irloops: the epilogue blocks too.
  // Shared bytes (f16, NN; the epilogue staging tiles included) in the comments.
  ["cm_128x256x16_w2x4_v128", { wm: 2, wn: 4, sm: 4, sn: 4, bk: 16, wide: true }], // 37376
  ["cm_128x256x16_w2x4_v128_pf2", { wm: 2, wn: 4, sm: 4, sn: 4, bk: 16, wide: true, prefetch: 2 }], // 37376
  ["cm_256x128x16_w4x2_v128", { wm: 4, wn: 2, sm: 4, sn: 4, bk: 16, wide: true }], // 41472
  ["cm_128x128x32_w2x4_v128", { wm: 2, wn: 4, sm: 4, sn: 2, bk: 32, wide: true }], // 46080
  ["cm_128x128x32_w2x4_v128_pf2", { wm: 2, wn: 4, sm: 4, sn: 2, bk: 32, wide: true, prefetch: 2 }], // 46080
  ["cm_128x128x32_w2x4_v128_irloops", { wm: 2, wn: 4, sm: 4, sn: 2, bk: 32, wide: true, loopK: true, loopEpi: true }], // 46080
  ["cm_128x256x32_w2x4_v128_s1", { wm: 2, wn: 4, sm: 4, sn: 4, bk: 32, wide: true, stages: 1, loopK: true }], // 35328
  ["cm_256x128x32_w4x2_v128_s1", { wm: 4, wn: 2, sm: 4, sn: 4, bk: 32, wide: true, stages: 1, loopK: true }], // 37376
  ["cm_128x128x64_w2x4_v128_s1", { wm: 2, wn: 4, sm: 4, sn: 2, bk: 64, wide: true, stages: 1, loopK: true }], // 44032
  // _du: the k-tile loop marked DontUnroll (register-count probe, see CoopConfig.noUnrollK)
  ["cm_128x128x32_w2x4_v128_du", { wm: 2, wn: 4, sm: 4, sn: 2, bk: 32, wide: true, noUnrollK: true }], // 46080
  ["cm_128x256x16_w2x4_v128_pf2_du", { wm: 2, wn: 4, sm: 4, sn: 4, bk: 16, wide: true, prefetch: 2, noUnrollK: true }], // 37376
  // Occupancy probe: 128×128×16 with 8 subgroups of 4×2 needs ~30 KB of shared memory and few
  // staging registers, so two workgroups may share an SM and overlap each other's barriers.
  ["cm_128x128x16_w2x4_v128", { wm: 2, wn: 4, sm: 4, sn: 2, bk: 16, wide: true }], // 29184
  ["cm_128x128x16_w2x4_v128_pf2", { wm: 2, wn: 4, sm: 4, sn: 2, bk: 16, wide: true, prefetch: 2 }], // 29184
  // f16 accumulators only (4×8 per subgroup, see cm_128x256x16_w2x2)
  ["cm_128x256x16_w2x2_v128", { wm: 2, wn: 2, sm: 4, sn: 8, bk: 16, wide: true }], // 33280
  ["cm_128x256x16_w2x2_v128_pf2", { wm: 2, wn: 2, sm: 4, sn: 8, bk: 16, wide: true, prefetch: 2 }], // 33280
  ["cm_128x256x32_w2x2_v128_s1", { wm: 2, wn: 2, sm: 4, sn: 8, bk: 32, wide: true, stages: 1, loopK: true }], // 31232
  // 256×256 with 8 subgroups of 4×8 f16 accumulators: half the L2 traffic per flop of 128×256
  // (the f16-acc 420 TF/s target needs it); one shared buffer so it fits (2 stages: 49664 B)
  ["cm_256x256x16_w4x2_v128_s1", { wm: 4, wn: 2, sm: 4, sn: 8, bk: 16, wide: true, stages: 1 }], // 28928
  // two stages (one barrier per k-tile): fits only where the tiles divide M, N, K and f16 blocks
  // leave through the 4 KB f16 tile (no f32 edge tile): 41472 + 4096
  ["cm_256x256x16_w4x2_v128", { wm: 4, wn: 2, sm: 4, sn: 8, bk: 16, wide: true }], // 45568
  ["cm_256x256x32_w4x2_v128_s1", { wm: 4, wn: 2, sm: 4, sn: 8, bk: 32, wide: true, stages: 1, loopK: true }], // 45568
  // 16 subgroups of 4×4 f16 accumulators (512 threads): the same 256×256 tile with twice the warps
  // per SM to hide the two barriers per k-tile; ≤ 128 registers by construction (64K / 512), so
  // only f16 accumulators fit; aligned f16 output only (16 per-subgroup f32 edge tiles overflow 48 KiB)
  ["cm_256x256x32_w4x4_v128_s1", { wm: 4, wn: 4, sm: 4, sn: 4, bk: 32, wide: true, stages: 1, loopK: true }], // 45568
  // the 256×256 f16-acc tile with 128×64 per subgroup: 4 B fragments (row-major B, loaded
  // transposed) and 8 A per k-step instead of 8 B and 4 A
  ["cm_256x256x32_w2x4_v128_s1", { wm: 2, wn: 4, sm: 8, sn: 4, bk: 32, wide: true, stages: 1, loopK: true }], // 45568
  // Pair staging (H200 session 9 runs 1–14): the K-contiguous operands load two k-tiles every other
  // k-tile, whole 128-byte lines per 8-lane group (CoopConfig.pairK). _kp: the second k-tile is
  // stored by half the lanes under a branch; _kpa: the operand whose rows run along K loads its
  // two k-tiles together too (pairRows), so both operands load on the same k-tiles; _kpr: every
  // lane stores one chunk of each k-tile by select (pairRot). Which wins depends on the tile and
  // layout (f16 acc. 256×256 at 8192³: NN plain 390 → _kpa 405, NT 359 → _kpr 407; f32 acc.
  // 128×256 NN 302 → _kpr 317, 128×128 TT 286 → _kpa 312), so the tuner races them.
  ["cm_128x128x32_w2x2_v128_s1_kp", { wm: 2, wn: 2, sm: 4, sn: 4, bk: 32, wide: true, stages: 1, loopK: true, pairK: true }], // 23040
  ["cm_128x128x32_w2x2_v128_s1_kpa", { wm: 2, wn: 2, sm: 4, sn: 4, bk: 32, wide: true, stages: 1, loopK: true, pairK: true, pairRows: true }], // 23040
  ["cm_128x256x32_w2x4_v128_s1_kp", { wm: 2, wn: 4, sm: 4, sn: 4, bk: 32, wide: true, stages: 1, loopK: true, pairK: true }], // 35328
  ["cm_128x256x32_w2x4_v128_s1_kpa", { wm: 2, wn: 4, sm: 4, sn: 4, bk: 32, wide: true, stages: 1, loopK: true, pairK: true, pairRows: true }], // 35328
  ["cm_128x256x32_w2x4_v128_s1_kpr", { wm: 2, wn: 4, sm: 4, sn: 4, bk: 32, wide: true, stages: 1, loopK: true, pairK: true, pairRot: true }], // 35328
  // the 256×256 ones for f16 accumulation (32 accumulators per subgroup)
  ["cm_256x256x32_w2x4_v128_s1_kp", { wm: 2, wn: 4, sm: 8, sn: 4, bk: 32, wide: true, stages: 1, loopK: true, pairK: true }], // 45568
  ["cm_256x256x32_w2x4_v128_s1_kpa", { wm: 2, wn: 4, sm: 8, sn: 4, bk: 32, wide: true, stages: 1, loopK: true, pairK: true, pairRows: true }], // 45568
  ["cm_256x256x32_w2x4_v128_s1_kpr", { wm: 2, wn: 4, sm: 8, sn: 4, bk: 32, wide: true, stages: 1, loopK: true, pairK: true, pairRot: true }], // 45568
  // _ta: A staged transposed ([k][m], loaded as TN loads it; CoopConfig.stageAT), a probe
  ["cm_256x256x32_w2x4_v128_s1_ta", { wm: 2, wn: 4, sm: 8, sn: 4, bk: 32, wide: true, stages: 1, loopK: true, stageAT: true }], // 43520
  ["cm_128x256x32_w2x4_v128_s1_ta", { wm: 2, wn: 4, sm: 4, sn: 4, bk: 32, wide: true, stages: 1, loopK: true, stageAT: true }],
  // _sp: K-contiguous tiles stored to shared memory in spread chunk order (CoopConfig.spread), a probe
  ["cm_256x256x32_w2x4_v128_s1_sp", { wm: 2, wn: 4, sm: 8, sn: 4, bk: 32, wide: true, stages: 1, loopK: true, spread: true }], // 45568
  ["cm_256x256x32_w4x2_v128_s1_sp", { wm: 4, wn: 2, sm: 4, sn: 8, bk: 32, wide: true, stages: 1, loopK: true, spread: true }], // 45568
  ["cm_128x256x32_w2x4_v128_s1_sp", { wm: 2, wn: 4, sm: 4, sn: 4, bk: 32, wide: true, stages: 1, loopK: true, spread: true }], // 35328
  ["cm_128x128x32_w2x2_v128_s1_sp", { wm: 2, wn: 2, sm: 4, sn: 4, bk: 32, wide: true, stages: 1, loopK: true, spread: true }], // 23040
  // Two (or three) workgroups per SM: every tile above runs one 256-thread workgroup per SM (H100
  // run 15: 188-255 registers × 256 threads fill the 64K register file), so its 8 warps all wait at
  // the same barriers. 128×128 with 4 subgroups of 4×4 (64×64 each, CUTLASS's 128×128 warp layout)
  // is 128 threads: even at 255 registers two workgroups fit an SM (2 × 4 warps × 32 × 256 =
  // 65536), three with f16 accumulators if the driver stays ≤ 168; shared memory is no limit
  // (2 × 40 KB ≪ 228 KB). Same per-warp work (64×64) as the 8-subgroup 128×256 tiles; the
  // barriers of two workgroups no longer coincide. _lk alone: two shared stages with the IR k-loop.
  ["cm_128x128x32_w2x2_v128_s1", { wm: 2, wn: 2, sm: 4, sn: 4, bk: 32, wide: true, stages: 1, loopK: true }], // 23040
  ["cm_128x128x64_w2x2_v128_s1", { wm: 2, wn: 2, sm: 4, sn: 4, bk: 64, wide: true, stages: 1, loopK: true }], // 39936
  ["cm_128x128x32_w2x2_v128_lk", { wm: 2, wn: 2, sm: 4, sn: 4, bk: 32, wide: true, loopK: true }], // 41984
  // 8 subgroups of 4×2 with one shared stage (27 KB): if the driver stays ≤ 128 registers two
  // 256-thread workgroups share an SM (run 15: the 2-stage _du/_irloops forms of this tile had 156
  // with f32 and 124 with f16 accumulators)
  ["cm_128x128x32_w2x4_v128_s1", { wm: 2, wn: 4, sm: 4, sn: 2, bk: 32, wide: true, stages: 1, loopK: true }], // 27136
  // _pl: on aligned problems the last k-tile's multiply is peeled out of the loop (CoopConfig.peel)
  ["cm_128x128x32_w2x2_v128_s1_pl", { wm: 2, wn: 2, sm: 4, sn: 4, bk: 32, wide: true, stages: 1, loopK: true, peel: true }], // 23040
  ["cm_128x256x32_w2x4_v128_s1_pl", { wm: 2, wn: 4, sm: 4, sn: 4, bk: 32, wide: true, stages: 1, loopK: true, peel: true }], // 35328
  ["cm_128x128x64_w2x4_v128_s1_pl", { wm: 2, wn: 4, sm: 4, sn: 2, bk: 64, wide: true, stages: 1, loopK: true, peel: true }], // 44032
  // the f16-accumulation 256×256 tile (H100 session 6: 394 TF/s at 8192³, the fastest there), peeled
  ["cm_256x256x32_w4x2_v128_s1_pl", { wm: 4, wn: 2, sm: 4, sn: 8, bk: 32, wide: true, stages: 1, loopK: true, peel: true }], // 45568
  // workgroup-order probes of that tile: bands of 4 / 16 tile rows instead of 8 (L2 reuse per wave)
  ["cm_256x256x32_w4x2_v128_s1_g4", { wm: 4, wn: 2, sm: 4, sn: 8, bk: 32, wide: true, stages: 1, loopK: true, groupRows: 4 }], // 45568
  ["cm_256x256x32_w4x2_v128_s1_g16", { wm: 4, wn: 2, sm: 4, sn: 8, bk: 32, wide: true, stages: 1, loopK: true, groupRows: 16 }], // 45568
  // f32 inputs as bf16 hi+lo on tensor cores (3 MMAs; twice the shared memory, so smaller tiles).
  ["cm3_64x64x32_w2x2", { wm: 2, wn: 2, sm: 2, sn: 2, bk: 32, split3: true }],
  ["cm3_128x64x16_w2x2", { wm: 2, wn: 2, sm: 4, sn: 2, bk: 16, split3: true }],
  ["cm3_64x128x16_w2x2", { wm: 2, wn: 2, sm: 2, sn: 4, bk: 16, split3: true }],
  // Fragments straight from global memory (aligned shapes, 16-bit inputs only).
  ["cmd_128x128_w2x2", { wm: 2, wn: 2, sm: 4, sn: 4, bk: 16, direct: true }],
  ["cmd_128x128_w4x2", { wm: 4, wn: 2, sm: 2, sn: 4, bk: 16, direct: true }],
  ["cmd_128x256_w2x4", { wm: 2, wn: 4, sm: 4, sn: 4, bk: 16, direct: true }],
  ["cmd_64x64_w2x2", { wm: 2, wn: 2, sm: 2, sn: 2, bk: 16, direct: true }],
];

/**
 * Single-stage tiles with a twin that gives one operand two shared stages (CoopConfig.stagesA,
 * stagesB; tags `_a2`, `_b2`), so that operand's stores need not wait for the barrier that frees
 * the other's one stage. H200 session 11 runs 2 and 6, f32 accumulation, the rotated-pair 128×256
 * tile: `_a2` 8192³ 320 → 326–329 TF/s, 2048³ 317 → 330–331; `_b2` 330 at 8192³ and 327 at 4096³
 * (+1.4–2.3 % over `_a2`) but 299 at 2048³, and it fits only B's [k][n] tile (NN, TN; bf16 and f32
 * output with the epilogue's tiles in B's stage, CoopConfig.epiInStage), so the tuner races both.
 * Where the second stage does not fit (edge tiles, NT for `_b2`) the planner drops it: the twin is
 * its tile.
 * The plain and `_kpa` 128×256 twins lost or tied and the 128×128 ones lost 18–27 %: only the
 * 128×128 ones stay (untuned), for the tests of both k-loops.
 */
const TWO_STAGE_BASES: readonly [string, "A" | "B" | "halfA"][] = [
  ["cm_128x256x32_w2x4_v128_s1_kpr", "A"], ["cm_128x256x32_w2x4_v128_s1_kpr", "B"],
  ["cm_128x128x32_w2x2_v128_s1", "A"], ["cm_128x128x32_w2x2_v128_s1_kpa", "A"], ["cm_128x128x32_w2x2_v128_s1_kpa", "B"],
  // the 256×256 f16-accumulation tile has room for neither operand's second stage, only for half
  // of A's (CoopConfig.halfA2, tag `_ah2`; NN on whole tiles, the epilogue's tiles in B's stage)
  ["cm_256x256x32_w2x4_v128_s1_kpa", "halfA"], ["cm_256x256x32_w2x4_v128_s1", "halfA"],
];

function coopTiles(): [string, Omit<CoopConfig, "vecA" | "vecB">][] {
  const byName = new Map(COOP_BASES);
  const twins = TWO_STAGE_BASES.map(([n, op]): [string, Omit<CoopConfig, "vecA" | "vecB">] => {
    const cfg = byName.get(n);
    if (!cfg || cfg.stages !== 1) throw new Error(`matmul variants: two-stage base ${n} is not a single-stage coopmat tile`);
    if (op === "halfA") return [`${n}_ah2`, { ...cfg, halfA2: true }];
    return op === "A" ? [`${n}_a2`, { ...cfg, stagesA: 2 }] : [`${n}_b2`, { ...cfg, stagesB: 2 }];
  });
  return [...COOP_BASES, ...twins];
}

// Workgroup-scope (NV coopmat2) tiles, aligned shapes only.
const COOP2_BASES: [string, Coop2Config][] = [
  ["cm2_128x128x32", { bm: 128, bn: 128, bk: 32, threads: 256 }],
  ["cm2_128x256x32", { bm: 128, bn: 256, bk: 32, threads: 256 }],
  ["cm2_64x64x32", { bm: 64, bn: 64, bk: 32, threads: 128 }],
];

/**
 * Tiles the tuner does not time (still forceable, and gated by the check phase after the tuned
 * ones): on the H100 (run 4 sweep) each is slower than a tuned tile at every swept shape — the
 * 4-subgroup 128×128 (116 vs 164–180 TF/s at 4096³), 64×128 and 64×64×64 (≤ 92), and every direct
 * (cmd_*) tile (≤ 78). Fewer candidates keep first-use tuning and the check phase short.
 */
export const UNTUNED: ReadonlySet<string> = new Set([
  // the SIMT tile before _sm (session 15: slower at every measured shape); the forced A/B control
  "simt_128x128_8x8",
  "cm_128x128x32_w2x2", "cm_64x128x32_w2x2", "cm_64x64x64_w2x2",
  // Round 3 (128-bit staging): raced by the tuner are the upgrades of the two best tiles
  // (cm_128x256x16_w2x4_v128, _pf2, cm_128x128x32_w2x4_v128_pf2), the 32-deep 128×256 tile and two
  // f16-accumulator tiles; the others are swept by `bench/gpu-host.sh matmul128` and promoted from
  // here when they win (each tuned candidate costs ~1 s per shape class at first use, and the
  // perf phase tunes 4 shapes × 4 suites under a time cap).
  // After H100 run 15: the single-stage 32/64-deep tiles joined the race (198-239 TF/s at 4096³ and
  // 8192³); cm_128x256x16_w2x4_v128 and cm_128x128x32_w2x4_v128_pf2 left it (slower than their
  // 64-bit originals at 4096³ and 8192³), as did the 4×8 f16-acc tiles except the 256×256×32 one.
  "cm_128x256x16_w2x4_v128", "cm_128x128x32_w2x4_v128_pf2", "cm_128x256x16_w2x2_v128_pf2",
  "cm_128x128x32_w2x4_v128", "cm_256x128x16_w4x2_v128",
  "cm_128x128x16_w2x4_v128", "cm_128x128x16_w2x4_v128_pf2", "cm_128x256x16_w2x2_v128", "cm_128x256x32_w2x2_v128_s1",
  "cm_256x256x16_w4x2_v128_s1",
  // session 6, run 5: the two-stage 256×256×16 f16-acc tile, 327 TF/s at 8192³ against 380 (`_s1`, bk 32)
  "cm_256x256x16_w4x2_v128",
  "cm_256x256x32_w4x2_v128_s1_g4", "cm_256x256x32_w4x2_v128_s1_g16",
  // session 8 probes of the f16-acc 256×256 tile (H200 runs 1, 3): 16 subgroups 2.5 % slower than
  // 8, 128×64 per subgroup 1.3 % faster — neither worth a tuning candidate
  "cm_256x256x32_w4x4_v128_s1", "cm_256x256x32_w2x4_v128_s1", "cm_256x256x32_w2x4_v128_s1_ah2",
  // session 9: the branch-only pair form (dominated by _kpa: equal in NT, ahead in NN and TT), and
  // two probes slower everywhere: A staged transposed (_ta), spread chunk order (_sp)
  "cm_128x128x32_w2x2_v128_s1_kp", "cm_128x256x32_w2x4_v128_s1_kp", "cm_256x256x32_w2x4_v128_s1_kp",
  "cm_256x256x32_w2x4_v128_s1_ta", "cm_128x256x32_w2x4_v128_s1_ta",
  "cm_256x256x32_w2x4_v128_s1_sp", "cm_256x256x32_w4x2_v128_s1_sp", "cm_128x256x32_w2x4_v128_s1_sp", "cm_128x128x32_w2x2_v128_s1_sp",
  // Occupancy round (bench/MATMUL_NOTES.md, round 4). H100 run 18 promoted cm_128x128x32_w2x2_v128_s1
  // (4 subgroups, 244 registers, 23 KB shared: 249 TF/s f16 at 8192³, 256 with f16 accumulation,
  // 236 at 4096³ f16-acc); the others lost to it
  "cm_128x128x64_w2x2_v128_s1", "cm_128x128x32_w2x2_v128_lk", "cm_128x128x32_w2x4_v128_s1",
  // A/B controls of cm_128x128x32_w2x4_v128: k steps and epilogue blocks as driver-unrolled IR
  // loops (a 3-4x smaller description); the k-tile loop DontUnroll
  "cm_128x128x32_w2x4_v128_irloops", "cm_128x128x32_w2x4_v128_du", "cm_128x256x16_w2x4_v128_pf2_du",
  "cmd_128x128_w2x2", "cmd_128x128_w4x2", "cmd_128x256_w2x4", "cmd_64x64_w2x2",
  // the stream-K twin of a small tile, for tests (a 64×64 grid fills waves well enough without it)
  "cm_64x64x32_w2x2_stk",
  // one operand in two stages on 128×128 tiles (session 11 run 2: −18 % / −27 % at 2048³), for tests
  "cm_128x128x32_w2x2_v128_s1_a2", "cm_128x128x32_w2x2_v128_s1_kpa_a2", "cm_128x128x32_w2x2_v128_s1_kpa_b2",
]);

export const SPLITS = [1, 2, 4, 8, 16] as const;

/**
 * Tiles with a stream-K twin `<tile>_stk` (streamk.ts): the one-workgroup-per-SM tiles of 128×256
 * and more, where a partial last wave costs most (8192³ in 256×256 tiles: 7.76 waves run as 8;
 * 3072³ in 128×256: 2.18 as 3). The twin is the tile itself where the tile count fills whole waves.
 */
export const STREAMK_BASES: readonly string[] = [
  "cm_128x256x32_w2x4_v128_s1", "cm_128x256x32_w2x4_v128_s1_kpa", "cm_128x256x32_w2x4_v128_s1_kpr",
  "cm_128x256x32_w2x4_v128_s1_kpr_a2", "cm_128x256x32_w2x4_v128_s1_kpr_b2", "cm_256x128x32_w4x2_v128_s1", "cm_256x256x32_w4x2_v128_s1", "cm_256x256x32_w2x4_v128_s1",
  "cm_256x256x32_w2x4_v128_s1_kpa", "cm_256x256x32_w2x4_v128_s1_kpr", "cm_256x256x32_w2x4_v128_s1_kpa_ah2",
  // small enough for the IR interpreter's tests; not tuned (UNTUNED)
  "cm_64x64x32_w2x2",
];

function build(): Map<string, VariantSpec> {
  const m = new Map<string, VariantSpec>();
  const coop = coopTiles();
  for (const s of SPLITS) {
    const suffix = s === 1 ? "" : `_sk${s}`;
    for (const [n, cfg] of SIMT_BASES) m.set(n + suffix, { kind: "simt", name: n + suffix, base: n, cfg, splits: s });
    for (const [n, cfg] of coop) m.set(n + suffix, { kind: "coop", name: n + suffix, base: n, cfg, splits: s });
    for (const [n, cfg] of COOP2_BASES) m.set(n + suffix, { kind: "coop2", name: n + suffix, base: n, cfg, splits: s });
  }
  // <tile>_stk: stream-K twins of the big tiles (streamk.ts), where the last wave is partial
  for (const n of STREAMK_BASES) {
    const v = m.get(n);
    if (v?.kind !== "coop") throw new Error(`matmul variants: stream-K base ${n} is not a coopmat tile`);
    m.set(`${n}_stk`, { kind: "coop", name: `${n}_stk`, base: n, cfg: { ...v.cfg, streamK: true }, splits: 1 });
  }
  // x3_<tile>: the presplit twin of every staged 16-bit tile
  for (const [name, v] of [...m]) {
    if (v.kind !== "coop" || v.cfg.split3 || v.cfg.direct) continue;
    m.set(`x3_${name}`, { kind: "presplit", name: `x3_${name}`, base: `x3_${v.base}`, inner: v, splits: v.splits });
  }
  return m;
}

export const VARIANTS: ReadonlyMap<string, VariantSpec> = build();

export function variantByName(name: string): VariantSpec {
  const v = VARIANTS.get(name);
  if (!v) {
    throw new Error(`matmul variant '${name}' is unknown; known: ${[...VARIANTS.keys()].filter((k) => !k.includes("_sk") && !k.startsWith("x3_")).join(", ")} (+ _sk2/_sk4/_sk8/_sk16 split-K; x3_<staged cm tile> for f32 on presplit bf16 operands)`);
  }
  return v;
}

/** Whether the tuner skips `v` (its tile is in UNTUNED). */
export function isUntuned(v: VariantSpec): boolean {
  const own = v.kind === "presplit" ? v.inner : v;
  return UNTUNED.has(own.base) || UNTUNED.has(own.name);
}

export function withSplits(v: VariantSpec, splits: number): VariantSpec {
  // (a stream-K twin is its own split-free form; its split-K forms are the tile's)
  if (splits === v.splits) return v;
  return variantByName(splits === 1 ? v.base : `${v.base}_sk${splits}`);
}
