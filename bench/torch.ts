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

/** The JSON object a bench/ python script prints as its last line, or that line when it is not JSON. */
export function lastJsonLine<T>(stdout: string): { json: T } | { notJson: string } {
  const last = stdout.trim().split("\n").pop() ?? "";
  try {
    return { json: JSON.parse(last) as T };
  } catch {
    return { notJson: last.slice(0, 200) };
  }
}

/** Runs `python script args...`: its stdout, or why it did not run to a zero exit. */
export function runPythonScript(python: string, args: string[], timeoutMs = 300_000): { stdout: string } | { error: string } {
  const r = spawnSync(python, args, { encoding: "utf8", timeout: timeoutMs, maxBuffer: 64 << 20 });
  if (r.error) return { error: `${python} failed to start (${r.error.message})` };
  if (r.status !== 0) return { error: `${python} exited ${r.status}: ${(r.stderr || "").trim().slice(-300)}` };
  return { stdout: r.stdout };
}

export function parseTorchOutput(stdout: string): TorchResult {
  const parsed = lastJsonLine<{ ok?: boolean; error?: string; device?: string; torch?: string; cuda?: string; rows?: { shape: string; repeats: number[][] }[] }>(stdout);
  if ("notJson" in parsed) return { ok: false, note: `PyTorch reference printed no JSON (${parsed.notJson})`, byShape: new Map() };
  const j = parsed.json;
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
  const r = runPythonScript(opts.python, args, opts.timeoutMs);
  if ("error" in r) return { ok: false, note: `no CUDA reference: ${r.error}`, byShape: new Map() };
  return parseTorchOutput(r.stdout);
}
