// bench/prepack: what prepacking reused weights (HELIOS_MATMUL_PREPACK, ts/ops/prepack.ts) buys
// an inference-style loop. For each product x·Wᵀ (W stored [out, in] as Alpha's linear layers
// store it) the same W is reused call after call on two backends: prepacking off, and auto (the
// backend races both layouts' tuned plans at the first call after a host read and packs W into
// [in, out] only where that pays). Per case: calls 1–3 (tuning), a read of call 3 (the round trip),
// a sampled fp64 check of off's call 3 and of auto's call 4 (the decision: the copy where it pays),
// 300 ms of calls, then GPU busy time per call
// (timestamps, bench/profiling.ts) in interleaved repetitions off / auto, the one-time copy's
// GPU time, and PyTorch's x @ W.T on the same GPU in the same run when python3 + torch + CUDA exist.
//
//   node dist/bench/prepack.js [--m=8192] [--iters=20] [--mode=auto] [--dtypes=f16,f32] [--cases=qkv,proj,fc,fcproj,head,sq4096] [--out=perf/prepack.json]
import { execFileSync } from "node:child_process";
import { writeFileSync } from "node:fs";
import { HeliosBackend } from "../ts/backend.js";
import { runtime } from "../ts/device.js";
import type { Dtype, TensorData } from "../ts/types.js";
import { fromF16Array } from "../ts/f16.js";
import { ProfilingRuntime, summarize, warmFor } from "./profiling.js";
import { median } from "./stats.js";
import { torchEventsBatch } from "./torch.js";

const arg = (k: string, d: string) => process.argv.find((a) => a.startsWith(`--${k}=`))?.slice(k.length + 3) ?? d;
const M = Number(arg("m", "8192"));
const iters = Number(arg("iters", "20"));
const REPEATS = 3;
const out = arg("out", "perf/prepack.json");
const dtypes = arg("dtypes", "f16,f32").split(",") as Dtype[];
// --mode=on packs without the race (a CPU device, which never races, can then run the packed path)
const mode = arg("mode", "auto") as "auto" | "on";
if (mode !== "auto" && mode !== "on") throw new Error(`--mode=${mode}: expected auto or on`);
/** [name, out, in]: GPT-2 124M's weights (head: the 50304-row tied embedding) and one square. */
const ALL_CASES: [string, number, number][] = [
  ["qkv", 2304, 768], ["proj", 768, 768], ["fc", 3072, 768], ["fcproj", 768, 3072], ["head", 50304, 768], ["sq4096", 4096, 4096],
];
const only = arg("cases", "").split(",").filter(Boolean);
const cases = only.length === 0 ? ALL_CASES : only.map((n) => {
  const c = ALL_CASES.find(([name]) => name === n);
  if (!c) throw new Error(`--cases: unknown case ${n} (${ALL_CASES.map(([name]) => name).join(", ")})`);
  return c;
});

function values(t: TensorData): Float64Array {
  return t.dtype === "f16" ? Float64Array.from(fromF16Array(t.data as Uint16Array)) : Float64Array.from(t.data as ArrayLike<number>);
}

/** Largest relative error over 64 sampled entries of x·Wᵀ against fp64 sums of the stored values. */
function sampledError(y: TensorData, x: Float64Array, w: Float64Array, m: number, n: number, k: number): number {
  const got = values(y);
  let worst = 0, scale = 0;
  for (let s = 0; s < 64; s++) {
    const i = (s * 7919) % m, j = (s * 104729) % n;
    let acc = 0;
    for (let p = 0; p < k; p++) acc += x[i * k + p] * w[j * k + p];
    worst = Math.max(worst, Math.abs(got[i * n + j] - acc));
    scale = Math.max(scale, Math.abs(acc));
  }
  return worst / Math.max(scale, 1e-30);
}

/** SM / memory clocks, power and throttle reasons now (nvidia-smi), or null without it. */
function clocks(): string | null {
  try {
    return execFileSync("nvidia-smi", ["--query-gpu=clocks.sm,clocks.mem,power.draw,clocks_event_reasons.active", "--format=csv,noheader"], { encoding: "utf8", stdio: ["ignore", "pipe", "ignore"] }).trim();
  } catch {
    return null;
  }
}

function gpuMsPerCall(P: ProfilingRuntime, B: HeliosBackend, body: () => TensorData): number {
  P.profiling = true;
  for (let i = 0; i < iters; i++) B.releaseGpuTensor(body());
  B.syncGpu();
  P.profiling = false;
  return summarize(P.take()).spanMs / iters;
}

function torchTimes(): Record<string, number> | string {
  const r = torchEventsBatch(cases.flatMap(([name, n, k]) => dtypes.map((dt) => ({
    name: `${name} ${dt}`,
    setup: `x=torch.randn(${M},${k},device=d,dtype=${dt === "f16" ? "torch.float16" : "torch.float32"});w=torch.randn(${n},${k},device=d,dtype=x.dtype)\nf=lambda: x @ w.T`,
  }))), { iters, repeats: REPEATS, warmMs: 300, prelude: "torch.backends.cuda.matmul.allow_tf32 = False" });
  return typeof r === "string" ? r : r.ms;
}

