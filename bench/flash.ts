// bench/flash: every flash attention forward kernel (ts/kernels/attention-variants.ts) side by
// side on the GPU, PyTorch's scaled_dot_product_attention in the same run when python3 + torch +
// CUDA exist. Each kernel first passes a correctness gate against float64 naive attention on small
// causal cases (softCap off and on); a kernel that fails is reported and not timed (exit 1).
//
//   node dist/bench/flash.js [--bh=96] [--t=1024] [--d=64] [--iters=30] [--variants=a,b]
//                            [--out=bench/flash.json] [--torch=0]
//
// Timing: raw dispatches of the kernel (no backend), f16 Q/K/V uniform in [-2, 2], causal,
// scale 1/sqrt(D); one warm-up batch, then 3 batches of `iters` dispatches with GPU timestamps;
// the figure is the median per-dispatch time of the median batch. TFLOP/s counts the causal
// half: 2 matmuls x 2 flops x BH x T^2 / 2 x D (PyTorch's convention for is_causal).
import { warmFor } from "./profiling.js";
import { writeFileSync } from "node:fs";
import { FLASH_FWD, type FlashKernelName } from "../ts/kernels/attention-variants.js";
import type { MatmulRuntime } from "../ts/kernels/matmul/device.js";
import { nativeMatmulRuntime } from "./native-runtime.js";
import { dispatchArgs, flashGate, setup, torchEventsMs, type Problem } from "./flash-check.js";

function arg(name: string, dflt: string): string {
  const a = process.argv.find((x) => x.startsWith(`--${name}=`));
  return a ? a.slice(name.length + 3) : dflt;
}

const BH = Number(arg("bh", "96")), T = Number(arg("t", "1024")), D = Number(arg("d", "64"));
const iters = Number(arg("iters", "30"));
const REPEATS = 3;
const out = arg("out", "bench/flash.json");
const useTorch = arg("torch", "1") !== "0";
const names = (arg("variants", "") ? arg("variants", "").split(",") : Object.keys(FLASH_FWD)) as FlashKernelName[];
for (const n of names) if (!FLASH_FWD[n]) throw new Error(`bench/flash: unknown variant ${n} (known: ${Object.keys(FLASH_FWD).join(", ")})`);

/** Median per-dispatch GPU ms of the median of REPEATS batches of `iters` dispatches. */
function time(rt: MatmulRuntime, name: FlashKernelName, p: Problem): { ms: number; spread: number[] } {
  const { desc, groups, push } = dispatchArgs(name, p);
  const pipe = rt.compileKernel(desc);
  const s = setup(rt, p, 99);
  const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
  try {
    const batch = (profile: boolean) => {
      rt.beginBatch({ profile });
      for (let i = 0; i < iters; i++) rt.recordDispatch(pipe, s.bufs, groups, push);
      const v = rt.submitBatch();
      rt.waitTimeline(v);
      return profile ? rt.batchProfile(v).map((e) => e.gpuNs / 1e6) : [];
    };
    warmFor(400, () => batch(false)); // clocks up before timing (bench/profiling.ts)
    const reps = Array.from({ length: REPEATS }, () => median(batch(true)));
    return { ms: median(reps), spread: reps };
  } finally {
    s.free();
  }
}

function torchMs(p: Problem): number | string {
  const r = torchEventsMs(
    `q=torch.randn(1,${p.bh},${p.t},${p.d},device=d,dtype=torch.float16);k=torch.randn_like(q);v=torch.randn_like(q)
f=lambda: torch.nn.functional.scaled_dot_product_attention(q,k,v,is_causal=True)`, iters, REPEATS);
  if (typeof r === "string") return r;
  torchMeta = { device: r.device, torch: r.torch };
  return r.ms;
}

let torchMeta: Record<string, string> | null = null;

async function main(): Promise<number> {
  const rt = await nativeMatmulRuntime();
  const info = rt.initDevice();
  const big: Problem = { bh: BH, t: T, d: D, cap: 0 };
  const gates: Problem[] = [{ bh: 3, t: 256, d: D, cap: 0 }, { bh: 2, t: 128, d: D, cap: 2.5 }];
  const flops = (4 * BH * T * T * D) / 2;
  const torch = useTorch ? torchMs(big) : "PyTorch reference skipped (--torch=0)";
  const rows = [];
  let failed = 0;
  for (const name of names) {
    const c = FLASH_FWD[name];
    if (!c.applies(info, "f16", T, D) || !gates.every((g) => c.applies(info, "f16", g.t, g.d))) {
      rows.push({ variant: name, status: "does not apply on this device / problem" });
      console.log(`${name}: does not apply`);
      continue;
    }
    try {
      const errs = gates.map((g) => flashGate(rt, name, g));
      const bad = errs.some((e) => !e.ok);
      if (bad) {
        failed++;
        rows.push({ variant: name, status: "FAIL", gate: errs });
        console.log(`FAIL ${name}: ${JSON.stringify(errs)}`);
        continue;
      }
      const t = time(rt, name, big);
      const ratio = typeof torch === "number" ? torch / t.ms : null;
      rows.push({ variant: name, status: "ok", gate: errs, ms: t.ms, repeats: t.spread, tflops: flops / (t.ms * 1e9), ratio });
      console.log(`ok   ${name}: ${t.ms.toFixed(4)} ms (gate errors ${errs.map((e) => `${e.out.toExponential(1)}/${e.lse.toExponential(1)}`).join(", ")})`);
    } catch (e) {
      failed++;
      rows.push({ variant: name, status: `error: ${(e as Error).message}` });
      console.log(`FAIL ${name}: ${(e as Error).message}`);
    }
  }
  const json = {
    meta: { device: info.deviceName, driver: info.driverVersion ?? null, torch: torchMeta, problem: big, iters, repeats: REPEATS, time: new Date().toISOString() },
    torchMs: typeof torch === "number" ? torch : null, note: typeof torch === "string" ? torch : null, rows,
  };
  writeFileSync(out, JSON.stringify(json, null, 2));
  console.log(`wrote ${out}`);
  console.log(`flash attention forward, causal f16, BH=${BH} T=${T} D=${D} on ${info.deviceName}${torchMeta ? `; torch ${torchMeta.torch}` : ""}`);
  if (typeof torch === "string") console.log(`note: ${torch}`);
  else console.log(`${"PyTorch sdpa".padEnd(16)}  ${torch.toFixed(4).padStart(9)}  ${(flops / (torch * 1e9)).toFixed(1).padStart(8)}`);
  console.log(`${"variant".padEnd(16)}  ${"ms".padStart(9)}  ${"TFLOP/s".padStart(8)}  ${"torch/helios".padStart(12)}`);
  for (const r of rows) {
    if (!("ms" in r) || r.ms === undefined) {
      console.log(`${r.variant.padEnd(16)}  ${r.status}`);
      continue;
    }
    console.log(`${r.variant.padEnd(16)}  ${r.ms.toFixed(4).padStart(9)}  ${r.tflops.toFixed(1).padStart(8)}  ${(r.ratio === null ? "-" : r.ratio.toFixed(2)).padStart(12)}`);
  }
  return failed ? 1 : 0;
}

main().then((code) => { process.exitCode = code; }, (e) => { console.error(e); process.exitCode = 2; });
