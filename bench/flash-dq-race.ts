// bench/flash-bwd --dq-variants: the dQ kernel candidates (lab/flash-bwd-dq.ts) against the
// shipped flash_bwd_dq_cm ("current"), f16, causal, in each layout asked for: bhtd ([BH, T, D]
// tensors) and rows (the trainer's packed qkv [B*T, 3*H*D], B = BH / H).
//
// Per layout: Q, K, V, dO from the backend's randn (f16), O and lse from its flash forward, Di =
// rowsum(dO * O) on the host; every kernel reads the same device buffers and is compiled once (a
// description does not depend on T or BH). Each candidate first passes (1) a float64 gate on a
// small problem (BH = 4, T = min(256, T); the largest dQ error relative to max(1, largest |ref|)
// under 2e-2, as bench/flash-bwd's gate) and (2) a comparison with current's dQ at the timed size:
// the same products in the same order, so the largest difference relative to the largest |current|
// must stay under 5e-3 (`identical`: every half matched). A candidate that fails is reported and
// not timed (exit 1; also when nothing was timed, as on devices without cooperative matrices).
// Timing (the dK/dV race's protocol): each kernel's dispatch recorded `iters` times into one
// profiled batch; the kernels take turns: all of them for --warm-ms (bench/profiling warmFor), then
// 3 rounds of one batch each; ms = GPU busy time / iters, median of the 3. TFLOP/s counts dQ's 3
// products over the causal half (3 x 2 x BH x T^2 / 2 x D). The shipped dK/dV kernel (the form
// pickFlashBwdDkDv chooses) takes its turns too, for scale, as does PyTorch sdpa's whole backward
// (bhtd). Registers and spills come from the driver (HELIOS_PIPELINE_STATS=1, which bench/flash-bwd
// sets in this mode; bench/pipeline-stats.ts). The JSON is rewritten after each layout and on the
// way out, so a run cut short keeps what it measured.
import { writeFileSync } from "node:fs";
import { HeliosBackend } from "../ts/backend.js";
import { runtime } from "../ts/device.js";
import { packPush } from "../ts/kernels/common.js";
import { FA_PUSH, FA_ROWS_PUSH } from "../ts/kernels/attention.js";
import { flashBwdDkDvCmKernel, flashBwdDkDvRows, pickFlashBwdDkDv } from "../ts/kernels/attention-cm-bwd-kv.js";
import { f16BitsToF32 } from "../ts/f16.js";
import type { TensorData } from "../ts/types.js";
import type { KernelDesc } from "../ts/ir/index.js";
import type { Runtime } from "../ts/exec/runtime.js";
import { DQ_CANDIDATES, DQ_CURRENT, dqApplies, dqCandidate, dqKernel, dqRows } from "../lab/flash-bwd-dq.js";
import { busyNs, warmFor, type ProfileEntry } from "./profiling.js";
import { median } from "./stats.js";
import { attnErrors, naiveBackward } from "./flash-check.js";
import { registersOf, spillOf } from "./pipeline-stats.js";

export type RaceLayout = "bhtd" | "rows";

export interface DqRaceOptions {
  /** Candidate names, or ["all"]; "current" is always raced first. */
  variants: string[];
  layouts: RaceLayout[];
  bh: number; t: number; d: number;
  /** rows: heads per batch row (BH / heads batch rows). */
  heads: number;
  iters: number;
  warmMs: number;
  out: string;
  /** PyTorch sdpa's whole backward at the bench shape (ms), or why not. */
  torchBwd: () => number | string;
  /** The runtime (default: the device's). */
  runtime?: Runtime & NativeExtras;
}

export interface NativeExtras {
  batchProfile(value: number): ProfileEntry[];
  pipelineStatistics?(pipeline: number): { name: string; value: number }[];
}

const GATE = 2e-2;
const SAME = 5e-3;
const REPEATS = 3;

interface Problem { layout: RaceLayout; bh: number; t: number; d: number; H: number }

/** One problem's device buffers (q, k, v: one packed buffer in rows), host copies for the gate, and push constants. */
interface Prepared {
  p: Problem;
  ins: number[];
  /** dQ's buffer (in rows, the packed dQKV buffer dK and dV also write). */
  dq: number; dk: number; dv: number;
  gradBytes: number;
  /** [BH, T, D] values for the float64 gate (gate problems only). */
  host: { q: Float64Array; k: Float64Array; v: Float64Array; dO: Float64Array } | null;
  /** The float64 dQ of the gate problem, computed at its first use. */
  refDq?: Float64Array;
  push: ArrayBufferView;
  free(): void;
}

let R: Runtime & NativeExtras;
const halves = (td: TensorData) => Float64Array.from(td.data as Uint16Array, f16BitsToF32);

