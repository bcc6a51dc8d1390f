// bench/dispatch: what one dispatch costs the host and the stream, and how fast
// buffers move. Prints a table with each target and PASS/FAIL, and writes JSON.
//
//   npm run bench:dispatch -- [--out=bench/dispatch.json] [--transfer-mib=256]
//                             [--dispatches=1000] [--iters=20] [--reps=3] [--warm-ms=300] [--validation]
//                             [--barrier=global,buffer] [--cuda[=python3]]
//
// --barrier runs the whole set once per listed HELIOS_BARRIER mode (the device is
// re-initialised between modes); without it the mode in the environment (default global)
// is used. The table's first row names the mode the runtime reports.
//
// --cuda runs bench/torch_dispatch.py (PyTorch, same machine) after the Helios sets and prints
// its rows as the reference: the same `inc` work as the dependent chain, eager, as a CUDA
// graph, and the launch+sync round trip.
//
// Method: one warm-up pass, then `reps` repetitions of the whole measurement set; each
// figure is the median over `iters` timed iterations within a repetition, and the
// reported value is the median of those per-repetition medians. Targets are for the
// NVIDIA GPU host (issue 2); on lavapipe they are printed for reference only.
import { writeFileSync } from "node:fs";
import os from "node:os";
import { native } from "../ts/native.js";
import type { HeliosNative } from "../__test__/api.js";
import { KERNELS } from "../__test__/kernels/index.js";
import { lastJsonLine, runPythonScript, torchScriptPath } from "./torch.js";

const rt: HeliosNative = native;

interface Options {
  out?: string;
  transferMiB: number;
  dispatches: number;
  iters: number;
  reps: number;
  /** Wall-clock ms each measurement repeats before its samples (GPU clock warm-up). */
  warmMs: number;
  validation: boolean;
  /** HELIOS_BARRIER modes to run; empty: leave the environment alone. */
  barriers: string[];
  /** python3 to run bench/torch_dispatch.py with; undefined: no CUDA reference. */
  cudaPython?: string;
}

function parseArgs(argv: string[]): Options {
  const opts: Options = { transferMiB: 256, dispatches: 1000, iters: 20, reps: 3, warmMs: 300, validation: false, barriers: [] };
  for (const arg of argv) {
    const [key, value] = arg.replace(/^--/, "").split("=", 2);
    const num = () => {
      const n = Number(value);
      if (!Number.isInteger(n) || n <= 0) throw new Error(`bench/dispatch: --${key} needs a positive integer, got ${value}`);
      return n;
    };
    if (key === "out") opts.out = value;
    else if (key === "transfer-mib") opts.transferMiB = num();
    else if (key === "dispatches") opts.dispatches = num();
    else if (key === "iters") opts.iters = num();
    else if (key === "reps") opts.reps = num();
    else if (key === "warm-ms") opts.warmMs = Number(value);
    else if (key === "validation") opts.validation = true;
    else if (key === "cuda") opts.cudaPython = value ?? "python3";
    else if (key === "barrier") {
      opts.barriers = (value ?? "").split(",").filter((m) => m !== "");
      const bad = opts.barriers.find((m) => m !== "global" && m !== "buffer");
      if (bad !== undefined || opts.barriers.length === 0) throw new Error(`bench/dispatch: --barrier takes global and/or buffer, got ${value}`);
    }
    else throw new Error(`bench/dispatch: unknown option ${arg}`);
  }
  return opts;
}

interface Target {
  /** "max": the figure must be at most `value`; "min": at least. */
  kind: "max" | "min";
  value: number;
}

interface Measurement {
  name: string;
  unit: string;
  /** One call = one timed iteration; returns the figure for that iteration. */
  run: () => number | Promise<number>;
  target?: Target;
}

interface Result {
  name: string;
  unit: string;
  /** A row that reports a setting rather than a measurement. */
  text?: string;
  value: number;
  perRep: number[];
  target?: Target;
  pass?: boolean;
}

const median = (xs: number[]) => {
  const s = [...xs].sort((a, b) => a - b);
  const m = s.length >> 1;
  return s.length % 2 ? s[m] : (s[m - 1] + s[m]) / 2;
};

/** Microseconds per unit for `units` units done by `fn`. */
function usPer(units: number, fn: () => void): number {
  const t0 = performance.now();
  fn();
  return ((performance.now() - t0) * 1000) / units;
}

