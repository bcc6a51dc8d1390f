// Runs bench/torch_matmul.py in a python3 subprocess and turns its JSON into timing summaries.
import { execFileSync, spawnSync } from "node:child_process";
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
  warmMs: number;
  rest: number;
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
    `--warm-ms=${opts.warmMs}`,
    `--rest=${opts.rest}`,
  ];
  const r = runPythonScript(opts.python, args, opts.timeoutMs);
  if ("error" in r) return { ok: false, note: `no CUDA reference: ${r.error}`, byShape: new Map() };
  return parseTorchOutput(r.stdout);
}

/**
 * PyTorch on CUDA in one python3 subprocess for several snippets: each case's `setup` (python
 * lines; `d` is "cuda") defines `f`, which runs for `warmMs` of warm-up and then `repeats` times
 * `iters` calls between CUDA events. The median ms per call by case name, with the device and
 * torch version, or why there is none. `prelude` runs first (e.g. turning TF32 off).
 */
export function torchEventsBatch(
  cases: { name: string; setup: string }[], o: { iters: number; repeats: number; warmMs: number; prelude?: string },
): { ms: Record<string, number>; device: string; torch: string } | string {
  const body = cases.map((c) => `${c.setup}\nres[${JSON.stringify(c.name)}]=bench(f)`).join("\n");
  const script = `
import json, time, torch
if not torch.cuda.is_available(): raise SystemExit("no CUDA")
${o.prelude ?? ""}
d="cuda"; res={}
def bench(f):
    t0=time.time()
    while time.time()-t0 < ${o.warmMs}/1000:
        f(); torch.cuda.synchronize()
    reps=[]
    for _ in range(${o.repeats}):
        s=torch.cuda.Event(enable_timing=True); e=torch.cuda.Event(enable_timing=True)
        s.record()
        for _ in range(${o.iters}): f()
        e.record(); torch.cuda.synchronize()
        reps.append(s.elapsed_time(e)/${o.iters})
    return sorted(reps)[len(reps)//2]
${body}
print(json.dumps({"device": torch.cuda.get_device_name(0), "torch": torch.__version__, "ms": res}))
`;
  try {
    const text = execFileSync("python3", ["-c", script], { encoding: "utf8", stdio: ["ignore", "pipe", "pipe"] });
    return JSON.parse(text.trim().split("\n").pop() as string);
  } catch (e) {
    const err = e as Error & { stderr?: string };
    return `PyTorch reference unavailable (${(err.stderr ?? "").trim().split("\n").pop() || err.message.split("\n")[0]})`;
  }
}
