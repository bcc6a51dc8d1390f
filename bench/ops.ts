// bench/ops: per-op GPU time and bandwidth of HeliosBackend and the ratio to PyTorch on the
// same GPU in the same run (python3 subprocess, CUDA events) when python3 + torch + CUDA exist;
// otherwise Helios-only rows with a note. Prints a table (last) and writes JSON.
//
//   node dist/bench/ops.js [--quick] [--submit=batch|call] [--iters=30] [--warm-ms=500] [--out=bench/ops.json] [--n= --rows= --cols= --bh= --t=]
//
// Protocol (both sides): warm up with one full repetition (compiles kernels and lets the
// buffer pool reach its steady size) and then keep the GPU busy for --warm-ms (default 500:
// the clock governor runs short bursts after idle time at idle SM clocks), then 3 repetitions of `iters` back-to-back calls;
// each figure is the median of the 3 per-repetition means.
// --submit=batch (default): a repetition's calls are recorded into one batch, as a training step
// records them, and submitted together; independent calls may overlap on the GPU (the tail of
// one with the start of the next). --submit=call submits each call on its own (one batch each):
// no overlap, and each call's span includes its launch latency.
// Helios GPU ms: batches begun with {profile: true}; the GPU busy time of a repetition — the
// union of the dispatches' [startNs, endNs] stamp intervals over all its batches (one queue
// clock) — divided by `iters`: what CUDA events around the same calls measure while the host
// keeps the GPU fed (bench/profiling.ts). (Summing per-dispatch durations instead overcounts: independent dispatches with no
// barrier between them overlap, and a start stamp at the top of the pipe is written before
// the previous dispatch drains. That sum is kept as `sumMs` in the JSON.) Helios host ms: wall clock
// of the same repetition (recording, submit and the final wait) divided by `iters`.
// ratio = torchMs / heliosGpuMs (> 1 means Helios is faster).
import { writeFileSync } from "node:fs";
import { HeliosBackend } from "../ts/backend.js";
import { runtime } from "../ts/device.js";
import { ProfilingRuntime, summarize, warmFor } from "./profiling.js";
import { torchEventsBatch } from "./torch.js";
import type { TensorData } from "../ts/types.js";

interface Case {
  name: string;
  /** Run on a backend with fusion off (the unfused baseline of the chain). */
  unfused?: boolean;
  /** Bytes moved per iteration (for GB/s). */
  bytes: number;
  /** Sets up tensors and returns one iteration. */
  helios: (B: HeliosBackend) => () => TensorData[];
  torch: string;
}

function arg(name: string, dflt: string): string {
  const a = process.argv.find((x) => x.startsWith(`--${name}=`));
  return a ? a.slice(name.length + 3) : dflt;
}

const quick = process.argv.includes("--quick");
const iters = Number(arg("iters", quick ? "5" : "30"));
const REPEATS = 3;
const out = arg("out", "bench/ops.json");
const submitMode = arg("submit", "batch");
if (submitMode !== "batch" && submitMode !== "call") throw new Error(`--submit=${submitMode}: expected batch or call`);
const submitEach = submitMode === "call";

// --n, --rows, --cols, --bh, --t override the sizes (lavapipe experiments at mid sizes)
const N = Number(arg("n", String(quick ? 1 << 16 : 1 << 26)));
const [R, C] = [Number(arg("rows", quick ? "64" : "8192")), Number(arg("cols", quick ? "256" : "4096"))];
const [BH, T, D] = [Number(arg("bh", quick ? "2" : "96")), Number(arg("t", quick ? "64" : "1024")), 64];

/** scale(add(mul(a,b),c)); intermediates are released as soon as they are consumed. */
function chain(B: HeliosBackend): () => TensorData[] {
  const a = B.randn([N]), b = B.randn([N]), c = B.randn([N]);
  return () => {
    const m = B.mul(a, b), s = B.add(m, c);
    B.releaseGpuTensor(m);
    const out = B.scale(s, 0.5);
    B.releaseGpuTensor(s);
    return [out];
  };
}

/** (a+b)*(a-b): three ops on two inputs; unfused moves 9N floats, fused 3N (a 3x bound). */
function chain2(B: HeliosBackend): () => TensorData[] {
  const a = B.randn([N]), b = B.randn([N]);
  return () => {
    const s = B.add(a, b), d = B.sub(a, b);
    const out = B.mul(s, d);
    B.releaseGpuTensor(s);
    B.releaseGpuTensor(d);
    return [out];
  };
}

