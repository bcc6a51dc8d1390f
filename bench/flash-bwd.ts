// bench/flash-bwd: HeliosBackend.flashAttentionBackward on each HELIOS_ATTN_BWD path (cm: the
// tensor-core flash kernels — for f32 their split bf16 hi/lo form; dense: tensor-core matmuls
// over [BH, T, T] scores, f16 only; flash: the SIMT flash kernels), and the forward each path
// pairs with (cm, dense: HELIOS_FLASH_VARIANT=auto; flash: simt), beside PyTorch's
// scaled_dot_product_attention in the same run when python3 + torch + CUDA exist. Each path
// first passes a correctness gate (forward output and gradients) against float64 on small
// causal cases (T = 256, 128, 192) — relative error 2e-2 for f16, 1e-4 for f32; a path that fails
// is reported and not timed (exit 1).
//
//   node dist/bench/flash-bwd.js [--dtype=f16|f32] [--bh=192] [--t=1024] [--d=64] [--iters=20]
//                                [--paths=cm,dense,flash] [--variant=auto] [--layout=bhtd|rows] [--heads=12]
//                                [--out=bench/flash-bwd.json] [--torch=0]
// --variant: the HELIOS_FLASH_VARIANT the cm and dense paths' forward uses (default auto).
// --layout=rows: the tensors in the trainer's layout (AttentionLayout, packed): Q, K, V one
// [B*T, 3*H*D] tensor with H = --heads (B = BH / H; the gate's small cases take one batch row),
// O and dO [B*T, H*D], dQKV [B*T, 3*H*D]; the _rows kernels (the dense path adds head copies).
//
// Timing (bench/ops' protocol): Q/K/V/dO in the dtype, causal, scale 1/sqrt(D), O and lse from
// the backend's forward; `iters` calls recorded back to back (each result released, so buffers
// are reused as in training), one warm-up repetition, 400 ms of sustained load, then 3 profiled
// repetitions; GPU ms = the union of the dispatch stamp intervals / iters, median. PyTorch:
// forward, and backward of the same sdpa output (retain_graph), CUDA events, same counts (f32
// with TF32 off). TFLOP/s counts the causal half: forward 2 matmuls, backward 5, each
// 2 x BH x T^2 / 2 x D.
import { writeFileSync } from "node:fs";
import { HeliosBackend } from "../ts/backend.js";
import { runtime } from "../ts/device.js";
import { FLASH_VARIANTS, type FlashVariantName, type HeliosConfig } from "../ts/config.js";
import type { TensorData } from "../ts/types.js";
import { f16BitsToF32 } from "../ts/f16.js";
import { ProfilingRuntime, summarize, warmFor } from "./profiling.js";
import { attnErrors, naive, naiveBackward, torchEventsMs } from "./flash-check.js";
import type { AttentionLayout } from "../ts/ops/attention.js";

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
const dtype = arg("dtype", "f16");
if (dtype !== "f16" && dtype !== "f32") throw new Error(`bench/flash-bwd: --dtype=${dtype}: expected f16 or f32`);
const paths = arg("paths", dtype === "f16" ? "cm,dense,flash" : "cm,flash").split(",") as Path[];
for (const p of paths) if (!["cm", "dense", "flash"].includes(p)) throw new Error(`bench/flash-bwd: unknown path ${p} (cm, dense, flash)`);
const GATE = dtype === "f16" ? 2e-2 : 1e-4;
const variant = arg("variant", "auto") as FlashVariantName;
const layoutArg = arg("layout", "bhtd");
if (layoutArg !== "bhtd" && layoutArg !== "rows") throw new Error(`bench/flash-bwd: --layout=${layoutArg}: expected bhtd or rows`);
const HEADS = Number(arg("heads", "12"));
if (!FLASH_VARIANTS.includes(variant)) throw new Error(`bench/flash-bwd: --variant=${variant}: expected one of ${FLASH_VARIANTS.join(", ")}`);

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];

interface Inputs { q: TensorData; k: TensorData; v: TensorData; dO: TensorData; o: TensorData; lse: TensorData; layout?: AttentionLayout }

/** --layout=rows: H heads per batch row (all of bh when --heads does not divide it). */
const headsOf = (bh: number) => (bh % HEADS === 0 ? HEADS : bh);