/** Part `part` (0 q, 1 k, 2 v) of rows-layout values [B*T, W] as [BH, T, D]. */
function rowsToHeads(x: Float64Array, p: Problem, part: number): Float64Array {
  const { bh, t, d, H } = p;
  const W = x.length / ((bh / H) * t), out = new Float64Array(bh * t * d);
  for (let b = 0; b < bh / H; b++) for (let h = 0; h < H; h++) for (let i = 0; i < t; i++) {
    const src = (b * t + i) * W + part * H * d + h * d, dst = ((b * H + h) * t + i) * d;
    for (let e = 0; e < d; e++) out[dst + e] = x[src + e];
  }
  return out;
}

function prepare(B: HeliosBackend, p: Problem, withHost: boolean): Prepared {
  const { bh, t, d, H } = p;
  const scale = 1 / Math.sqrt(d);
  const f16 = (shape: number[]) => {
    const r = B.randn(shape), h = B.castDtype(r, "f16");
    B.evaluate(h);
    B.releaseGpuTensor(r);
    return h;
  };
  const rows = p.layout === "rows";
  const N = (bh / H) * t;
  const qkv = rows ? [f16([N, 3 * H * d])] : [f16([bh, t, d]), f16([bh, t, d]), f16([bh, t, d])];
  const dO = rows ? f16([N, H * d]) : f16([bh, t, d]);
  const [q, k, v] = rows ? [qkv[0], qkv[0], qkv[0]] : qkv;
  const f = B.flashAttention(q, k, v, t, scale, 0, rows ? { heads: H, packed: true } : undefined);
  const o = halves(f.output), g = halves(dO);
  // Di = rowsum(dO * O) over each D-wide chunk: [BH, T] in bhtd, [B*T, H] in rows (what the kernels read)
  const di = new Float32Array(o.length / d);
  for (let i = 0; i < di.length; i++) {
    let s = 0;
    for (let e = 0; e < d; e++) s += g[i * d + e] * o[i * d + e];
    di[i] = s;
  }
  const upload = (data: ArrayBufferView) => {
    const h = R.leaseBuffer(data.byteLength);
    R.uploadBuffer(h, data);
    return h;
  };
  const qkvBufs = qkv.map((x) => upload(x.data as Uint16Array));
  const rest = [upload(dO.data as Uint16Array), upload(f.lse.data as Float32Array), upload(di)];
  const ins = [...(rows ? [0, 0, 0] : [0, 1, 2]).map((i) => qkvBufs[i]), ...rest];
  const qkvHost = withHost ? qkv.map(halves) : [];
  const host = !withHost ? null : rows
    ? { q: rowsToHeads(qkvHost[0], p, 0), k: rowsToHeads(qkvHost[0], p, 1), v: rowsToHeads(qkvHost[0], p, 2), dO: rowsToHeads(g, p, 0) }
    : { q: qkvHost[0], k: qkvHost[1], v: qkvHost[2], dO: g };
  for (const x of new Set([...qkv, dO, f.output, f.lse])) B.releaseGpuTensor(x);
  B.syncGpu();
  const gradBytes = rows ? N * 3 * H * d * 2 : bh * t * d * 2;
  const outs = rows ? [R.leaseBuffer(gradBytes)] : [0, 1, 2].map(() => R.leaseBuffer(gradBytes));
  const [dq, dk, dv] = rows ? [outs[0], outs[0], outs[0]] : outs;
  const push = packPush(rows ? FA_ROWS_PUSH : FA_PUSH, { T: t, scale, cap: 1, ...(rows ? { H, ld: 3 * H * d, kv: H * d } : {}) });
  return { p, ins, dq, dk, dv, gradBytes, host, push, free: () => [...qkvBufs, ...rest, ...outs].forEach((h) => R.releaseBuffer(h)) };
}

/** A compiled kernel: its pipeline, rows per workgroup (dispatch [T / rows, BH]), output roles and driver statistics. */
interface Kernel { desc: KernelDesc; pipe: number; rows: number; outs: ("dq" | "dk" | "dv")[]; stats: Record<string, number> }

function compile(desc: KernelDesc, rows: number, outs: Kernel["outs"]): Kernel {
  const pipe = R.compileKernel(JSON.stringify(desc));
  const stats: Record<string, number> = {};
  try {
    for (const s of R.pipelineStatistics?.(pipe) ?? []) stats[s.name] = s.value;
  } catch {
    // no HELIOS_PIPELINE_STATS or no VK_KHR_pipeline_executable_properties: timings without registers
  }
  return { desc, pipe, rows, outs, stats };
}

