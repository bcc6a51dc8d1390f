// Lab hook (bench/alpha-gpu.sh, never shipped): GPU time per kernel inside Alpha's own trainer.
// Preloaded with `node --import`, it makes every batch Helios submits write GPU timestamps, from
// the end of Alpha's second step (after tuning and compiles) on, and on exit writes per-kernel ms
// per step to $HELIOS_ALPHA_PROFILE (JSON) and a top-20 table to stderr. Alpha's step lines
// ("step k/N | ...") on stdout tell where steps end.
import { writeFileSync } from "node:fs";
import { runtime } from "../dist/ts/device.js";

const outPath = process.env.HELIOS_ALPHA_PROFILE ?? "alpha-gpu-profile.json";
const rt = runtime();
const base = { beginBatch: rt.beginBatch, submitBatch: rt.submitBatch, batchProfile: rt.batchProfile };
let recording = false;
let steps = 0;
const pending = [];
const byLabel = new Map();
let spans = 0;

function drain() {
  for (const v of pending.splice(0)) {
    let entries;
    try {
      entries = base.batchProfile(v);
    } catch {
      continue; // a batch someone else profiled and consumed (the tuner's)
    }
    if (entries.length === 0) continue;
    let lo = Infinity, hi = -Infinity;
    for (const e of entries) {
      const s = byLabel.get(e.label) ?? { ms: 0, count: 0 };
      s.ms += e.gpuNs / 1e6;
      s.count++;
      byLabel.set(e.label, s);
      lo = Math.min(lo, e.startNs);
      hi = Math.max(hi, e.endNs);
    }
    spans += (hi - lo) / 1e6;
  }
}

rt.beginBatch = (opts) => base.beginBatch(recording ? { ...opts, profile: true } : opts);
rt.submitBatch = () => {
  const v = base.submitBatch();
  if (recording) {
    pending.push(v);
    if (pending.length >= 32) drain();
  }
  return v;
};

const log = console.log;
console.log = (...args) => {
  const line = String(args[0] ?? "");
  const m = /^step (\d+)\//.exec(line);
  if (m) {
    if (recording) steps++;
    if (+m[1] === 2) recording = true;
  }
  log(...args);
};

process.on("exit", () => {
  recording = false;
  drain();
  const rows = [...byLabel].map(([label, s]) => ({ label, msPerStep: s.ms / Math.max(1, steps), perStep: s.count / Math.max(1, steps) }))
    .sort((a, b) => b.msPerStep - a.msPerStep);
  const total = rows.reduce((t, r) => t + r.msPerStep, 0);
  writeFileSync(outPath, JSON.stringify({ steps, kernelMsPerStep: total, batchSpanMsPerStep: spans / Math.max(1, steps), rows }, null, 2));
  process.stderr.write(`[alpha-profile] ${steps} steps: kernels ${total.toFixed(1)} ms/step, batch spans ${(spans / Math.max(1, steps)).toFixed(1)} ms/step\n`);
  for (const r of rows.slice(0, 20)) process.stderr.write(`  ${r.label.padEnd(60)} ${r.msPerStep.toFixed(2).padStart(8)} ms ${r.perStep.toFixed(0).padStart(5)}x\n`);
});
