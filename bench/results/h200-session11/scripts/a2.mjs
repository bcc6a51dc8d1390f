// probe: A in two shared stages (_a2) against the one-stage tiles; stream-K twins added at run time
const { VARIANTS } = await import("../../dist/ts/kernels/matmul/variants.js");
const F = "cm_128x256x32_w2x4_v128_s1", Q = "cm_128x128x32_w2x2_v128_s1";
for (const n of [`${F}_a2`, `${F}_kpr_a2`, `${F}_kpa_a2`]) {
  const b = VARIANTS.get(n);
  VARIANTS.set(`${n}_stk`, { ...b, name: `${n}_stk`, base: n, cfg: { ...b.cfg, streamK: true }, splits: 1 });
}
const specs = process.env.SPECS ? process.env.SPECS.split(" ") : [
  `8192x8192x8192:acc32:${F},${F}_a2,${F}_kpr,${F}_kpr_a2,${F}_kpa,${F}_kpa_a2,${F}_kpr_stk,${F}_kpr_a2_stk,${F}_a2_stk`,
  `4096x4096x4096:acc32:${F},${F}_a2,${F}_kpr,${F}_kpr_a2,${F}_kpa_a2`,
  `2048x2048x2048:acc32:${F}_kpr,${F}_kpr_a2,${F}_a2,${Q},${Q}_a2,${Q}_kpa_a2`,
  `3072x3072x3072:acc32:${F}_kpr_stk,${F}_kpr_a2_stk,${F}_a2_stk`,
  `16384x3072x768:acc32:${F},${F}_a2,${F}_kpr,${F}_kpr_a2:bias+gelu`,
  `NT@8192x8192x8192:acc32:${F}_kpr,${F}_kpr_a2`,
  `TN@8192x8192x8192:acc32:${F},${F}_a2`,
  `8192x8192x8192:acc16:${F}_kpr,${F}_kpr_a2,${F}_a2,cm_256x256x32_w2x4_v128_s1_kpa`,
];
process.argv = [process.argv[0], process.argv[1], ...specs];
await import("../s10/steps.mjs");
