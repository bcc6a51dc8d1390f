// session 13: does the tuner's ranking at 8192^3 f16-acc depend on the power state its neighbours leave?
// The tuner's own candidate list and order, timed by timeInRounds with 0 and 100 ms of each candidate's
// own load before every timing; then the top candidates sustained (2 s each, two interleaved passes).
// (The warmEachMs option of timeInRounds this probe passed — Math.max(warmEachMs, first-timing 100 ms) as each timing's warmMs — was removed after the run: not kept.)
import { appendFileSync } from "node:fs";
const { nativeMatmulRuntime } = await import("../../dist/bench/native-runtime.js");
const { capsOf, timeInRounds } = await import("../../dist/ts/kernels/matmul/autotune.js");
const { planMatmul, candidateVariants } = await import("../../dist/ts/kernels/matmul/plan.js");
const { normalize } = await import("../../dist/ts/kernels/matmul/problem.js");
const { MatmulFixture } = await import("../../dist/ts/kernels/matmul/fixture.js");
const { runPlan, timePlan, precompilePlans } = await import("../../dist/ts/kernels/matmul/run.js");
const { duplicatePlans } = await import("../../dist/ts/kernels/matmul/autotune.js");
const rt = await nativeMatmulRuntime();
const caps = capsOf(rt.initDevice());
const OUT = process.env.OUT ?? "/tmp";
const say = (s) => { console.log(s); appendFileSync(`${OUT}/tunewarm.txt`, s + "\n"); };
const med = (a) => { const b = [...a].sort((x, y) => x - y); return b[b.length >> 1]; };
const dims = (process.argv[2] ?? "8192x8192x8192").split("x").map(Number);
const prob = { m: dims[0], n: dims[1], k: dims[2], dtype: "f16", accF16: process.argv[3] !== "acc32" };
const p = normalize(prob);
const cands = candidateVariants(p, caps, {});
const plans = cands.map((v) => planMatmul(prob, caps, { variant: v.name }));
precompilePlans(rt, plans);
const dup = duplicatePlans(cands.map((v) => v.name), plans);
const fx = new MatmulFixture(rt, p, 11);
const timed = cands.map((v, i) => ({ name: v.name, plan: plans[i] })).filter((c) => !dup.has(c.name));
for (const c of timed) runPlan(rt, c.plan, fx.buffers(c.plan));
const flop = 2 * p.m * p.n * p.k;
const rank = (label, warmEachMs) => {
  const t0 = Date.now();
  const rounds = timeInRounds(rt, timed.map((c) => () => ({ plan: c.plan, bufs: fx.buffers(c.plan) })), { warmup: 2, iters: 8, warmEachMs });
  const rows = timed.map((c, i) => ({ name: c.name, ms: med(rounds[i]), rounds: rounds[i] })).sort((a, b) => a.ms - b.ms);
  say(`${label} (${((Date.now() - t0) / 1000).toFixed(1)} s): ` + rows.slice(0, 6).map((r) => `${r.name} ${(flop / r.ms / 1e9).toFixed(1)}`).join(" | "));
  return rows;
};
const a = rank("warm 0", 0);
const b = rank("warm 100", 100);
const a2 = rank("warm 0 again", 0);
const top = [...new Set([...a.slice(0, 4), ...b.slice(0, 4)].map((r) => r.name))];
const sus = Object.fromEntries(top.map((n) => [n, []]));
for (let pass = 0; pass < 2; pass++) for (const n of pass ? [...top].reverse() : top) {
  const c = timed.find((x) => x.name === n);
  const t0 = Date.now();
  while (Date.now() - t0 < 2000) sus[n].push(med(timePlan(rt, c.plan, fx.buffers(c.plan), { warmup: 0, iters: 20, repeats: 1 }).flat()));
}
for (const n of top) {
  const xs = sus[n].slice(2);
  say(`sustained ${n}: ${(flop / med(xs) / 1e9).toFixed(1)} TF/s (${xs.length} batches)`);
}
fx.destroy();
