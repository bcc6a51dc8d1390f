// The table of bench/alpha-gpu.sh: Alpha's trainer (this Helios and the upstream), Helios's own
// eager trainer on the same models, and `alpha bench --suite=cuda` beside `helios bench`.
//   node bench/alpha-gpu-report.mjs OUT      (reads OUT/logs, OUT/*.json; writes OUT/alpha-gpu.json)
import { existsSync, readFileSync, writeFileSync } from "node:fs";
import path from "node:path";

const out = process.argv[2] ?? "perf";
const read = (f) => (existsSync(path.join(out, f)) ? readFileSync(path.join(out, f), "utf8") : "");
const median = (xs) => {
  if (xs.length === 0) return null;
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 ? s[s.length >> 1] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
};

/** Alpha's step lines: "step k/N | loss=L | ... | Xms/it | Y tok/s ...". */
function alphaRun(name) {
  const steps = [];
  for (const line of read(`logs/${name}.log`).split("\n")) {
    const m = /^step (\d+)\/\d+ \| loss=([\d.naN]+).*?\| (\d+)ms\/it \| (\d+) tok\/s/.exec(line);
    if (m) steps.push({ step: +m[1], loss: Number(m[2]), ms: +m[3], tokS: +m[4] });
  }
  const later = steps.filter((s) => s.step >= 3);
  return {
    name, steps: steps.length, firstStepMs: steps[0]?.ms ?? null,
    stepMs: median(later.map((s) => s.ms)), tokS: median(later.map((s) => s.tokS)),
    losses: steps.map((s) => s.loss),
  };
}

function profile(file) {
  const t = read(file);
  if (!t) return null;
  const j = JSON.parse(t);
  return { stepMs: j.warmMs[j.warmMs.length - 1], gpuSpanMs: j.spanMs, dispatches: j.dispatches, tokS: (j.batch * j.seq) / (j.warmMs[j.warmMs.length - 1] / 1e3) };
}

const runs = ["helios-f32", "helios-fp16", "upstream-f32", "upstream-fp16", "helios-gpt2-f32", "upstream-gpt2-f32"].map(alphaRun);
const own = {
  small: profile("profile-small.json"), smallMatmul16: profile("profile-small-matmul16.json"),
  gpt2: profile("profile-gpt2.json"), gpt2Matmul16: profile("profile-gpt2-matmul16.json"),
};

/** `alpha bench --suite=cuda` rows (its --out JSON), and helios bench's rows. */
function alphaBench(tree) {
  const t = read(`alpha-bench-${tree}.json`);
  if (!t) return [];
  const j = JSON.parse(t);
  return (j.rows ?? j.results ?? []).map((r) => ({ shape: r.shape, ms: r.heliosMs, tflops: r.heliosTflops, cudaMs: r.cudaMs, cudaTflops: r.cudaTflops }));
}
const bench = { helios: alphaBench("mine"), upstream: alphaBench("up"), heliosBench: (() => {
  const t = read("helios-bench-f32.json");
  if (!t) return [];
  const j = JSON.parse(t);
  return (j.rows ?? []).map((r) => ({ shape: r.shape ?? `${r.m}x${r.n}x${r.k}`, ms: r.heliosMs ?? r.ms, tflops: r.heliosTflops ?? r.tflops }));
})() };

writeFileSync(path.join(out, "alpha-gpu.json"), JSON.stringify({ runs, own, bench }, null, 2));

const f = (x, d = 1) => (x === null || x === undefined || Number.isNaN(x) ? "-" : Number(x).toFixed(d));
console.log("\nAlpha's trainer (median of steps >= 3)      first step ms   step ms   tok/s");
for (const r of runs) console.log(`  ${r.name.padEnd(40)} ${f(r.firstStepMs, 0).padStart(10)} ${f(r.stepMs, 0).padStart(9)} ${f(r.tokS, 0).padStart(8)}`);
console.log("\nHelios's own eager trainer (profile-step)    step ms  GPU busy ms   tok/s  dispatches");
for (const [k, v] of Object.entries(own)) if (v) console.log(`  ${k.padEnd(40)} ${f(v.stepMs).padStart(8)} ${f(v.gpuSpanMs).padStart(11)} ${f(v.tokS, 0).padStart(8)} ${String(v.dispatches).padStart(10)}`);
console.log("\nmatmul loop               alpha bench: Helios   upstream   cuBLAS   | helios bench f32");
for (const row of bench.helios) {
  const up = bench.upstream.find((u) => u.shape === row.shape);
  const hb = bench.heliosBench.find((u) => u.shape === row.shape || u.shape?.startsWith?.(row.shape));
  console.log(`  ${String(row.shape).padEnd(22)} ${f(row.ms, 3).padStart(10)} ms ${f(up?.ms, 3).padStart(9)} ${f(row.cudaMs, 3).padStart(8)}   | ${f(hb?.ms, 3)} ms`);
}