function gbPerS(bytes: number, fn: () => void): number {
  const t0 = performance.now();
  fn();
  return bytes / ((performance.now() - t0) / 1000) / 1e9;
}

function measurements(opts: Options): { list: Measurement[]; cleanup: () => void } {
  const n = opts.dispatches;
  const noop = rt.createPipeline(KERNELS.noop.spirv, KERNELS.noop.layout);
  const inc = rt.createPipeline(KERNELS.inc.spirv, KERNELS.inc.layout);
  const wgid = rt.createPipeline(KERNELS.wgid.spirv, KERNELS.wgid.layout);
  const small = rt.createBuffer(256);
  rt.uploadBuffer(small, new Uint32Array(64).map((_, i) => i + 1));
  const push = Uint32Array.of(64);
  const recordNoops = () => {
    for (let i = 0; i < n; i++) rt.recordDispatch(noop, [small], [1], push);
  };
  const recordChain = () => {
    for (let i = 0; i < n; i++) rt.recordDispatch(inc, [small], [1], push);
  };
  // write then read the same buffer, alternately: a read-after-write barrier (memory) before
  // each read and a write-after-read barrier (execution only) before each write, so this row
  // against the dependent chain separates what the memory half of a barrier costs
  const recordAlternating = () => {
    for (let i = 0; i < n; i++) {
      if (i % 2 === 0) rt.recordDispatch(wgid, [small], [1]);
      else rt.recordDispatch(noop, [small], [1], push);
    }
  };
  const pack = (pipeline: number) => {
    const entry = [pipeline >>> 0, Math.floor(pipeline / 2 ** 32), 1, 1, 1, 1, 1, small >>> 0, Math.floor(small / 2 ** 32), 64];
    const words = new Uint32Array(entry.length * n);
    for (let i = 0; i < n; i++) words.set(entry, i * entry.length);
    return words;
  };
  const packedNoops = pack(noop);
  const packedChain = pack(inc);
  const capture = (record: () => void) => {
    rt.beginBatch();
    record();
    return rt.captureBatch();
  };
  const graphNoops = capture(recordNoops);
  const graphChain = capture(recordChain);
  const graphAlternating = capture(recordAlternating);
  const graphOne = capture(() => rt.recordDispatch(noop, [small], [1], push));

  const bytes = opts.transferMiB * 1024 * 1024;
  const big = rt.createBuffer(bytes);
  const host = new Uint8Array(bytes);
  for (let i = 0; i < bytes; i += 4096) host[i] = (i >>> 12) & 0xff || 1;
  // the reused destination of readBufferInto (pages touched once here, like a pinned buffer)
  let sink = new Uint8Array(bytes).fill(1);

  const us = "µs/dispatch";
  const list: Measurement[] = [
    {
      name: "recordDispatch host cost",
      unit: us,
      run: () => {
        rt.beginBatch();
        const t = usPer(n, recordNoops);
        rt.waitTimeline(rt.submitBatch());
        return t;
      },
    },
    {
      name: "recordDispatchMany host cost per entry",
      unit: us,
      run: () => {
        rt.beginBatch();
        const t = usPer(n, () => rt.recordDispatchMany(packedNoops, n));
        rt.waitTimeline(rt.submitBatch());
        return t;
      },
    },
    {
      name: `batched end to end, ${n} independent (recordDispatch)`,
      unit: us,
      target: { kind: "max", value: 2 },
      run: () => usPer(n, () => {
        rt.beginBatch();
        recordNoops();
        rt.waitTimeline(rt.submitBatch());
      }),
    },
    {
      // the packed form of the same 1000 dispatches: one N-API crossing records them all
      name: `batched end to end, ${n} independent (recordDispatchMany)`,
      unit: us,
      target: { kind: "max", value: 2 },
      run: () => usPer(n, () => {
        rt.beginBatch();
        rt.recordDispatchMany(packedNoops, n);
        rt.waitTimeline(rt.submitBatch());
      }),
    },
    {
      name: `batched end to end, ${n} dependent (recordDispatch)`,
      unit: us,
      target: { kind: "max", value: 2 },
      run: () => usPer(n, () => {
        rt.beginBatch();
        recordChain();
        rt.waitTimeline(rt.submitBatch());
      }),
    },
    {
      name: `batched end to end, ${n} dependent (recordDispatchMany)`,
      unit: us,
      target: { kind: "max", value: 2 },
      run: () => usPer(n, () => {
        rt.beginBatch();
        rt.recordDispatchMany(packedChain, n);
        rt.waitTimeline(rt.submitBatch());
      }),
    },
    {
      name: `replay, ${n} independent`,
      unit: us,
      target: { kind: "max", value: 1 },
      run: () => usPer(n, () => rt.waitTimeline(rt.replayBatch(graphNoops))),
    },
    {
      name: `replay, ${n} dependent`,
      unit: us,
      target: { kind: "max", value: 1 },
      run: () => usPer(n, () => rt.waitTimeline(rt.replayBatch(graphChain))),
    },
    {
      name: `replay, ${n} alternating write/read (memory and execution-only barriers)`,
      unit: us,
      run: () => usPer(n, () => rt.waitTimeline(rt.replayBatch(graphAlternating))),
    },
    {
      name: "submit+wait round trip, 1 dispatch",
      unit: "µs",
      target: { kind: "max", value: 20 },
      run: () => usPer(1, () => {
        rt.beginBatch();
        rt.recordDispatch(noop, [small], [1], push);
        rt.waitTimeline(rt.submitBatch());
      }),
    },
    {
      name: "replay+wait round trip, 1 dispatch",
      unit: "µs",
      target: { kind: "max", value: 20 },
      run: () => usPer(1, () => rt.waitTimeline(rt.replayBatch(graphOne))),
    },
    {
      name: `upload ${opts.transferMiB} MiB`,
      unit: "GB/s",
      target: { kind: "min", value: 20 },
      // The 4-byte read afterwards returns only once the upload has landed (program order).
      run: () => gbPerS(bytes, () => {
        rt.uploadBuffer(big, host);
        rt.readBuffer(big, 0, 4);
      }),
    },
    {
      // host reference: what one thread's memcpy reaches between two resident arrays
      name: `host memcpy ${opts.transferMiB} MiB, one thread (reference)`,
      unit: "GB/s",
      run: () => gbPerS(bytes, () => sink.set(host)),
    },
    {
      // A tight synchronous loop never lets Node run finalizers, so every result is fresh memory
      // and the kernel's page faults (zeroing, huge-page compaction) bound it, not the transfer.
      name: `download ${opts.transferMiB} MiB (readBuffer, synchronous loop: fresh pages)`,
      unit: "GB/s",
      run: () => gbPerS(bytes, () => void rt.readBuffer(big)),
    },
    {
      // An event-loop turn between reads (as in an async training loop) lets collected results
      // return to the pool (src/vk/host_result.rs): the next read lands in resident pages.
      name: `download ${opts.transferMiB} MiB (readBuffer, event-loop turn between reads)`,
      unit: "GB/s",
      target: { kind: "min", value: 20 },
      run: async () => {
        await new Promise((resolve) => setImmediate(resolve));
        return gbPerS(bytes, () => void rt.readBuffer(big));
      },
    },
    {
      // what cudaMemcpy D2H into a reused host buffer measures
      name: `download ${opts.transferMiB} MiB (readBufferInto: reused array)`,
      unit: "GB/s",
      target: { kind: "min", value: 20 },
      run: () => gbPerS(bytes, () => rt.readBufferInto(big, sink)),
    },
  ];
  const cleanup = () => {
    sink = new Uint8Array(0);
    for (const g of [graphNoops, graphChain, graphAlternating, graphOne]) rt.destroyCapture(g);
    for (const b of [small, big]) rt.destroyBuffer(b);
    rt.destroyPipeline(noop);
    rt.destroyPipeline(inc);
    rt.destroyPipeline(wgid);
  };
  return { list, cleanup };
}

