// Lab matmul variants: tiles that are not shipped (never raced, never a default) but that bench/
// and the tests force by name. Importing this module registers them with the variant table
// (ts/kernels/matmul/variants.ts registerLabVariants); nothing under ts/ imports it. A probe goes
// here while it is measured; once decided it is promoted into the shipped table or deleted, its
// evidence kept in bench/MATMUL_NOTES.md and bench/RESULTS.md.
import { registerLabVariants, type VariantTables } from "../ts/kernels/matmul/variants.js";

/**
 * f32 inputs rounded to f16 tiles: the tile of the `f32tc` parity suite (bench/matmul-gpu.ts),
 * kept so that figure stays comparable across runs (for f16 it lost to cm_128x128x32_w2x4, H100
 * run 4: 116 vs 164–180 TF/s at 4096³).
 */
export const F32TC_TILE = "cm_128x128x32_w2x2";

export const MATMUL_LAB: VariantTables = {
  coop: [[F32TC_TILE, { wm: 2, wn: 2, sm: 4, sn: 4, bk: 32 }]],
  // one operand in two stages on the 128-thread 128×128 tiles (H200 session 11 run 2: −18 % and
  // −27 % at 2048³): small enough for the interpreter's tests of both two-stage k-loops
  twoStage: [["cm_128x128x32_w2x2_v128_s1", "A"], ["cm_128x128x32_w2x2_v128_s1_kpa", "A"], ["cm_128x128x32_w2x2_v128_s1_kpa", "B"]],
  // the stream-K twin of a small tile, for the interpreter's tests (a 64×64 grid fills waves well
  // enough without it)
  streamK: ["cm_64x64x32_w2x2"],
  // the fused presplit products on a 64×64 tile (one stage, 64-bit and 128-bit chunks), for the
  // interpreter's tests of CoopConfig.fuse3
  fused: [
    ["cm_64x64x32_w2x2_s1", { wm: 2, wn: 2, sm: 2, sn: 2, bk: 32, stages: 1 }],
    ["cm_64x64x32_w2x2_v128_s1", { wm: 2, wn: 2, sm: 2, sn: 2, bk: 32, wide: true, stages: 1, loopK: true }],
    ["cm_64x64x32_w2x2_v128_s1_pl", { wm: 2, wn: 2, sm: 2, sn: 2, bk: 32, wide: true, stages: 1, loopK: true, peel: true }],
  ],
};

registerLabVariants(MATMUL_LAB);
