// session 11: GPU correctness of the two-stage twins (_a2, _b2), their stream-K and x3 twins, over every CHECK_CASE
import { writeFileSync } from "node:fs";
const { checkVariants } = await import("../../dist/bench/matmul-check.js");
const { nativeMatmulRuntime } = await import("../../dist/bench/native-runtime.js");
const { capsOf } = await import("../../dist/ts/kernels/matmul/autotune.js");
const { VARIANTS } = await import("../../dist/ts/kernels/matmul/variants.js");
const rt = await nativeMatmulRuntime();
const caps = capsOf(rt.initDevice());
const variants = [...VARIANTS.values()].filter((v) => /_(a2|b2)(_stk)?$/.test(v.name));
console.log(variants.map((v) => v.name).join(" "));
const modes = [{ name: "f16", dtype: "f16" }, { name: "f16acc16", dtype: "f16", accF16: true }, { name: "bf16", dtype: "bf16" }, { name: "f32", dtype: "f32" }];
const t0 = Date.now();
const rows = checkVariants(rt, caps, { variants, modes, log: () => {}, budgetMs: Number(process.env.BUDGET_MS ?? 150000) });
const run = rows.filter((r) => !r.skipped), bad = rows.filter((r) => !r.pass);
console.log(`two-stage check: ${run.length} run, ${run.filter((r) => r.pass).length} pass, ${bad.length} fail, ${rows.length - run.length} skipped, ${((Date.now() - t0) / 1000).toFixed(0)} s`);
for (const r of bad) console.log("FAIL", r.variant, r.mode, r.case, r.relErr, r.error ?? "");
writeFileSync(`${process.env.OUT}/check-2st.json`, JSON.stringify(rows));
