// probe: B in two shared stages (_b2) on the 128x256 tile (f16 output only: 48128 B), against _a2
const V = await import("../../dist/ts/kernels/matmul/variants.js");
const F = "cm_128x256x32_w2x4_v128_s1";
for (const t of ["", "_kpr", "_kpa"]) {
  const b = V.VARIANTS.get(F + t);
  for (const stk of [false, true]) {
    const name = `${F}${t}_b2${stk ? "_stk" : ""}`;
    V.VARIANTS.set(name, { ...b, name, base: name, cfg: { ...b.cfg, stagesB: 2, ...(stk ? { streamK: true } : {}) }, splits: 1 });
  }
}
const specs = process.env.SPECS ? process.env.SPECS.split(" ") : [
  `8192x8192x8192:acc32:${F}_kpr_a2,${F}_b2,${F}_kpr_b2,${F}_kpa_b2,${F}_kpr_a2_stk,${F}_kpr_b2_stk,${F}_kpa_b2_stk`,
  `4096x4096x4096:acc32:${F}_kpr_a2,${F}_kpr_b2,${F}_kpa_b2`,
  `2048x2048x2048:acc32:${F}_kpr_a2,${F}_kpr_b2,${F}_kpa_b2`,
  `TN@8192x8192x8192:acc32:${F},${F}_b2`,
  `NT@8192x8192x8192:acc32:${F}_kpr_a2,${F}_kpr_b2`,
  `16384x3072x768:acc32:${F}_kpr_a2,${F}_kpr_b2:bias+gelu`,
  `8192x8192x8192:acc16:${F}_kpr_a2,${F}_kpr_b2,cm_256x256x32_w2x4_v128_s1_kpa`,
];
process.argv = [process.argv[0], process.argv[1], ...specs];
await import("./steps.mjs");