function inputs(B: HeliosBackend, bh: number, t: number, d: number): Inputs {
  const h = (x: TensorData) => (dtype === "f16" ? B.castDtype!(x, "f16") : x);
  if (layoutArg === "rows") {
    const H = headsOf(bh), rows = (bh / H) * t;
    const layout = { heads: H, packed: true };
    const qkv = h(B.randn([rows, 3 * H * d])), dO = h(B.randn([rows, H * d]));
    const f = B.flashAttention(qkv, qkv, qkv, t, 1 / Math.sqrt(d), 0, layout);
    return { q: qkv, k: qkv, v: qkv, dO, o: f.output, lse: f.lse, layout };
  }
  const [q, k, v, dO] = [0, 1, 2, 3].map(() => h(B.randn([bh, t, d])));
  const f = B.flashAttention!(q, k, v, t, 1 / Math.sqrt(d), 0);
  return { q, k, v, dO, o: f.output, lse: f.lse };
}

function backward(B: HeliosBackend, x: Inputs, t: number, d: number) {
  return B.flashAttentionBackward(x.q, x.k, x.v, x.o, x.dO, x.lse, t, 1 / Math.sqrt(d), 0, x.layout);
}

/** Part p of host values in the rows layout ([B*T, W]) as [BH, T, D]; as they are in bhtd. */
function heads(x: Float64Array, bh: number, t: number, d: number, p = 0): Float64Array {
  if (layoutArg !== "rows") return x;
  const H = headsOf(bh), W = x.length / ((bh / H) * t), out = new Float64Array(bh * t * d);
  for (let b = 0; b < bh / H; b++) for (let hh = 0; hh < H; hh++) for (let i = 0; i < t; i++) for (let e = 0; e < d; e++) {
    out[((b * H + hh) * t + i) * d + e] = x[(b * t + i) * W + p * H * d + hh * d + e];
  }
  return out;
}

/** Worst error relative to the largest reference magnitude (max over O, dQ, dK, dV). */
function gate(B: HeliosBackend, bh: number, t: number, d: number): number {
  const x = inputs(B, bh, t, d);
  const g = backward(B, x, t, d);
  const host = (td: TensorData) =>
    td.dtype === "f16" ? Float64Array.from(td.data as Uint16Array, f16BitsToF32) : Float64Array.from(td.data as Float32Array);
  const [q, k, v] = [x.q, x.k, x.v].map((y, p) => heads(host(y), bh, t, d, p));
  const ref = naiveBackward(q, k, v, heads(host(x.dO), bh, t, d), bh, t, d, 1 / Math.sqrt(d));
  const fwd = naive(q, k, v, bh, t, d, 1 / Math.sqrt(d), 0);
  let worst = 0;
  for (const [p, got, want] of [[0, x.o, fwd.o], [0, g.dQ, ref.dq], [1, g.dK, ref.dk], [2, g.dV, ref.dv]] as const) {
    // rows: dQ, dK, dV are the one packed tensor
    worst = Math.max(worst, attnErrors(heads(host(got), bh, t, d, p), want).maxRel);
  }
  return worst;
}