function passes(value: number, t: Target): boolean {
  return t.kind === "max" ? value <= t.value : value >= t.value;
}

function fmt(x: number): string {
  return x >= 100 ? x.toFixed(0) : x >= 10 ? x.toFixed(1) : x.toFixed(2);
}

function printTable(results: Result[], device: string): void {
  const rows = results.map((r) => [
    r.name,
    r.text ?? `${fmt(r.value)} ${r.unit}`,
    r.perRep.map(fmt).join(" / "),
    r.target ? `${r.target.kind === "max" ? "≤" : "≥"} ${r.target.value} ${r.unit}` : "",
    r.target ? (r.pass ? "PASS" : "FAIL") : "",
  ]);
  const header = ["measurement", "median", "per repetition", "target (GPU host)", ""];
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((row) => row[i].length)));
  const line = (cells: string[]) => cells.map((c, i) => c.padEnd(widths[i])).join("  ").trimEnd();
  console.log(`bench/dispatch on ${device}`);
  console.log(line(header));
  console.log(widths.map((w) => "-".repeat(w)).join("  "));
  for (const row of rows) console.log(line(row));
}

/** One full measurement set on a freshly initialised device. */
async function runSet(opts: Options): Promise<{ results: Result[]; info: ReturnType<typeof rt.initDevice>; messages: string[] }> {
  const info = rt.initDevice({ validation: opts.validation });
  const { list, cleanup } = measurements(opts);
  for (const m of list) await m.run(); // warm-up: pipelines, pools, staging, caches
  const perRep = list.map(() => [] as number[]);
  for (let rep = 0; rep < opts.reps; rep++) {
    for (const [i, m] of list.entries()) {
      // clocks up before sampling (bench/profiling.ts's warmFor, awaiting async measurements)
      for (const t0 = performance.now(); performance.now() - t0 < opts.warmMs; ) await m.run();
      const iters = m.unit === "GB/s" ? Math.max(3, Math.ceil(opts.iters / 4)) : opts.iters;
      const samples: number[] = [];
      for (let it = 0; it < iters; it++) samples.push(await m.run());
      perRep[i].push(median(samples));
    }
  }
  const measured: Result[] = list.map((m, i) => {
    const value = median(perRep[i]);
    return { name: m.name, unit: m.unit, value, perRep: perRep[i], target: m.target, pass: m.target && passes(value, m.target) };
  });
  cleanup();
  const messages = opts.validation ? rt.takeValidationMessages() : [];
  const mode = (info as { barrierMode?: string }).barrierMode ?? "global";
  rt.destroy();
  const modeRow: Result = { name: "barrier mode (HELIOS_BARRIER)", unit: "", text: mode, value: 0, perRep: [] };
  return { results: [modeRow, ...measured], info, messages };
}

