// bench/ops: per-op bandwidth of HeliosBackend and the ratio to PyTorch on the same GPU in
// the same run (python3 subprocess, CUDA events) when python3 + torch + CUDA exist;
// otherwise Helios-only rows with a note. Prints a table and writes JSON.
//
//   node dist/bench/ops.js [--quick] [--iters=50] [--out=bench/ops.json]
//
// Helios time is wall clock over `iters` back-to-back dispatches drained once (host
// recording overlaps GPU work, as in training); PyTorch time is CUDA-event time over the
// same count. ratio = torchMs / heliosMs (> 1 means Helios is faster).
import { execFileSync } from "node:child_process";
import { writeFileSync } from "node:fs";
import { HeliosBackend } from "../ts/backend.js";
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
const iters = Number(arg("iters", quick ? "5" : "50"));
const out = arg("out", "bench/ops.json");

const N = quick ? 1 << 16 : 1 << 26;
const [R, C] = quick ? [64, 256] : [8192, 4096];
const [BH, T, D] = quick ? [2, 64, 64] : [96, 1024, 64];

const cases: Case[] = [
  {
    name: `add f32 n=${N}`, bytes: 3 * 4 * N,
    helios: (B) => { const a = B.randn([N]), b = B.randn([N]); return () => [B.add(a, b)]; },
    torch: `a=torch.randn(${N},device=d);b=torch.randn(${N},device=d)\nf=lambda: a+b`,
  },
  {
    name: `fused scale(add(mul(a,b),c)) n=${N}`, bytes: 4 * 4 * N,
    helios: (B) => { const a = B.randn([N]), b = B.randn([N]), c = B.randn([N]); return () => [B.scale(B.add(B.mul(a, b), c), 0.5)]; },
    torch: `a=torch.randn(${N},device=d);b=torch.randn(${N},device=d);c=torch.randn(${N},device=d)\nf=lambda: (a*b+c)*0.5`,
  },
  {
    name: `unfused scale(add(mul(a,b),c)) n=${N}`, bytes: 4 * 4 * N, unfused: true,
    helios: (B) => { const a = B.randn([N]), b = B.randn([N]), c = B.randn([N]); return () => [B.scale(B.add(B.mul(a, b), c), 0.5)]; },
    torch: `a=torch.randn(${N},device=d);b=torch.randn(${N},device=d);c=torch.randn(${N},device=d)\nf=lambda: (a*b+c)*0.5`,
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

function timeHelios(B: HeliosBackend, c: Case): number {
  const step = c.helios(B);
  B.syncGpu();
  const warm = step();
  for (const t of warm) void t.data;
  warm.forEach((t) => B.releaseGpuTensor(t));
  B.syncGpu();
  const t0 = performance.now();
  for (let i = 0; i < iters; i++) {
    const outs = step();
    // force the fused chain to dispatch; then hand buffers back as training would
    B.evaluate(...outs);
    outs.forEach((t) => B.releaseGpuTensor(t));
  }
  B.syncGpu();
  return (performance.now() - t0) / iters;
}

function torchTimes(): Record<string, number> | string {
  const body = cases.map((c) => `${c.torch}\nres[${JSON.stringify(c.name)}]=bench(f)`).join("\n");
  const script = `
import json, torch
if not torch.cuda.is_available(): raise SystemExit("no CUDA")
d="cuda"; res={}
def bench(f):
    for _ in range(3): f()
    torch.cuda.synchronize()
    s=torch.cuda.Event(enable_timing=True); e=torch.cuda.Event(enable_timing=True)
    s.record()
    for _ in range(${iters}): f()
    e.record(); torch.cuda.synchronize()
    return s.elapsed_time(e)/${iters}
${body}
print(json.dumps({"device": torch.cuda.get_device_name(0), "torch": torch.__version__, "ms": res}))
`;
  try {
    const text = execFileSync("python3", ["-c", script], { encoding: "utf8", stdio: ["ignore", "pipe", "pipe"] });
    const parsed = JSON.parse(text.trim().split("\n").pop() as string);
    torchMeta = { device: parsed.device, torch: parsed.torch };
    return parsed.ms;
  } catch (e) {
    const err = e as Error & { stderr?: string };
    const why = (err.stderr ?? "").trim().split("\n").pop() || err.message.split("\n")[0];
    return `PyTorch reference unavailable (${why}): Helios-only rows`;
  }
}

let torchMeta: Record<string, string> | null = null;

function main(): void {
  const B = new HeliosBackend();
  const U = new HeliosBackend({ config: { fusion: false } });
  const info = B.getDeviceInfo();
  const torch = torchTimes();
  const rows = cases.map((c) => {
    const ms = timeHelios(c.unfused ? U : B, c);
    const tms = typeof torch === "string" ? null : torch[c.name] ?? null;
    return {
      op: c.name, heliosMs: ms, heliosGBps: c.bytes / (ms * 1e6),
      torchMs: tms, torchGBps: tms ? c.bytes / (tms * 1e6) : null, ratio: tms ? tms / ms : null,
    };
  });
  const chain = rows[1];
  const speedup = rows[2].heliosMs / rows[1].heliosMs;
  const note = typeof torch === "string" ? torch : null;
  console.log(`device: ${info.deviceName}${torchMeta ? `, torch ${torchMeta.torch} on ${torchMeta.device}` : ""}`);
  if (note) console.log(`note: ${note}`);
  console.log(["op".padEnd(52), ...["helios ms", "GB/s", "torch ms", "GB/s", "ratio"].map((h) => h.padStart(9))].join("  "));
  for (const r of rows) {
    const f = (x: number | null, d = 3) => (x === null ? "-" : x.toFixed(d)).padStart(9);
    console.log([r.op.padEnd(52), f(r.heliosMs), f(r.heliosGBps, 1), f(r.torchMs), f(r.torchGBps, 1), f(r.ratio, 2)].join("  "));
  }
  const json = { meta: { device: info.deviceName, driver: info.driverName ?? null, torch: torchMeta, iters, quick, note, time: new Date().toISOString() }, rows, fusedChainMs: chain.heliosMs };
  console.log(`fused chain vs unfused: ${speedup.toFixed(2)}x`);
  writeFileSync(out, JSON.stringify({ ...json, fusedChainSpeedup: speedup }, null, 2));
  console.log(`wrote ${out}`);
}

main();
