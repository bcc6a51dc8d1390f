// probe: 256x256 f16-acc tiles with 16-deep k-tiles in two shared stages (stores beside the MMAs), w2x4, plain / pair forms
const { VARIANTS } = await import("../../dist/ts/kernels/matmul/variants.js");
const base = { wm: 2, wn: 4, sm: 8, sn: 4, bk: 16, wide: true };
const add = (name, cfg) => VARIANTS.set(name, { kind: "coop", name, base: name, cfg: { ...base, ...cfg }, splits: 1 });
add("p16_w2x4", {});
add("p16_w2x4_kpa", { pairK: true, pairRows: true });
add("p16_w2x4_kpr", { pairK: true, pairRot: true });
add("p16_w2x4_kp", { pairK: true });
add("p16_w2x4_kpa_stk", { pairK: true, pairRows: true, streamK: true });
add("p16_w2x4_stk", { streamK: true });
const K = "cm_256x256x32_w2x4_v128_s1";
const specs = process.env.SPECS ? process.env.SPECS.split(" ") : [
  `8192x8192x8192:acc16:${K}_kpa,p16_w2x4,p16_w2x4_kpa,p16_w2x4_kpr,p16_w2x4_kp,cm_256x256x16_w4x2_v128,${K}_kpa_stk,p16_w2x4_kpa_stk,p16_w2x4_stk`,
  `TN@8192x8192x8192:acc16:cm_256x256x32_w4x2_v128_s1,p16_w2x4`,
  `4096x4096x4096:acc16:${K}_kpa,p16_w2x4,p16_w2x4_kpa`,
];
process.argv = [process.argv[0], process.argv[1], ...specs];
await import("./steps.mjs");