interface CudaReference {
  ok: boolean;
  error?: string;
  device?: string;
  torch?: string;
  cuda?: string;
  rows?: { name: string; unit: string; value: number; perRep: number[] }[];
}

/** bench/torch_dispatch.py's JSON line, or why there is none. */
function runCudaReference(python: string, opts: Options): CudaReference {
  const args = [torchScriptPath("torch_dispatch.py"), `--kernels=${opts.dispatches}`, `--iters=${opts.iters}`, `--reps=${opts.reps}`];
  const r = runPythonScript(python, args);
  if ("error" in r) return { ok: false, error: r.error };
  const parsed = lastJsonLine<CudaReference>(r.stdout);
  return "json" in parsed ? parsed.json : { ok: false, error: `printed no JSON (${parsed.notJson})` };
}

async function main(): Promise<void> {
  const opts = parseArgs(process.argv.slice(2));
  const modes: Array<string | undefined> = opts.barriers.length > 0 ? opts.barriers : [undefined];
  const sets = [];
  for (const mode of modes) {
    // The runtime reads HELIOS_BARRIER at initDevice; Node's process.env writes reach it.
    if (mode !== undefined) process.env.HELIOS_BARRIER = mode;
    sets.push(await runSet(opts));
  }
  for (const { results, info, messages } of sets) {
    printTable(results, `${info.deviceName} (${info.driverName})`);
    if (messages.length > 0) console.log(`${messages.length} validation messages, first: ${messages[0]}`);
  }
  const cuda = opts.cudaPython === undefined ? undefined : runCudaReference(opts.cudaPython, opts);
  if (cuda?.ok) {
    printTable(cuda.rows ?? [], `CUDA reference: PyTorch ${cuda.torch}, CUDA ${cuda.cuda}, ${cuda.device}`);
  } else if (cuda) {
    console.log(`no CUDA reference: ${cuda.error}`);
  }
  if (opts.out) {
    const info = sets[0].info;
    const machine = { device: info, cpu: os.cpus()[0]?.model, cores: os.cpus().length, node: process.version, platform: `${os.platform()} ${os.release()}` };
    const results = sets.length === 1 ? sets[0].results : sets.map((s) => ({ barrierMode: s.results[0].text, results: s.results }));
    writeFileSync(opts.out, JSON.stringify({ bench: "dispatch", date: new Date().toISOString(), options: opts, machine, results, cuda }, null, 2) + "\n");
    console.log(`wrote ${opts.out}`);
  }
}

await main();