const cases: Case[] = [
  {
    name: `add f32 n=${N}`, bytes: 3 * 4 * N,
    helios: (B) => { const a = B.randn([N]), b = B.randn([N]); return () => [B.add(a, b)]; },
    torch: `a=torch.randn(${N},device=d);b=torch.randn(${N},device=d)\nf=lambda: a+b`,
  },
  {
    name: `fused scale(add(mul(a,b),c)) n=${N}`, bytes: 4 * 4 * N,
    helios: chain,
    torch: `a=torch.randn(${N},device=d);b=torch.randn(${N},device=d);c=torch.randn(${N},device=d)\nf=lambda: (a*b+c)*0.5`,
  },
  {
    name: `unfused scale(add(mul(a,b),c)) n=${N}`, bytes: 4 * 4 * N, unfused: true,
    helios: chain,
    torch: `a=torch.randn(${N},device=d);b=torch.randn(${N},device=d);c=torch.randn(${N},device=d)\nf=lambda: (a*b+c)*0.5`,
  },
  {
    name: `fused (a+b)*(a-b) n=${N}`, bytes: 3 * 4 * N,
    helios: chain2,
    torch: `a=torch.randn(${N},device=d);b=torch.randn(${N},device=d)\nf=lambda: (a+b)*(a-b)`,
  },
  {
    name: `unfused (a+b)*(a-b) n=${N}`, bytes: 3 * 4 * N, unfused: true,
    helios: chain2,
    torch: `a=torch.randn(${N},device=d);b=torch.randn(${N},device=d)\nf=lambda: (a+b)*(a-b)`,
  },
  {
    name: `softmax f32 ${R}x${C}`, bytes: 2 * 4 * R * C,
    helios: (B) => { const x = B.randn([R, C]); return () => [B.softmax(x)]; },
    torch: `x=torch.randn(${R},${C},device=d)\nf=lambda: torch.softmax(x,-1)`,
  },
  {
    name: `layerNorm f32 ${R}x${C}`, bytes: 2 * 4 * R * C,
    helios: (B) => { const x = B.randn([R, C]), w = B.randn([C]), b = B.randn([C]); return () => [B.layerNorm(x, w, b, 1e-5)]; },
    torch: `x=torch.randn(${R},${C},device=d);w=torch.randn(${C},device=d);b=torch.randn(${C},device=d)\nf=lambda: torch.nn.functional.layer_norm(x,(${C},),w,b,1e-5)`,
  },
  {
    name: `flashAttention fwd f16 BH=${BH} T=${T} D=${D} causal`, bytes: 4 * 2 * BH * T * D,
    helios: (B) => {
      const q = B.castDtype!(B.randn([BH, T, D]), "f16"), k = B.castDtype!(B.randn([BH, T, D]), "f16"), v = B.castDtype!(B.randn([BH, T, D]), "f16");
      return () => { const r = B.flashAttention!(q, k, v, T, 1 / Math.sqrt(D), 0); return [r.output, r.lse]; };
    },
    torch: `q=torch.randn(1,${BH},${T},${D},device=d,dtype=torch.float16);k=torch.randn_like(q);v=torch.randn_like(q)\nf=lambda: torch.nn.functional.scaled_dot_product_attention(q,k,v,is_causal=True)`,
  },
];

interface HeliosTiming {
  gpuMs: number;
  /** Sum of per-dispatch durations (overcounts overlapping dispatches; for comparison). */
  sumMs: number;
  hostMs: number;
  dispatches: number;
  /** New device allocations per iteration in the timed repetitions (0 once the pool is warm). */
  allocations: number;
  /** GPU ms per iteration by kernel label (median repetition), largest first. */
  kernels: Record<string, number>;
}

/** Sustained load before each case's timed repetitions (both sides), see timeHelios. */
const WARM_MS = Number(arg("warm-ms", "500"));

const median = (xs: number[]) => [...xs].sort((p, q) => p - q)[Math.floor(xs.length / 2)];

