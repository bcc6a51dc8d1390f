// session 13: fp64 checks of new variants, then interleaved timing of a variant list per shape
// node perf/s13/race.mjs <shapes> <f16|bf16|acc16> <variants,...> [checkVariants,...]
// (Call 6 raced `cm_128x256x32_w2x4_v128_s1_kpr_b2_ah2`, a twin removed after the run; its planner and kernel changes are not in the tree.)
import { appendFileSync } from "node:fs";
const { nativeMatmulRuntime } = await import("../../dist/bench/native-runtime.js");
const { capsOf, roundOrder } = await import("../../dist/ts/kernels/matmul/autotune.js");
const { planMatmul } = await import("../../dist/ts/kernels/matmul/plan.js");
const { MatmulFixture } = await import("../../dist/ts/kernels/matmul/fixture.js");
const { runPlan, timePlan } = await import("../../dist/ts/kernels/matmul/run.js");
const { tolerance } = await import("../../dist/ts/kernels/matmul/reference.js");
const rt = await nativeMatmulRuntime();
const caps = capsOf(rt.initDevice());
const OUT = process.env.OUT ?? "/tmp";
const say = (s) => { console.log(s); appendFileSync(`${OUT}/race.txt`, s + "\n"); };
const med = (a) => { const b = [...a].sort((x, y) => x - y); return b[b.length >> 1]; };
const [shapes, mode, vlist, clist] = process.argv.slice(2);
const base = mode === "bf16" ? { dtype: "bf16" } : { dtype: "f16", accF16: mode === "acc16" };
let fails = 0;
for (const v of (clist ?? "").split(",").filter(Boolean)) for (const prob of [
  { m: 256, n: 512, k: 256 },
  { m: 384, n: 768, k: 512, outDtype: "f32", batch: 2, epilogue: { bias: true, act: "gelu" } },
  { m: 2304, n: 2304, k: 1024 },
]) {
  const plan = planMatmul({ ...prob, ...base }, caps, { variant: v });
  const fx = new MatmulFixture(rt, plan.problem, 3);
  try {
    const bufs = fx.buffers(plan); fx.poisonC(); runPlan(rt, plan, bufs);
    const err = fx.fullError(), tol = tolerance(plan.problem, plan.lowPrecision);
    if (!(err <= tol)) fails++;
    say(`check ${mode} ${JSON.stringify(prob)} ${plan.steps.map((s) => s.desc.name).join(" + ")} err ${err.toExponential(2)} ${err <= tol ? "ok" : "FAIL"}`);
  } finally { fx.destroy(); }
}
for (const dims of shapes.split(",")) {
  const [m, n, k] = dims.split("x").map(Number);
  const prob = { m, n, k, ...base };
  const ents = vlist.split(",").map((v, i) => {
    const plan = planMatmul(prob, caps, { variant: v });
    const fx = new MatmulFixture(rt, plan.problem, 5 + i);
    const bufs = fx.buffers(plan); fx.poisonC(); runPlan(rt, plan, bufs);
    const err = fx.spotError(64), ok = err <= tolerance(plan.problem, plan.lowPrecision);
    if (!ok) { fails++; say(`${dims} ${v}: spot ${err} FAIL`); }
    return { v, plan, fx, bufs, rounds: [] };
  });
  for (const e of ents) timePlan(rt, e.plan, e.bufs, { warmup: 3, iters: 3, repeats: 1, warmMs: 150 });
  for (let r = 0; r < 7; r++) for (const i of roundOrder(ents.length, r)) {
    const e = ents[i];
    e.rounds.push(med(timePlan(rt, e.plan, e.bufs, { warmup: 2, iters: 10, repeats: 1 }).flat()));
  }
  say(`${mode} ${dims}: ` + ents.map((e) => `${e.v.replace("cm_128x256x32_w2x4_v128_s1", "T")} ${((2 * m * n * k) / med(e.rounds) / 1e9).toFixed(1)}`).join(" | "));
  for (const e of ents) e.fx.destroy();
}
say(`fails ${fails}`);
process.exit(fails ? 1 : 0);