function main(): number {
  const P = new ProfilingRuntime(runtime());
  const off = new HeliosBackend({ runtime: P.rt, config: { matmulPrepack: "off" } });
  const auto = new HeliosBackend({ runtime: P.rt, config: { matmulPrepack: mode } });
  const info = off.getDeviceInfo();
  const torch = torchTimes();
  const rows: Record<string, unknown>[] = [];
  let failed = 0;
  for (const [name, n, k] of cases) {
    for (const dt of dtypes) {
      const label = `${name} ${dt}`;
      const xs = off.randn([M, k]), ws = off.randn([n, k]);
      const [xo, wo] = [xs, ws].map((t) => (dt === "f32" ? t : off.castDtype!(t, dt)));
      const [xa, wa] = [xo, wo].map((t) => auto.fromArray(Array.from(values(t)), [...t.shape], dt));
      const xv = values(xo), wv = values(wo);
      // calls 1-3 tune each side's layout; reading call 3 is the host round trip after which
      // auto's next call races both layouts and packs W where that pays: the gate reads that call
      const packs0 = auto.stats().matmulPrepacks;
      let errOff = 0;
      for (let i = 0; i < 3; i++) {
        const yo = off.matmulTransposed!(xo, wo), ya = auto.matmulTransposed!(xa, wa);
        if (i === 2) {
          errOff = sampledError(yo, xv, wv, M, n, k);
          void ya.data;
        }
        off.releaseGpuTensor(yo);
        auto.releaseGpuTensor(ya);
      }
      const y4 = auto.matmulTransposed!(xa, wa);
      const errAuto = sampledError(y4, xv, wv, M, n, k);
      auto.releaseGpuTensor(y4);
      const packed = auto.stats().matmulPrepacks > packs0;
      const tol = dt === "f32" ? 1e-4 : 1e-2;
      if (!(errOff <= tol && errAuto <= tol)) {
        failed++;
        console.error(`FAIL ${label}: sampled relative error off ${errOff.toExponential(2)}, auto ${errAuto.toExponential(2)} > ${tol}`);
        continue;
      }
      warmFor(300, () => { for (let i = 0; i < 4; i++) auto.releaseGpuTensor(auto.matmulTransposed!(xa, wa)); auto.syncGpu(); });
      const offMs: number[] = [], autoMs: number[] = [];
      for (let r = 0; r < REPEATS; r++) {
        offMs.push(gpuMsPerCall(P, off, () => off.matmulTransposed!(xo, wo)));
        autoMs.push(gpuMsPerCall(P, auto, () => auto.matmulTransposed!(xa, wa)));
      }
      const clock = clocks();
      const copyMs = gpuMsPerCall(P, auto, () => auto.transpose(wa, 0, 1));
      const tms = typeof torch === "string" ? null : torch[label] ?? null;
      const flops = 2 * M * n * k;
      const row = {
        case: label, m: M, n, k, packed, offMs: median(offMs), autoMs: median(autoMs), copyMs,
        speedup: median(offMs) / median(autoMs), offTflops: flops / (median(offMs) * 1e9), autoTflops: flops / (median(autoMs) * 1e9),
        torchMs: tms, ratioAuto: tms ? tms / median(autoMs) : null, errOff, errAuto, clock,
      };
      rows.push(row);
      console.log(`${label}: packed ${packed}, off ${row.offMs.toFixed(4)} ms, auto ${row.autoMs.toFixed(4)} ms (${row.speedup.toFixed(3)}x), copy ${copyMs.toFixed(4)} ms; after timing: ${clock ?? "no nvidia-smi"}`);
      for (const t of [xs, ws, xo, wo]) off.releaseGpuTensor(t);
      for (const t of [xa, wa]) auto.releaseGpuTensor(t);
      off.purgeBufferPools();
    }
  }
  writeFileSync(out, JSON.stringify({
    meta: { mode, device: info.deviceName, driver: info.driverInfo ?? info.driverVersion ?? null, m: M, iters, repeats: REPEATS, note: typeof torch === "string" ? torch : null, time: new Date().toISOString() },
    rows,
  }, null, 2));
  console.log(`\nx·Wᵀ with W reused, M=${M}; GPU ms per call, medians of ${REPEATS} interleaved repetitions of ${iters} (${info.deviceName})`);
  console.log("case            | packed | off ms  | auto ms | speedup | auto TF/s | copy ms | torch ms | torch/auto");
  for (const r of rows as { case: string; packed: boolean; offMs: number; autoMs: number; speedup: number; autoTflops: number; copyMs: number; torchMs: number | null; ratioAuto: number | null }[]) {
    console.log(`${r.case.padEnd(15)} | ${String(r.packed).padEnd(6)} | ${r.offMs.toFixed(4)} | ${r.autoMs.toFixed(4)} | ${r.speedup.toFixed(3)}x  | ${r.autoTflops.toFixed(1).padStart(9)} | ${r.copyMs.toFixed(4)} | ${r.torchMs?.toFixed(4) ?? "-"} | ${r.ratioAuto?.toFixed(3) ?? "-"}`);
  }
  if (typeof torch === "string") console.log(`note: ${torch}`);
  return failed ? 1 : 0;
}

process.exitCode = main();
