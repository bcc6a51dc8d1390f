// probe: overlapped last-step multiplies (_ov) against their tiles; stream-K twins of the _ov tiles added at run time
const { VARIANTS } = await import("../../dist/ts/kernels/matmul/variants.js");
for (const n of ["cm_256x256x32_w2x4_v128_s1_kpa_ov", "cm_256x256x32_w2x4_v128_s1_kpr_ov", "cm_128x256x32_w2x4_v128_s1_kpr_ov", "cm_128x256x32_w2x4_v128_s1_ov", "cm_256x256x32_w4x2_v128_s1_ov"]) {
  const b = VARIANTS.get(n);
  VARIANTS.set(`${n}_stk`, { ...b, name: `${n}_stk`, base: n, cfg: { ...b.cfg, streamK: true }, splits: 1 });
}
const K = "cm_256x256x32_w2x4_v128_s1", F = "cm_128x256x32_w2x4_v128_s1";
const specs = process.env.SPECS ? process.env.SPECS.split(" ") : [
  `8192x8192x8192:acc16:${K}_kpa,${K}_kpa_ov,${K}_kpa_stk,${K}_kpa_ov_stk,cm_256x256x32_w4x2_v128_s1,cm_256x256x32_w4x2_v128_s1_ov`,
  `TN@8192x8192x8192:acc16:cm_256x256x32_w4x2_v128_s1,cm_256x256x32_w4x2_v128_s1_ov,cm_256x256x32_w4x2_v128_s1_stk,cm_256x256x32_w4x2_v128_s1_ov_stk`,
  `NT@8192x8192x8192:acc16:${K}_kpr,${K}_kpr_ov`,
  `8192x8192x8192:acc32:${F}_kpr,${F}_kpr_ov,${F}_kpr_stk,${F}_kpr_ov_stk`,
  `4096x4096x4096:acc32:${F}_kpr,${F}_kpr_ov`,
  `2048x2048x2048:acc32:${F}_kpr,${F}_kpr_ov`,
  `16384x3072x768:acc32:${F},${F}_ov:bias+gelu`,
  `3072x3072x3072:acc16:${K}_kpa_stk,${K}_kpa_ov_stk`,
];
process.argv = [process.argv[0], process.argv[1], ...specs];
await import("../s10/steps.mjs");