/** Records `kern` on problem `pr` `iters` times in one batch and waits; the per-dispatch stamps when profiled. */
function runBatch(pr: Prepared, kern: Kernel, iters: number, profile: boolean): ProfileEntry[] {
  const bufs = [...pr.ins, ...kern.outs.map((o) => pr[o])];
  R.beginBatch({ profile });
  for (let i = 0; i < iters; i++) R.recordDispatch(kern.pipe, bufs, [pr.p.t / kern.rows, pr.p.bh, 1], pr.push);
  const v = R.submitBatch();
  R.waitTimeline(v);
  return profile ? R.batchProfile(v) : [];
}

/** dQ as written by one dispatch of `kern` (its buffer zeroed first), f16 bits. */
function dqOf(pr: Prepared, kern: Kernel): Uint16Array {
  R.fillBuffer(pr.dq, 0);
  runBatch(pr, kern, 1, false);
  return new Uint16Array(R.readBuffer(pr.dq, 0, pr.gradBytes));
}

/** Largest dQ error against float64 on the gate problem, relative to max(1, largest |ref|). */
function gateError(pr: Prepared, kern: Kernel): number {
  const { p, host } = pr;
  if (!host) throw new Error("flash dQ race: the gate problem keeps its host values");
  pr.refDq ??= naiveBackward(host.q, host.k, host.v, host.dO, p.bh, p.t, p.d, 1 / Math.sqrt(p.d)).dq;
  const got = Float64Array.from(dqOf(pr, kern), f16BitsToF32);
  return attnErrors(p.layout === "rows" ? rowsToHeads(got, p, 0) : got, pr.refDq).maxRel;
}

/** Largest |got - want| and that over the largest |want| (non-finite: infinite), and whether all halves match. */
function compare(got: Uint16Array, want: Uint16Array): { maxAbs: number; rel: number; identical: boolean } {
  let maxAbs = 0, mag = 0, identical = true;
  for (let i = 0; i < want.length; i++) {
    const y = f16BitsToF32(want[i]);
    mag = Math.max(mag, Math.abs(y));
    if (got[i] === want[i]) continue;
    identical = false;
    const x = f16BitsToF32(got[i]);
    maxAbs = Math.max(maxAbs, Number.isFinite(x) ? Math.abs(x - y) : Infinity);
  }
  return { maxAbs, rel: maxAbs / Math.max(mag, 1e-30), identical };
}

/** Median ms per dispatch of each kernel, timed in turns (see the header). */
function timeInTurns(pr: Prepared, kerns: Kernel[], iters: number, warmMs: number): { ms: number; reps: number[] }[] {
  warmFor(warmMs, () => kerns.forEach((k) => runBatch(pr, k, iters, false)));
  const reps = kerns.map(() => [] as number[]);
  for (let r = 0; r < REPEATS; r++) kerns.forEach((k, i) => reps[i].push(busyNs(runBatch(pr, k, iters, true)) / 1e6 / iters));
  return reps.map((rs) => ({ ms: median(rs), reps: rs }));
}

interface Row {
  layout: RaceLayout; variant: string; kernel: string; what: string; status: "ok" | "FAIL" | "n/a";
  gateError?: number; vsCurrent?: { maxAbs: number; rel: number; identical: boolean };
  ms?: number; reps?: number[]; tflops?: number; speedup?: number; registers?: number; spills?: number; stats?: Record<string, number>;
}

interface Scale { kernel: string; ms: number; registers?: number }

