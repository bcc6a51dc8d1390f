// bench/flash-bwd: HeliosBackend.flashAttentionBackward on each HELIOS_ATTN_BWD path (cm: the
// tensor-core flash kernels; dense: tensor-core matmuls over [BH, T, T] scores; flash: the SIMT
// flash kernels) beside PyTorch's scaled_dot_product_attention backward in the same run when
// python3 + torch + CUDA exist. Each path first passes a correctness gate against float64
// gradients on small causal cases; a path that fails is reported and not timed (exit 1).
//
//   node dist/bench/flash-bwd.js [--bh=192] [--t=1024] [--d=64] [--iters=20] [--paths=cm,dense,flash]
//                                [--out=bench/flash-bwd.json] [--torch=0]
//
// Timing (bench/ops' protocol): f16 Q/K/V/dO, causal, scale 1/sqrt(D), O and lse from the
// backend's forward; `iters` backward calls recorded back to back (each result released, so
// buffers are reused as in training), one warm-up repetition, 400 ms of sustained load, then 3
// profiled repetitions; GPU ms = the union of the dispatch stamp intervals / iters, median.
// PyTorch: backward of the same sdpa output (retain_graph), CUDA events, same counts.
// TFLOP/s counts the causal half of 5 matmuls: 5 x 2 x BH x T^2 / 2 x D.
import { writeFileSync } from "node:fs";
import { HeliosBackend } from "../ts/backend.js";
import { runtime } from "../ts/device.js";
import type { HeliosConfig } from "../ts/config.js";
import type { TensorData } from "../ts/types.js";
import { f16BitsToF32 } from "../ts/f16.js";
import { ProfilingRuntime, summarize, warmFor } from "./profiling.js";
import { naiveBackward, torchEventsMs } from "./flash-check.js";

function arg(name: string, dflt: string): string {
  const a = process.argv.find((x) => x.startsWith(`--${name}=`));
  return a ? a.slice(name.length + 3) : dflt;
}

type Path = HeliosConfig["attnBackward"];
const BH = Number(arg("bh", "192")), T = Number(arg("t", "1024")), D = Number(arg("d", "64"));
const iters = Number(arg("iters", "20"));
const REPEATS = 3;
const out = arg("out", "bench/flash-bwd.json");
const useTorch = arg("torch", "1") !== "0";
const paths = arg("paths", "cm,dense,flash").split(",") as Path[];
for (const p of paths) if (!["cm", "dense", "flash"].includes(p)) throw new Error(`bench/flash-bwd: unknown path ${p} (cm, dense, flash)`);

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];

interface Inputs { q: TensorData; k: TensorData; v: TensorData; dO: TensorData; o: TensorData; lse: TensorData }

function inputs(B: HeliosBackend, bh: number, t: number, d: number): Inputs {
  const h = (x: TensorData) => B.castDtype!(x, "f16");
  const [q, k, v, dO] = [0, 1, 2, 3].map(() => h(B.randn([bh, t, d])));
  const f = B.flashAttention!(q, k, v, t, 1 / Math.sqrt(d), 0);
  return { q, k, v, dO, o: f.output, lse: f.lse };
}

function backward(B: HeliosBackend, x: Inputs, t: number, d: number) {
  return B.flashAttentionBackward!(x.q, x.k, x.v, x.o, x.dO, x.lse, t, 1 / Math.sqrt(d), 0);
}

/** Worst gradient error relative to the largest reference magnitude (max over dQ, dK, dV). */
function gate(B: HeliosBackend, bh: number, t: number, d: number): number {
  const x = inputs(B, bh, t, d);
  const g = backward(B, x, t, d);
  const host = (td: TensorData) => Float64Array.from(td.data as Uint16Array, f16BitsToF32);
  const ref = naiveBackward(host(x.q), host(x.k), host(x.v), host(x.dO), bh, t, d, 1 / Math.sqrt(d));
  let worst = 0;
  for (const [got, want] of [[g.dQ, ref.dq], [g.dK, ref.dk], [g.dV, ref.dv]] as const) {
    const vals = got.data as Uint16Array;
    let err = 0, mag = 0;
    for (let i = 0; i < vals.length; i++) {
      const e = Math.abs(f16BitsToF32(vals[i]) - want[i]);
      err = Number.isNaN(e) ? Infinity : Math.max(err, e);
      mag = Math.max(mag, Math.abs(want[i]));
    }
    worst = Math.max(worst, err / Math.max(1, mag));
  }
  return worst;
}

