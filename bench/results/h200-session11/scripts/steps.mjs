// per-dispatch GPU times of matmul plans: node perf/s10/steps.mjs MxNxK acc16|acc32 variant,variant,...
import { writeFileSync, appendFileSync } from "node:fs";
const { nativeMatmulRuntime } = await import("../../dist/bench/native-runtime.js");
const { capsOf } = await import("../../dist/ts/kernels/matmul/autotune.js");
const { planMatmul } = await import("../../dist/ts/kernels/matmul/plan.js");
const { MatmulFixture } = await import("../../dist/ts/kernels/matmul/fixture.js");
const { runPlan, recordPlan, pipelinesOf } = await import("../../dist/ts/kernels/matmul/run.js");
const { tolerance } = await import("../../dist/ts/kernels/matmul/reference.js");
const rt = await nativeMatmulRuntime();
const caps = capsOf(rt.initDevice());
const med = (a) => { const b = [...a].sort((x, y) => x - y); return b[b.length >> 1]; };
for (const spec of process.argv.slice(2)) {
  const [shape, acc, vars, epi, share] = spec.split(":");
  const [layout, dims] = shape.includes("@") ? shape.split("@") : ["NN", shape];
  const [m, n, k] = dims.split("x").map(Number);
  // epi: "bias", "gelu", "bias+gelu", "relu", "silu", ... (empty: plain)
  const parts = (epi ?? "").split("+").filter(Boolean);
  const epilogue = parts.length ? { bias: parts.includes("bias"), act: parts.find((x) => x !== "bias") ?? "none" } : undefined;
  const prob = { m, n, k, transA: layout[0] === "T", transB: layout[1] === "T", dtype: acc === "f32" ? "f32" : "f16", accF16: acc === "acc16", ...(process.env.OUT32 ? { outDtype: "f32" } : {}), ...(epilogue ? { epilogue } : {}) };
  for (const v of vars.split(",")) {
    const plan = planMatmul(prob, caps, { variant: v });
    const fx = new MatmulFixture(rt, plan.problem, 5);
    try {
      const bufs = fx.buffers(plan);
      fx.poisonC();
      runPlan(rt, plan, bufs);
      const err = fx.spotError(48);
      pipelinesOf(rt, plan);
      const t0 = performance.now();
      while (performance.now() - t0 < 300) { rt.beginBatch(); for (let i = 0; i < 3; i++) recordPlan(rt, plan, bufs); rt.waitTimeline(rt.submitBatch()); }
      const per = plan.steps.map(() => []), tot = [];
      for (let r = 0; r < 3; r++) {
        rt.beginBatch({ profile: true });
        for (let i = 0; i < 20; i++) recordPlan(rt, plan, bufs);
        const tl = rt.submitBatch(); rt.waitTimeline(tl);
        const prof = rt.batchProfile(tl);
        for (let i = 0; i < 20; i++) { let s = 0; plan.steps.forEach((_, j) => { const ns = prof[i * plan.steps.length + j].gpuNs; per[j].push(ns); s += ns; }); tot.push(s); }
      }
      const ms = med(tot) / 1e6;
      const line = `${shape} ${acc}${epi ? " " + epi : ""} ${v}: ${ms.toFixed(4)} ms = ${(2 * m * n * k / ms / 1e9).toFixed(1)} TF/s; steps ${per.map((p) => (med(p) / 1e3).toFixed(1) + " us").join(" + ")}; err ${err.toExponential(2)} ${err <= tolerance(plan.problem, plan.lowPrecision) ? "ok" : "FAIL"}`;
      console.log(line);
      appendFileSync(`${process.env.OUT}/steps.txt`, line + "\n");
    } finally { fx.destroy(); }
  }
}
