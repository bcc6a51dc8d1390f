// bench/matmul-shapes: the GPT-2 124M training products (B=16, T=1024) one by one, f16 in and
// out with f32 accumulation as matmul16 training runs them, in the layout the model uses (NT
// forward, NN and TN backward) and, for the weight products, in the other weight layout
// (prepacking evidence). Per problem: the planner's default variant and every tuning candidate,
// each gated (sampled fp64 check) before it is timed with GPU timestamps; PyTorch's time for
// the same product when torch + CUDA exist. Answers: what the tuner would gain inside training,
// and whether storing weights in another layout (prepacking) would.
//
// --stores=1 also times the other f16 output paths: `/coopmat` (coopmat stores to global memory)
// and `/staged4` (an f32 shared tile, 8-byte stores); the default is one 16-byte store per lane.
// --checked=1 also times every variant with bounds-checked staging loads (`variant/checked`: the
// A/B control of the unchecked loads the planner uses when the tiles divide M, N and K);
// --square=2048,4096 adds square products, NN unless --layouts=NN,NT,TN,TT lists others; --accF16=1 accumulates in f16 (the opt-in variant);
// --training=0 leaves out the training products. A --variants name also selects its split-K forms.
// --dtype=f32 times f32 inputs and output (exact-f32 variants: SIMT, cm3_*, x3_*; PyTorch with TF32
// off and on), --dtype=bf16 bf16 ones.
//
//   node dist/bench/matmul-shapes.js [--iters=20] [--repeats=3] [--variants=a,b] [--scale=1] [--checked=0] [--square=] [--layouts=NN] [--accF16=0] [--extra=MxNxK,...] [--outDtype=f16] [--dtype=f16] [--out=perf/matmul-shapes.json]
import { execFileSync } from "node:child_process";
import { writeFileSync } from "node:fs";
import { capsOf } from "../ts/kernels/matmul/autotune.js";
import { MatmulFixture } from "../ts/kernels/matmul/fixture.js";
import { candidateVariants, planMatmul } from "../ts/kernels/matmul/plan.js";
import { normalize, type MatmulProblem } from "../ts/kernels/matmul/problem.js";
import { tolerance } from "../ts/kernels/matmul/reference.js";
import { precompilePlans, runPlan, timePlan } from "../ts/kernels/matmul/run.js";
import { variantByName } from "../ts/kernels/matmul/variants.js";
import { median } from "./stats.js";
import { nativeMatmulRuntime } from "./native-runtime.js";
// lab tiles (lab/matmul-variants.ts) may be named in --only
import "../lab/matmul-variants.js";

const arg = (k: string, d: string) => process.argv.find((a) => a.startsWith(`--${k}=`))?.slice(k.length + 3) ?? d;
const iters = Number(arg("iters", "20")), repeats = Number(arg("repeats", "3")), out = arg("out", "perf/matmul-shapes.json");
const only = arg("variants", "").split(",").filter(Boolean);
// --scale=S divides every dimension by S (a smoke run on a CPU device)
const scale = Number(arg("scale", "1"));
const abChecked = arg("checked", "0") === "1";
const abStores = arg("stores", "0") === "1";
const accF16 = arg("accF16", "0") === "1";
const dtype = arg("dtype", "f16") as "f16" | "bf16" | "f32";
if (!["f16", "bf16", "f32"].includes(dtype)) throw new Error(`--dtype=${dtype}: expected f16, bf16 or f32`);
const outDtype = (dtype === "f32" ? "f32" : arg("outDtype", dtype)) as "f16" | "bf16" | "f32";
const squares = arg("square", "").split(",").filter(Boolean).map(Number);

