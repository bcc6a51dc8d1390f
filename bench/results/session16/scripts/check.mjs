// session 16 call 3: the SIMT variants against the fp64 reference on the GPU, every CHECK_CASES case
// (odd shapes, batches, transposes, epilogues, whole tiles: the unchecked _al loads), f32 and f16
import { writeFileSync } from "node:fs";
import { CHECK_CASES, checkVariants } from "../../../../dist/bench/matmul-check.js";
import { nativeMatmulRuntime } from "../../../../dist/bench/native-runtime.js";
import { capsOf } from "../../../../dist/ts/kernels/matmul/autotune.js";
import { variantByName } from "../../../../dist/ts/kernels/matmul/variants.js";

const names = ["simt_128x128_8x8_sm_u2", "simt_128x128_8x8_sm"];
const rt = await nativeMatmulRuntime();
const info = rt.initDevice();
const rows = checkVariants(rt, capsOf(info), {
  variants: names.map(variantByName),
  modes: [{ name: "f32", dtype: "f32" }, { name: "f16", dtype: "f16" }],
  cases: CHECK_CASES,
});
const run = rows.filter((r) => !r.skipped);
const bad = rows.filter((r) => !r.pass);
writeFileSync(process.argv[2] ?? "/tmp/check.json", JSON.stringify({ device: info.deviceName, rows }, null, 1));
console.log(`check: ${run.length} run, ${bad.length} failed, worst relErr ${Math.max(...run.map((r) => r.relErr ?? 0)).toExponential(2)}`);
for (const r of bad) console.log(`FAIL ${r.variant}/${r.mode}/${r.case}: ${r.error ?? r.relErr}`);
process.exit(bad.length ? 1 : 0);
