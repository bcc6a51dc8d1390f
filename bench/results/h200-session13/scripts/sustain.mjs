// session 13: sustained 8192^3 f16-accumulation runs (batches of 20 products, GPU timestamps, wall clock per batch)
// to set beside nvidia-smi's clock/power samples: node perf/s13/sustain.mjs variant seconds
import { appendFileSync } from "node:fs";
const { nativeMatmulRuntime } = await import("../../dist/bench/native-runtime.js");
const { capsOf } = await import("../../dist/ts/kernels/matmul/autotune.js");
const { planMatmul } = await import("../../dist/ts/kernels/matmul/plan.js");
const { MatmulFixture } = await import("../../dist/ts/kernels/matmul/fixture.js");
const { runPlan, timePlan } = await import("../../dist/ts/kernels/matmul/run.js");
const rt = await nativeMatmulRuntime();
const caps = capsOf(rt.initDevice());
const OUT = process.env.OUT ?? "/tmp";
const [v, secs] = [process.argv[2], Number(process.argv[3] ?? 4)];
const prob = { m: 8192, n: 8192, k: 8192, dtype: "f16", accF16: true };
const plan = planMatmul(prob, caps, { variant: v });
const fx = new MatmulFixture(rt, plan.problem, 5);
const bufs = fx.buffers(plan); runPlan(rt, plan, bufs);
const med = (a) => { const b = [...a].sort((x, y) => x - y); return b[b.length >> 1]; };
const t0 = Date.now();
while (Date.now() - t0 < secs * 1000) {
  const ms = med(timePlan(rt, plan, bufs, { warmup: 0, iters: 20, repeats: 1 }).flat());
  const line = `${(Date.now() / 1000).toFixed(2)} helios ${v} ${ms.toFixed(4)} ms ${((2 * 8192 ** 3) / ms / 1e9).toFixed(1)} TF/s`;
  appendFileSync(`${OUT}/sustain.txt`, line + "\n");
}
fx.destroy();