interface Shape { name: string; m: number; n: number; k: number; transA: boolean; transB: boolean }
const N = (16 * 1024) / scale;
const shapes: Shape[] = [];
const training = arg("training", "1") !== "0";
for (const [what, o, i] of training ? ([["qkv", 2304, 768], ["proj", 768, 768], ["fc", 3072, 768], ["mlp", 768, 3072]] as const).map(([w, a, b]) => [w, a / scale, b / scale] as const) : []) {
  shapes.push({ name: `${what} fwd x·Wᵀ (NT)`, m: N, n: o, k: i, transA: false, transB: true });
  shapes.push({ name: `${what} fwd x·W, W prepacked [in,out] (NN)`, m: N, n: o, k: i, transA: false, transB: false });
  shapes.push({ name: `${what} bwd dx = dy·W (NN)`, m: N, n: i, k: o, transA: false, transB: false });
  shapes.push({ name: `${what} bwd dW = dyᵀ·x (TN)`, m: o, n: i, k: N, transA: true, transB: false });
}
if (training) shapes.push({ name: "head fwd x·Wteᵀ, 4096-row chunk (NT)", m: 4096 / scale, n: Math.round(50304 / scale), k: 768 / scale, transA: false, transB: true });
// --extra=MxNxK,... adds NN products of any size (e.g. a K sweep at fixed M, N)
for (const x of arg("extra", "").split(",").filter(Boolean)) {
  const [m, n, k] = x.split("x").map(Number);
  shapes.push({ name: `${m}x${n}x${k} (NN)`, m, n, k, transA: false, transB: false });
}
const layouts = arg("layouts", "NN").split(",").filter(Boolean);
for (const l of layouts) if (!/^[NT][NT]$/.test(l)) throw new Error(`--layouts=${l}: expected NN, NT, TN or TT`);
for (const q of squares) {
  for (const l of layouts) shapes.push({ name: `square ${q}³ (${l})`, m: q, n: q, k: q, transA: l[0] === "T", transB: l[1] === "T" });
}

const rt = await nativeMatmulRuntime();
const info = rt.initDevice();
const caps = capsOf(info);
const rows: Record<string, unknown>[] = [];
for (const s of shapes) {
  const prob: MatmulProblem = { m: s.m, n: s.n, k: s.k, transA: s.transA, transB: s.transB, dtype, outDtype, accF16 };
  const p = normalize(prob);
  const def = planMatmul(prob, caps).variant;
  const names = [...new Set([def, ...candidateVariants(p, caps).map((v) => v.name), ...only])].filter((v) => only.length === 0 || only.includes(v) || only.includes(variantByName(v).base) || v === def);
  const fx = new MatmulFixture(rt, p, 11);
  const timed: { variant: string; ms: number | null; tflops: number | null; relErr: number | null; error?: string }[] = [];
  try {
    const runs = names.flatMap((variant) => [
      { variant, aligned: true, outStore: "wide" as const, tag: "" },
      ...(abChecked ? [{ variant, aligned: false, outStore: "wide" as const, tag: "/checked" }] : []),
      ...(abStores ? (["coopmat", "staged4"] as const).map((outStore) => ({ variant, aligned: true, outStore, tag: `/${outStore}` })) : []),
    ]);
    try {
      precompilePlans(rt, runs.map((r) => planMatmul(prob, caps, { variant: r.variant, aligned: r.aligned, outStore: r.outStore })));
    } catch {
      // a plan or kernel that fails is reported on its own below
    }
    for (const { variant, aligned, outStore, tag } of runs) {
      try {
        const plan = planMatmul(prob, caps, { variant, aligned, outStore });
        plan.variant += tag;
        const bufs = fx.buffers(plan);
        runPlan(rt, plan, bufs);
        const relErr = fx.spotError(48);
        if (!(relErr <= tolerance(plan.problem, plan.lowPrecision))) {
          timed.push({ variant: plan.variant, ms: null, tflops: null, relErr, error: "failed the correctness gate" });
          continue;
        }
        const reps = timePlan(rt, plan, bufs, { warmup: 3, iters, repeats, warmMs: 150 });
        const ms = median(reps.map((r) => median(r)));
        timed.push({ variant: plan.variant, ms, tflops: (2 * s.m * s.n * s.k) / (ms * 1e9), relErr });
      } catch (e) {
        timed.push({ variant, ms: null, tflops: null, relErr: null, error: (e as Error).message.slice(0, 160) });
      }
    }
  } finally {
    fx.destroy();
  }
  const ok = timed.filter((t) => t.ms !== null) as { variant: string; ms: number; tflops: number }[];
  const best = ok.reduce((a, b) => (b.ms < a.ms ? b : a), ok[0]);
  const d = timed.find((t) => t.variant === def || t.variant.startsWith(def));
  rows.push({ ...s, default: def, defaultMs: d?.ms ?? null, best: best?.variant ?? null, bestMs: best?.ms ?? null, candidates: timed });
  process.stderr.write(`${s.name}: default ${def} ${d?.ms?.toFixed(4) ?? "-"} ms; best ${best?.variant} ${best?.ms.toFixed(4)} ms\n`);
}

