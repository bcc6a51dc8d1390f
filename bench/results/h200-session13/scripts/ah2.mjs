// session 13: half of A in two stages (_ah2) on the 256x256 f16-accumulation tile.
// 1) fp64 full checks of the new kernels (whole tiles, epilogue + f32 out + batch, stream-K);
// 2) interleaved timing (7 serpentine rounds x 10 iterations, GPU timestamps, median of round medians).
import { appendFileSync, writeFileSync } from "node:fs";
const { nativeMatmulRuntime } = await import("../../dist/bench/native-runtime.js");
const { capsOf, roundOrder } = await import("../../dist/ts/kernels/matmul/autotune.js");
const { planMatmul } = await import("../../dist/ts/kernels/matmul/plan.js");
const { MatmulFixture } = await import("../../dist/ts/kernels/matmul/fixture.js");
const { runPlan, timePlan } = await import("../../dist/ts/kernels/matmul/run.js");
const { tolerance } = await import("../../dist/ts/kernels/matmul/reference.js");
const rt = await nativeMatmulRuntime();
const caps = capsOf(rt.initDevice());
const OUT = process.env.OUT ?? "/tmp";
const say = (s) => { console.log(s); appendFileSync(`${OUT}/ah2.txt`, s + "\n"); };
const med = (a) => { const b = [...a].sort((x, y) => x - y); return b[b.length >> 1]; };
const T = "cm_256x256x32_w2x4_v128_s1";
const NEW = [`${T}_kpa_ah2`, `${T}_kpa_ah2_stk`, `${T}_ah2`];
let fails = 0;
const checks = [
  { m: 512, n: 512, k: 256, dtype: "f16", accF16: true },
  { m: 768, n: 1024, k: 512, dtype: "f16", accF16: true, outDtype: "f32", batch: 2, epilogue: { bias: true, act: "gelu" } },
  { m: 2304, n: 2304, k: 1024, dtype: "f16", accF16: true },
  { m: 512, n: 768, k: 384, dtype: "f16" },
];
for (const prob of process.env.SKIP_CHECKS ? [] : checks) for (const v of NEW) {
  const plan = planMatmul(prob, caps, { variant: v });
  const fx = new MatmulFixture(rt, plan.problem, 3);
  try {
    const bufs = fx.buffers(plan); fx.poisonC(); runPlan(rt, plan, bufs);
    const err = fx.fullError(), tol = tolerance(plan.problem, plan.lowPrecision);
    if (!(err <= tol)) fails++;
    say(`check ${JSON.stringify(prob)} ${v}: ${plan.steps.map((s) => s.desc.name).join(" + ")} err ${err.toExponential(2)} ${err <= tol ? "ok" : "FAIL"}`);
  } finally { fx.destroy(); }
}
const results = [];
for (const dims of (process.argv[2] ?? "8192x8192x8192,4096x4096x4096,3072x3072x3072").split(",")) {
  const [m, n, k] = dims.split("x").map(Number);
  const prob = { m, n, k, dtype: "f16", accF16: true };
  const vars = [`${T}_kpa`, `${T}_kpa_ah2`, `${T}_kpa_stk`, `${T}_kpa_ah2_stk`];
  const ents = vars.map((v, i) => {
    const plan = planMatmul(prob, caps, { variant: v });
    const fx = new MatmulFixture(rt, plan.problem, 5 + i);
    const bufs = fx.buffers(plan); fx.poisonC(); runPlan(rt, plan, bufs);
    const err = fx.spotError(64), ok = err <= tolerance(plan.problem, plan.lowPrecision);
    if (!ok) fails++;
    say(`${dims} ${v}: ${plan.steps.map((s) => s.desc.name).join(" + ")} spot ${err.toExponential(2)} ${ok ? "ok" : "FAIL"}`);
    return { v, plan, fx, bufs, rounds: [] };
  });
  for (const e of ents) timePlan(rt, e.plan, e.bufs, { warmup: 3, iters: 3, repeats: 1, warmMs: 200 });
  for (let r = 0; r < 7; r++) for (const i of roundOrder(ents.length, r)) {
    const e = ents[i];
    e.rounds.push(med(timePlan(rt, e.plan, e.bufs, { warmup: 2, iters: 10, repeats: 1 }).flat()));
  }
  for (const e of ents) {
    const ms = med(e.rounds);
    const tf = (2 * m * n * k) / ms / 1e9;
    results.push({ shape: dims, variant: e.v, ms, tflops: tf, rounds: e.rounds });
    say(`${dims} ${e.v}: ${ms.toFixed(4)} ms = ${tf.toFixed(1)} TF/s (rounds ${e.rounds.map((x) => x.toFixed(3)).join(" ")})`);
    e.fx.destroy();
  }
}
writeFileSync(`${OUT}/ah2.json`, JSON.stringify({ fails, results }, null, 1));
say(`fails ${fails}`);
process.exit(fails ? 1 : 0);