export function dqRace(o: DqRaceOptions): number {
  const names = o.variants.includes("all") ? DQ_CANDIDATES.map((c) => c.name) : [DQ_CURRENT, ...o.variants.filter((n) => n !== DQ_CURRENT)];
  const cands = names.map(dqCandidate);
  R = o.runtime ?? (runtime() as Runtime & NativeExtras);
  const B = new HeliosBackend({ runtime: R });
  const info = B.getDeviceInfo();
  const torch = o.torchBwd();
  const rows: Row[] = [];
  const dkdv: Record<string, Scale> = {};
  const json = {
    meta: {
      device: info.deviceName, driver: (info as { driverVersion?: string }).driverVersion ?? null, problem: { bh: o.bh, t: o.t, d: o.d, heads: o.heads },
      causal: true, dtype: "f16", iters: o.iters, repeats: REPEATS, warmMs: o.warmMs, time: new Date().toISOString(),
    },
    torchBwdMs: typeof torch === "number" ? torch : null, torchNote: typeof torch === "string" ? torch : null, dkdv, rows,
  };
  const save = () => writeFileSync(o.out, JSON.stringify(json, null, 2));
  let failed = 0;
  const flops = (3 * 2 * o.bh * o.t * o.t * o.d) / 2;
  try {
    for (const layout of o.layouts) {
      const H = layout === "rows" ? (o.bh % o.heads === 0 ? o.heads : o.bh) : 1;
      const gateT = Math.min(256, o.t);
      const lv = layout === "rows" ? { layout: "rows" as const } : {};
      const gateP = prepare(B, { layout, bh: 4, t: gateT, d: o.d, H: layout === "rows" ? 2 : 1 }, true);
      const full = prepare(B, { layout, bh: o.bh, t: o.t, d: o.d, H }, false);
      let want: Uint16Array | null = null;
      const timed: { row: Row; kern: Kernel }[] = [];
      for (const c of cands) {
        const base: Row = { layout, variant: c.name, kernel: "", what: c.what, status: "n/a" };
        if (!dqApplies(c, info, o.d, o.t) || !dqApplies(c, info, o.d, gateT)) {
          rows.push(base);
          console.log(`n/a  ${layout} ${c.name}: does not serve T=${o.t} (gate T=${gateT}), D=${o.d} on this device`);
          continue;
        }
        const kern = compile(dqKernel(c, { D: o.d, ...lv }), dqRows(c), ["dq"]);
        const gateErr = gateError(gateP, kern);
        const got = dqOf(full, kern);
        want ??= got; // "current" comes first
        const vs = compare(got, want);
        const row: Row = { ...base, kernel: kern.desc.name, gateError: gateErr, vsCurrent: vs, registers: registersOf(kern.stats), spills: spillOf(kern.stats), stats: kern.stats };
        const ok = gateErr < GATE && vs.rel <= SAME;
        console.log(`${ok ? "ok  " : "FAIL"} ${layout} ${c.name} (${kern.desc.name}): float64 gate ${gateErr.toExponential(2)}, vs current max abs ${vs.maxAbs.toExponential(2)} rel ${vs.rel.toExponential(2)}${vs.identical ? " (identical)" : ""}, registers ${row.registers ?? "?"}`);
        if (!ok) {
          failed++;
          rows.push({ ...row, status: "FAIL" });
          continue;
        }
        timed.push({ row: { ...row, status: "ok" }, kern });
      }
      const form = pickFlashBwdDkDv(info, "f16", o.t, o.d);
      if (timed.length) {
        const scale = form ? [compile(flashBwdDkDvCmKernel({ D: o.d, form, ...lv }), flashBwdDkDvRows(form), ["dk", "dv"])] : [];
        const times = timeInTurns(full, [...timed.map((x) => x.kern), ...scale], o.iters, o.warmMs);
        if (scale.length) dkdv[layout] = { kernel: scale[0].desc.name, ms: times[times.length - 1].ms, registers: registersOf(scale[0].stats) };
        const curAt = timed.findIndex((x) => x.row.variant === DQ_CURRENT);
        const cur = curAt >= 0 ? times[curAt].ms : undefined;
        timed.forEach((x, i) => {
          const t = times[i];
          rows.push({ ...x.row, ms: t.ms, reps: t.reps, tflops: flops / (t.ms * 1e9), speedup: cur ? cur / t.ms : undefined });
        });
      }
      gateP.free();
      full.free();
      save();
    }
  } finally {
    save();
  }
  console.log(`wrote ${o.out}`);
  printTable(o, info.deviceName, torch, dkdv, rows);
  return failed || !rows.some((r) => r.ms !== undefined) ? 1 : 0;
}

function printTable(o: DqRaceOptions, device: string, torch: number | string, dkdv: Record<string, Scale>, rows: Row[]): void {
  console.log(`\nflash attention dQ candidates, causal f16, BH=${o.bh} T=${o.t} D=${o.d} (rows: H=${o.heads}) on ${device}`);
  console.log(typeof torch === "number" ? `PyTorch sdpa whole backward (bhtd): ${torch.toFixed(4)} ms` : `PyTorch: ${torch}`);
  for (const [l, s] of Object.entries(dkdv)) console.log(`shipped dK/dV kernel (${l}): ${s.ms.toFixed(4)} ms, ${s.kernel}, registers ${s.registers ?? "?"}`);
  const head = ["layout", "variant", "ms", "TFLOP/s", "x current", "regs", "spill", "vs current (rel)", "f64 gate"];
  const w = [6, 10, 8, 8, 9, 5, 5, 16, 9];
  const line = (cells: string[]) => console.log(cells.map((c, i) => (i < 2 ? c.padEnd(w[i]) : c.padStart(w[i]))).join("  "));
  line(head);
  for (const r of rows) {
    const vs = r.vsCurrent ? (r.vsCurrent.identical ? "identical" : r.vsCurrent.rel.toExponential(1)) : "";
    if (r.ms === undefined) {
      line([r.layout, r.variant, r.status, "", "", "", "", vs, r.gateError?.toExponential(1) ?? ""]);
      continue;
    }
    line([
      r.layout, r.variant, r.ms.toFixed(4), r.tflops!.toFixed(1), r.speedup ? r.speedup.toFixed(3) : "-", String(r.registers ?? "?"), String(r.spills ?? "?"),
      vs, r.gateError!.toExponential(1),
    ]);
  }
}