// PyTorch (cuBLAS) for the same products, f16, CUDA events, same protocol.
let torch: Record<string, number> | null = null;
try {
  const body = shapes.map((s, i) => {
    const a = s.transA ? `torch.randn(${s.k},${s.m},device=d,dtype=h).t()` : `torch.randn(${s.m},${s.k},device=d,dtype=h)`;
    const b = s.transB ? `torch.randn(${s.n},${s.k},device=d,dtype=h).t()` : `torch.randn(${s.k},${s.n},device=d,dtype=h)`;
    const tf32 = dtype === "f32" ? `\ntorch.backends.cuda.matmul.allow_tf32=True\nres["${i}tf32"]=bench(lambda: a@b)\ntorch.backends.cuda.matmul.allow_tf32=False` : "";
    return `a=${a};b=${b}\nres["${i}"]=bench(lambda: a@b)${tf32}`;
  }).join("\n");
  const script = `import json, time, torch\nd="cuda";h=torch.${dtype === "f32" ? "float32" : dtype === "bf16" ? "bfloat16" : "float16"};torch.backends.cuda.matmul.allow_tf32=False;res={}\ndef bench(f):\n    t0=time.perf_counter()\n    while time.perf_counter()-t0<0.15:\n        [f() for _ in range(10)];torch.cuda.synchronize()\n    reps=[]\n    for _ in range(${repeats}):\n        s=torch.cuda.Event(enable_timing=True);e=torch.cuda.Event(enable_timing=True);s.record()\n        for _ in range(${iters}): f()\n        e.record();torch.cuda.synchronize();reps.append(s.elapsed_time(e)/${iters})\n    return sorted(reps)[len(reps)//2]\n${body}\nprint(json.dumps(res))`;
  torch = JSON.parse(execFileSync("python3", ["-c", script], { encoding: "utf8", stdio: ["ignore", "pipe", "pipe"] }).trim().split("\n").pop() as string);
} catch {
  torch = null;
}
rows.forEach((r, i) => {
  r.torchMs = torch ? torch[String(i)] ?? null : null;
  if (dtype === "f32") r.torchTf32Ms = torch ? torch[`${i}tf32`] ?? null : null;
});
writeFileSync(out, JSON.stringify({ device: info.deviceName, iters, repeats, rows }, null, 1));
const f = (x: unknown, d = 3) => (typeof x === "number" ? x.toFixed(d) : "-").padStart(8);
console.log(`device ${info.deviceName}; ${dtype} in, ${outDtype} out, ${accF16 ? "f16" : "f32"} accumulation; GPU timestamps, median of ${repeats} x ${iters}${dtype === "f32" ? "; torch = TF32 off, tf32 = on" : ""}`);
console.log(`${"product".padEnd(42)} ${"default".padStart(8)} ${"best".padStart(8)} ${"torch".padStart(8)}${dtype === "f32" ? " " + "tf32".padStart(8) : ""}  best variant`);
for (const r of rows) console.log(`${String(r.name).padEnd(42)} ${f(r.defaultMs)} ${f(r.bestMs)} ${f(r.torchMs)}${dtype === "f32" ? " " + f(r.torchTf32Ms) : ""}  ${r.best}`);