function timeHelios(B: HeliosBackend, P: ProfilingRuntime, c: Case): HeliosTiming {
  const step = c.helios(B);
  const runIters = () => {
    for (let i = 0; i < iters; i++) {
      const outs = step();
      // force the fused chain to dispatch; then hand buffers back as training would
      B.evaluate(...outs);
      outs.forEach((t) => B.releaseGpuTensor(t));
      if (submitEach) B.flush();
    }
    B.syncGpu();
  };
  B.syncGpu();
  const check = step();
  for (const t of check) void t.data;
  check.forEach((t) => B.releaseGpuTensor(t));
  runIters(); // warm-up repetition: pool buffers for `iters` in-flight outputs exist after it
  warmFor(WARM_MS, runIters); // clocks up before timing (bench/profiling.ts)
  const gpu: number[] = [], sums: number[] = [], host: number[] = [], counts: number[] = [];
  const byLabel: Record<string, number>[] = [];
  const allocs0 = B.stats().pool.allocations;
  for (let r = 0; r < REPEATS; r++) {
    P.profiling = true;
    const t0 = performance.now();
    runIters();
    host.push((performance.now() - t0) / iters);
    P.profiling = false;
    const sm = summarize(P.take());
    const labels: Record<string, number> = {};
    for (const [label, e] of sm.byLabel) labels[label] = e.ms / iters;
    gpu.push(sm.spanMs / iters);
    sums.push(sm.sumMs / iters);
    counts.push(sm.dispatches / iters);
    byLabel.push(labels);
  }
  const mid = gpu.indexOf(median(gpu));
  const kernels = Object.fromEntries(Object.entries(byLabel[mid]).sort((p, q) => q[1] - p[1]));
  const allocations = (B.stats().pool.allocations - allocs0) / (REPEATS * iters);
  return { gpuMs: median(gpu), sumMs: median(sums), hostMs: median(host), dispatches: median(counts), allocations, kernels };
}

function torchTimes(): Record<string, number> | string {
  const r = torchEventsBatch(cases.map((c) => ({ name: c.name, setup: c.torch })), { iters, repeats: REPEATS, warmMs: WARM_MS });
  if (typeof r === "string") return `${r}: Helios-only rows`;
  torchMeta = { device: r.device, torch: r.torch };
  return r.ms;
}

let torchMeta: Record<string, string> | null = null;

function main(): void {
  const P = new ProfilingRuntime(runtime());
  const B = new HeliosBackend({ runtime: P.rt });
  const U = new HeliosBackend({ runtime: P.rt, config: { fusion: false } });
  const info = B.getDeviceInfo();
  const torch = torchTimes();
  const rows = cases.map((c) => {
    const h = timeHelios(c.unfused ? U : B, P, c);
    B.purgeBufferPools();
    const tms = typeof torch === "string" ? null : torch[c.name] ?? null;
    return {
      op: c.name, heliosGpuMs: h.gpuMs, heliosSumMs: h.sumMs, heliosHostMs: h.hostMs, heliosGBps: c.bytes / (h.gpuMs * 1e6),
      dispatchesPerIter: h.dispatches, allocationsPerIter: h.allocations, kernels: h.kernels,
      torchMs: tms, torchGBps: tms ? c.bytes / (tms * 1e6) : null, ratio: tms ? tms / h.gpuMs : null,
    };
  });
  // fused vs unfused GPU time per chain (rows named "fused X" / "unfused X")
  const chains = rows.filter((r) => r.op.startsWith("fused ")).map((f) => {
    const u = rows.find((r) => r.op === `un${f.op}`);
    return { chain: f.op.slice("fused ".length), speedup: u ? u.heliosGpuMs / f.heliosGpuMs : NaN };
  });
  const speedup = chains[0].speedup;
  const note = typeof torch === "string" ? torch : null;
  const json = {
    meta: { device: info.deviceName, driver: info.driverName ?? null, torch: torchMeta, iters, repeats: REPEATS, quick, submit: submitMode, note, time: new Date().toISOString() },
    rows, fusedChainSpeedup: speedup, fusedChains: chains,
  };
  writeFileSync(out, JSON.stringify(json, null, 2));
  console.log(`wrote ${out}`);
  for (const r of rows) {
    const top = Object.entries(r.kernels).slice(0, 3).map(([k, v]) => `${k} ${v.toFixed(3)}`).join(", ");
    console.log(`  ${r.op}: ${r.dispatchesPerIter} dispatch(es), ${r.allocationsPerIter.toFixed(2)} new allocation(s) per iter; GPU ms by kernel: ${top}`);
  }
  console.log(`device: ${info.deviceName}${torchMeta ? `, torch ${torchMeta.torch} on ${torchMeta.device}` : ""}; ${iters} iters x ${REPEATS} repetitions, medians; submit=${submitMode}`);
  if (note) console.log(`note: ${note}`);
  for (const c of chains) console.log(`fused vs unfused ${c.chain} (GPU time): ${c.speedup.toFixed(2)}x`);
  const heads = ["gpu ms", "GB/s", "host ms", "torch ms", "GB/s", "ratio"];
  console.log(["op".padEnd(52), ...heads.map((h) => h.padStart(9))].join("  "));
  for (const r of rows) {
    const f = (x: number | null, d = 3) => (x === null ? "-" : x.toFixed(d)).padStart(9);
    console.log([r.op.padEnd(52), f(r.heliosGpuMs), f(r.heliosGBps, 1), f(r.heliosHostMs), f(r.torchMs), f(r.torchGBps, 1), f(r.ratio, 2)].join("  "));
  }
}

main();
