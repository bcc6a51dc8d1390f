// Where a training step's GPU time goes: runs a few eager steps of the GPT (GPT-2 124M by
// default), then one step with GPU timestamps around every dispatch, and prints GPU ms per
// kernel label (largest first) with the step's summed batch spans. --captured profiles the
// replayed captured step instead (the capture is recorded with timestamps; one replay is read).
//
//   node dist/bench/train/profile-step.js [--matmul16] [--captured] [--batch=16] [--seq=1024] [--layers=12]
//     [--dim=768] [--heads=12] [--vocab=50304] [--head-chunk-mib=N] [--top=30] [--out=perf/train-profile.json]
//     [--ln-bwd=fused|separate]  (LayerNorm backward's A/B, lab/layernorm-bwd.ts; default: what ships)
import { mkdirSync, writeFileSync } from "node:fs";
import path from "node:path";
import { HeliosBackend } from "../../ts/backend.js";
import { runtime } from "../../ts/device.js";
import { ProfilingRuntime, summarize } from "../profiling.js";
import { asTrainBackend } from "../../train/backend.js";
import { DEFAULT_OPTIM, type GPTConfig } from "../../train/config.js";
import { Trainer } from "../../train/trainer.js";

const argv = process.argv.slice(2);
const opt = (name: string, dflt: number) => {
  const a = argv.find((x) => x.startsWith(`--${name}=`));
  return a ? Number(a.slice(name.length + 3)) : dflt;
};
const outPath = argv.find((a) => a.startsWith("--out="))?.slice(6) ?? "perf/train-profile.json";
const matmul16 = argv.includes("--matmul16");
const captured = argv.includes("--captured");
const cfg: GPTConfig = {
  vocab: opt("vocab", 50304), blockSize: opt("seq", 1024), layers: opt("layers", 12), heads: opt("heads", 12), dim: opt("dim", 768), dropout: 0,
};
const Bsz = opt("batch", 16), T = opt("seq", 1024), top = opt("top", 30);
const lnBwd = argv.find((a) => a.startsWith("--ln-bwd="))?.slice(9);
if (lnBwd !== undefined) {
  if (lnBwd !== "fused" && lnBwd !== "separate") throw new Error(`--ln-bwd=${lnBwd}: expected fused or separate`);
  // imported only when asked for: lab/ does not ship
  (await import("../../lab/layernorm-bwd.js")).useLayerNormBwd(lnBwd);
}

const P = new ProfilingRuntime(runtime());
const B = asTrainBackend(new HeliosBackend({ runtime: P.rt }));
const headChunkMib = opt("head-chunk-mib", 0);
const headChunkBytes = headChunkMib > 0 ? headChunkMib * 2 ** 20 : undefined; // the model default
const tr = new Trainer(B, cfg, { ...DEFAULT_OPTIM, warmup: 0, decaySteps: 0 }, { matmul16, capture: captured, headChunkBytes });
const n = Bsz * T;
const batch = () => {
  const idx = new Int32Array(n), targets = new Int32Array(n);
  for (let i = 0; i < n; i++) {
    idx[i] = (i * 7919) % 256;
    targets[i] = (i * 104729 + 13) % 256;
  }
  return { idx, targets, B: Bsz, T };
};
const warm: number[] = [];
// a capture is recorded at its first step: with timestamps only if profiling is on then
P.profiling = captured;
for (let s = 0; s < 3; s++) warm.push(tr.step(batch()).ms);
P.submitted = []; // the warm-up's stamps are not read (earlier replays' are gone anyway)
P.profiling = true;
const r = tr.step(batch());
P.profiling = false;
const batches = P.take();
const sm = summarize(batches);
const rows = [...sm.byLabel.entries()].map(([label, e]) => ({ label, ms: e.ms, count: e.count })).sort((a, b) => b.ms - a.ms);
// every dispatch in recording order as [label index, GPU ms]: which product each kernel served
const labels = rows.map((x) => x.label);
const sequence = batches.flat().map((p) => [labels.indexOf(p.label), +(p.gpuNs / 1e6).toFixed(4)]);

mkdirSync(path.dirname(path.resolve(outPath)), { recursive: true });
writeFileSync(outPath, JSON.stringify({ cfg, batch: Bsz, seq: T, matmul16, captured, headChunkBytes, lnBwd: lnBwd ?? "shipped", warmMs: warm, stepMs: r.ms, spanMs: sm.spanMs, wallMs: sm.wallMs, sumMs: sm.sumMs, dispatches: sm.dispatches, rows, sequence }));
console.log(`${matmul16 ? "matmul16" : "f32"} ${captured ? "replayed captured" : "eager"} step: host ${r.ms.toFixed(1)} ms (warm steps ${warm.map((x) => x.toFixed(0)).join("/")}), ` +
  `GPU span ${sm.spanMs.toFixed(1)} ms (batch walls ${sm.wallMs.toFixed(1)} ms in ${batches.length} batches), kernel sum ${sm.sumMs.toFixed(1)} ms, ${sm.dispatches} dispatches`);
console.log(`${"kernel".padEnd(48)} ${"ms".padStart(8)} ${"%".padStart(6)} ${"n".padStart(5)}`);
for (const x of rows.slice(0, top)) {
  console.log(`${x.label.slice(0, 48).padEnd(48)} ${x.ms.toFixed(2).padStart(8)} ${((100 * x.ms) / sm.sumMs).toFixed(1).padStart(6)} ${String(x.count).padStart(5)}`);
}
