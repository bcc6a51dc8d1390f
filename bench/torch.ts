// Runs bench/torch_matmul.py in a python3 subprocess and turns its JSON into timing summaries.
import { spawnSync } from "node:child_process";
import { existsSync } from "node:fs";
import { fileURLToPath } from "node:url";
import type { BenchDtype, Shape } from "./args.js";
import { shapeName } from "./args.js";
import type { TimingSummary } from "./stats.js";
import { summarize } from "./stats.js";

export interface TorchResult {
  ok: boolean;
  /** Why there is no reference (shown in meta.note). */
  note?: string;
  device?: string;
  torch?: string;
  cuda?: string;
  byShape: Map<string, TimingSummary>;
}

/** dist/bench/torch.js and bench/torch.ts both find a script (default torch_matmul.py) in <package>/bench/. */
export function torchScriptPath(script = "torch_matmul.py"): string {
  const candidates = [
    new URL(`../../bench/${script}`, import.meta.url),
    new URL(`./${script}`, import.meta.url),
  ].map((u) => fileURLToPath(u));
  return candidates.find((p) => existsSync(p)) ?? candidates[0];
}

export function parseTorchOutput(stdout: string): TorchResult {
  const lines = stdout.trim().split("\n");
  const last = lines[lines.length - 1] ?? "";
  let j: { ok?: boolean; error?: string; device?: string; torch?: string; cuda?: string; rows?: { shape: string; repeats: number[][] }[] };
  try {
    j = JSON.parse(last);
  } catch {
    return { ok: false, note: `PyTorch reference printed no JSON (${last.slice(0, 200)})`, byShape: new Map() };
  }
  const byShape = new Map<string, TimingSummary>();
  for (const r of j.rows ?? []) byShape.set(r.shape, summarize(r.repeats));
  if (!j.ok) return { ok: false, note: `no CUDA reference: ${j.error ?? "unknown error"}`, byShape };
  return { ok: true, device: j.device, torch: j.torch, cuda: j.cuda, byShape };
}

export function runTorchReference(opts: {
  python: string;
  dtype: BenchDtype;
  shapes: readonly Shape[];
  iters: number;
  warmup: number;
  repeats: number;
  epilogue: string;
  timeoutMs?: number;
}): TorchResult {
  const script = torchScriptPath();
  const args = [
    script,
    `--dtype=${opts.dtype}`,
    `--shapes=${opts.shapes.map(shapeName).join(",")}`,
    `--iters=${opts.iters}`,
    `--warmup=${opts.warmup}`,
    `--repeats=${opts.repeats}`,
    `--epilogue=${opts.epilogue}`,
  ];
  const r = spawnSync(opts.python, args, { encoding: "utf8", timeout: opts.timeoutMs ?? 300_000, maxBuffer: 64 << 20 });
  if (r.error) return { ok: false, note: `no CUDA reference: ${opts.python} failed to start (${r.error.message})`, byShape: new Map() };
  if (r.status !== 0) {
    return { ok: false, note: `no CUDA reference: ${opts.python} exited ${r.status}: ${(r.stderr || "").trim().slice(-300)}`, byShape: new Map() };
  }
  return parseTorchOutput(r.stdout);
}