function timeHelios(B: HeliosBackend, P: ProfilingRuntime): { ms: number; reps: number[]; kernels: Record<string, number> } {
  const x = inputs(B, BH, T, D);
  const runIters = () => {
    for (let i = 0; i < iters; i++) {
      const g = backward(B, x, T, D);
      B.evaluate(g.dQ, g.dK, g.dV);
      for (const t of [g.dQ, g.dK, g.dV]) B.releaseGpuTensor(t);
    }
    B.syncGpu();
  };
  runIters();
  warmFor(400, runIters);
  const reps: number[] = [];
  const labels: Record<string, number>[] = [];
  for (let r = 0; r < REPEATS; r++) {
    P.profiling = true;
    runIters();
    P.profiling = false;
    const sm = summarize(P.take());
    reps.push(sm.spanMs / iters);
    labels.push(Object.fromEntries([...sm.byLabel].map(([l, e]) => [l, e.ms / iters])));
  }
  for (const t of Object.values(x)) B.releaseGpuTensor(t);
  return { ms: median(reps), reps, kernels: labels[reps.indexOf(median(reps))] };
}

function torchMs(): number | string {
  const r = torchEventsMs(
    `q=torch.randn(1,${BH},${T},${D},device=d,dtype=torch.float16,requires_grad=True)
k=torch.randn_like(q,requires_grad=True);v=torch.randn_like(q,requires_grad=True);g=torch.randn_like(q)
o=torch.nn.functional.scaled_dot_product_attention(q,k,v,is_causal=True)
f=lambda: torch.autograd.grad(o,(q,k,v),g,retain_graph=True)`, iters, REPEATS);
  if (typeof r === "string") return r;
  torchMeta = { device: r.device, torch: r.torch };
  return r.ms;
}

let torchMeta: Record<string, string> | null = null;

function main(): number {
  const P = new ProfilingRuntime(runtime());
  const flops = (5 * 2 * BH * T * T * D) / 2;
  const torch = useTorch ? torchMs() : "PyTorch reference skipped (--torch=0)";
  const rows = [];
  let failed = 0, device = "";
  for (const path of paths) {
    const B = new HeliosBackend({ runtime: P.rt, config: { attnBackward: path } });
    device = B.getDeviceInfo().deviceName;
    const errors = [gate(B, 3, 256, D), gate(B, 2, 128, D)];
    if (!errors.every((e) => e < 2e-2)) {
      failed++;
      rows.push({ path, status: "FAIL", gateErrors: errors });
      console.log(`FAIL ${path}: gate errors ${errors.map((e) => e.toExponential(2)).join(", ")}`);
      continue;
    }
    const t = timeHelios(B, P);
    B.purgeBufferPools();
    const ratio = typeof torch === "number" ? torch / t.ms : null;
    rows.push({ path, status: "ok", gateErrors: errors, ms: t.ms, repeats: t.reps, tflops: flops / (t.ms * 1e9), ratio, kernels: t.kernels });
    console.log(`ok   ${path}: ${t.ms.toFixed(4)} ms (gate errors ${errors.map((e) => e.toExponential(1)).join(", ")}); kernels ${Object.entries(t.kernels).map(([k, v]) => `${k} ${v.toFixed(3)}`).join(", ")}`);
  }
  const json = {
    meta: { device, torch: torchMeta, problem: { bh: BH, t: T, d: D }, iters, repeats: REPEATS, time: new Date().toISOString() },
    torchMs: typeof torch === "number" ? torch : null, note: typeof torch === "string" ? torch : null, rows,
  };
  writeFileSync(out, JSON.stringify(json, null, 2));
  console.log(`wrote ${out}`);
  console.log(`attention backward, causal f16, BH=${BH} T=${T} D=${D} on ${device}${torchMeta ? `; torch ${torchMeta.torch}` : ""}`);
  if (typeof torch === "string") console.log(`note: ${torch}`);
  else console.log(`${"PyTorch sdpa bwd".padEnd(16)}  ${torch.toFixed(4).padStart(9)}  ${(flops / (torch * 1e9)).toFixed(1).padStart(8)}`);
  console.log(`${"path".padEnd(16)}  ${"ms".padStart(9)}  ${"TFLOP/s".padStart(8)}  ${"torch/helios".padStart(12)}`);
  for (const r of rows) {
    if (r.ms === undefined) console.log(`${r.path.padEnd(16)}  ${r.status}`);
    else console.log(`${r.path.padEnd(16)}  ${r.ms.toFixed(4).padStart(9)}  ${r.tflops!.toFixed(1).padStart(8)}  ${(r.ratio == null ? "-" : r.ratio.toFixed(2)).padStart(12)}`);
  }
  return failed ? 1 : 0;
}

process.exitCode = main();
