// why the tuner timed _kpr_a2 at 0.43 ms on 16384x3072x768 f16->f32 while steps.mjs read 0.32: both, one process
const { nativeMatmulRuntime } = await import("../../dist/bench/native-runtime.js");
const { chooseMatmul, capsOf } = await import("../../dist/ts/kernels/matmul/autotune.js");
const { planMatmul } = await import("../../dist/ts/kernels/matmul/plan.js");
const { MatmulFixture } = await import("../../dist/ts/kernels/matmul/fixture.js");
const { timePlan, runPlan } = await import("../../dist/ts/kernels/matmul/run.js");
const rt = await nativeMatmulRuntime();
const caps = capsOf(rt.initDevice());
const med = (a) => { const b = [...a].sort((x, y) => x - y); return b[b.length >> 1]; };
for (const epi of [undefined, { bias: true, act: "gelu" }]) {
  const prob = { m: 16384, n: 3072, k: 768, dtype: "f16", outDtype: "f32", ...(epi ? { epilogue: epi } : {}) };
  for (const v of ["cm_128x256x32_w2x4_v128_s1_kpr", "cm_128x256x32_w2x4_v128_s1_kpr_a2", "cm_128x256x32_w2x4_v128_s1_kpr_b2"]) {
    const plan = planMatmul(prob, caps, { variant: v });
    const fx = new MatmulFixture(rt, plan.problem, 11);
    const bufs = fx.buffers(plan);
    runPlan(rt, plan, bufs);
    const a = timePlan(rt, plan, bufs, { warmup: 3, iters: 10, repeats: 3, warmMs: 100 }).flat();
    const b = timePlan(rt, plan, bufs, { warmup: 5, iters: 20, repeats: 3, warmMs: 300 }).flat();
    console.log(`${epi ? "bias+gelu" : "plain"} ${v} (${plan.steps.map((s) => s.desc.name).join("+")}): tuner-style ${med(a).toFixed(4)} ms, long ${med(b).toFixed(4)} ms`);
    fx.destroy();
  }
  const r = chooseMatmul(rt, prob, { force: true });
  const c = r.record.candidates.filter((x) => x.ms).sort((x, y) => x.ms - y.ms);
  console.log(`tuned: ${r.plan.variant}; ` + c.slice(0, 6).map((x) => `${x.variant} ${x.ms.toFixed(4)}`).join(", ") + "; a2/b2: " + c.filter((x) => /_[ab]2/.test(x.variant)).map((x) => `${x.variant} ${x.ms.toFixed(4)}`).join(", "));
}