/** GPU ms per backward (or forward, `fwd`) call, the bench/ops protocol. */
function timeHelios(B: HeliosBackend, P: ProfilingRuntime, fwd: boolean): { ms: number; reps: number[]; kernels: Record<string, number> } {
  const x = inputs(B, BH, T, D);
  const call = (): TensorData[] => {
    if (!fwd) {
      const g = backward(B, x, T, D);
      return [g.dQ, g.dK, g.dV];
    }
    const f = B.flashAttention(x.q, x.k, x.v, T, 1 / Math.sqrt(D), 0, x.layout);
    return [f.output, f.lse];
  };
  const runIters = () => {
    for (let i = 0; i < iters; i++) {
      const ts = [...new Set(call())];
      B.evaluate(...ts);
      for (const t of ts) B.releaseGpuTensor(t);
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
  for (const t of new Set([x.q, x.k, x.v, x.dO, x.o, x.lse])) B.releaseGpuTensor(t);
  return { ms: median(reps), reps, kernels: labels[reps.indexOf(median(reps))] };
}

function torchMs(fwd: boolean): number | string {
  const r = torchEventsMs(
    `torch.backends.cuda.matmul.allow_tf32=False;torch.backends.cudnn.allow_tf32=False
q=torch.randn(1,${BH},${T},${D},device=d,dtype=torch.${dtype === "f16" ? "float16" : "float32"},requires_grad=True)
k=torch.randn_like(q,requires_grad=True);v=torch.randn_like(q,requires_grad=True);g=torch.randn_like(q)
sdpa=lambda: torch.nn.functional.scaled_dot_product_attention(q,k,v,is_causal=True)
o=sdpa()
f=${fwd ? "sdpa" : "lambda: torch.autograd.grad(o,(q,k,v),g,retain_graph=True)"}`, iters, REPEATS);
  if (typeof r === "string") return r;
  torchMeta = { device: r.device, torch: r.torch };
  return r.ms;
}

let torchMeta: Record<string, string> | null = null;

function main(): number {
  const P = new ProfilingRuntime(runtime());
  const unit = 2 * BH * T * T * D / 2;
  const flops = { fwd: 2 * unit, bwd: 5 * unit };
  const torch = { fwd: useTorch ? torchMs(true) : "PyTorch reference skipped (--torch=0)", bwd: useTorch ? torchMs(false) : "" };
  const rows = [];
  let failed = 0, device = "";
  for (const path of paths) {
    const B = new HeliosBackend({ runtime: P.rt, config: { attnBackward: path, flashVariant: path === "flash" ? "simt" : variant } });
    device = B.getDeviceInfo().deviceName;
    // T = 192: the tensor-core dK/dV kernel's form for T % 128 != 0 (attention-cm-bwd-kv.ts)
    const errors = [gate(B, 3, 256, D), gate(B, 2, 128, D), gate(B, 2, 192, D)];
    if (!errors.every((e) => e < GATE)) {
      failed++;
      rows.push({ path, status: "FAIL", gateErrors: errors });
      console.log(`FAIL ${path}: gate errors ${errors.map((e) => e.toExponential(2)).join(", ")} (limit ${GATE})`);
      continue;
    }
    for (const pass of ["fwd", "bwd"] as const) {
      const t = timeHelios(B, P, pass === "fwd");
      B.purgeBufferPools();
      const tm = torch[pass];
      const ratio = typeof tm === "number" ? tm / t.ms : null;
      rows.push({ path, pass, status: "ok", gateErrors: errors, ms: t.ms, repeats: t.reps, tflops: flops[pass] / (t.ms * 1e9), ratio, kernels: t.kernels });
      console.log(`ok   ${path} ${pass}: ${t.ms.toFixed(4)} ms (gate errors ${errors.map((e) => e.toExponential(1)).join(", ")}); kernels ${Object.entries(t.kernels).map(([k, v]) => `${k} ${v.toFixed(3)}`).join(", ")}`);
    }
  }
  const json = {
    meta: { device, torch: torchMeta, dtype, variant, layout: layoutArg, heads: layoutArg === "rows" ? headsOf(BH) : null, problem: { bh: BH, t: T, d: D }, iters, repeats: REPEATS, time: new Date().toISOString() },
    torchMs: { fwd: typeof torch.fwd === "number" ? torch.fwd : null, bwd: typeof torch.bwd === "number" ? torch.bwd : null },
    note: typeof torch.fwd === "string" ? torch.fwd : null, rows,
  };
  writeFileSync(out, JSON.stringify(json, null, 2));
  console.log(`wrote ${out}`);
  console.log(`attention, causal ${dtype}, BH=${BH} T=${T} D=${D}${layoutArg === "rows" ? ` (rows layout, H=${headsOf(BH)})` : ""} on ${device}${torchMeta ? `; torch ${torchMeta.torch}` : ""}`);
  if (typeof torch.fwd === "string") console.log(`note: ${torch.fwd}`);
  console.log(`${"path".padEnd(16)}  ${"pass".padEnd(4)}  ${"ms".padStart(9)}  ${"TFLOP/s".padStart(8)}  ${"torch/helios".padStart(12)}`);
  for (const pass of ["fwd", "bwd"] as const) {
    const tm = torch[pass];
    if (typeof tm === "number") console.log(`${"PyTorch sdpa".padEnd(16)}  ${pass}  ${tm.toFixed(4).padStart(9)}  ${(flops[pass] / (tm * 1e9)).toFixed(1).padStart(8)}`);
  }
  for (const r of rows) {
    if (r.ms === undefined) console.log(`${r.path.padEnd(16)}  ${r.status}`);
    else console.log(`${r.path.padEnd(16)}  ${r.pass}  ${r.ms.toFixed(4).padStart(9)}  ${r.tflops!.toFixed(1).padStart(8)}  ${(r.ratio == null ? "-" : r.ratio.toFixed(2)).padStart(12)}`);
  }
  return failed ? 1 : 0;
}

process.exitCode = main();
