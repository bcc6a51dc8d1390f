// bench/flash --fwd-variants: the forward kernel candidates (lab/flash-fwd-variants.ts) against the
// shipped flash_fwd_cmacc ("current", acc-w4s1-x), causal f16, in each layout asked for: bhtd
// ([BH, T, D] tensors) and rows (the trainer's packed qkv [B*T, 3*H*D], B = BH / H, O [B*T, H*D]).
//
// Per layout, every kernel reads the same device buffers (f16 uniform in [-2, 2), scale 1/sqrt(D)).
// Each candidate first passes (1) a float64 gate on small problems (BH = 4, T = min(256, T), and
// soft-capped at 2.5 with BH = 2, T = min(128, T): O within 2e-2 absolute, lse 2e-3 relative, as
// bench/flash's gate) and (2) a comparison with the current kernel's O and lse at the timed size:
// the same products in the same order per row, so O's largest difference relative to its largest
// |value| must stay under 5e-3 and lse's under 1e-3 (`identical` says whether every bit matched).
// A candidate that fails is reported and not timed (exit 1).
// Timing (the dK/dV race's protocol): each kernel's dispatch recorded `iters` times into one
// profiled batch (each rewrites O and lse, so they run one after another); the kernels take turns:
// warm-up of all of them for --warm-ms (bench/profiling.ts warmFor), then 3 rounds of one batch
// each; ms = GPU busy time / iters, median of the 3. TFLOP/s counts the causal half
// (2 x 2 x BH x T^2 / 2 x D). Registers and spills come from the driver (HELIOS_PIPELINE_STATS=1,
// which bench/flash sets in this mode); "spill" sums only statistics named spill or stack.
import { writeFileSync } from "node:fs";
import { packPush } from "../ts/kernels/common.js";
import { FA_PUSH, FA_ROWS_PUSH } from "../ts/kernels/attention.js";
import { f16BitsToF32 } from "../ts/f16.js";
import type { KernelDesc } from "../ts/ir/index.js";
import type { MatmulRuntime } from "../ts/kernels/matmul/device.js";
import { FWD_CANDIDATES, FWD_CURRENT, fwdApplies, fwdCandidate, fwdKernel, fwdRows, type FwdCandidate } from "../lab/flash-fwd-variants.js";
import { busyNs, warmFor } from "./profiling.js";
import { median } from "./stats.js";
import { naive, randHalves, rowsToHeads } from "./flash-check.js";

export type RaceLayout = "bhtd" | "rows";

/** The runtime the race needs: bench/native-runtime's, with the driver statistics when the addon has them. */
export type RaceRuntime = MatmulRuntime & { pipelineStatistics?(pipeline: number): { name: string; value: number }[] };

export interface FwdRaceOptions {
  /** Candidate names, or ["all"]; "current" is always raced first. */
  variants: string[];
  layouts: RaceLayout[];
  bh: number; t: number; d: number;
  /** rows: heads per batch row (BH / heads batch rows). */
  heads: number;
  iters: number;
  warmMs: number;
  /** Where the JSON goes (none without). */
  out: string | null;
  /** PyTorch sdpa's forward at the bench shape (ms), or why not. */
  torchFwd: () => number | string;
  /** An initialized runtime (bench/flash: the native addon; tests: the interpreter). */
  runtime: RaceRuntime;
}

const GATE_OUT = 2e-2, GATE_LSE = 2e-3;
const SAME_O = 5e-3, SAME_LSE = 1e-3;
const REPEATS = 3;

interface Problem { layout: RaceLayout; bh: number; t: number; d: number; H: number; cap: number }

/** One problem's device buffers (q, k, v: one packed buffer in rows), host values for the gate, and push constants. */
interface Prepared {
  p: Problem;
  bufs: number[];
  oBytes: number; lseBytes: number;
  /** [BH, T, D] values for the float64 gate (gate problems only). */
  host: Float64Array[] | null;
  push: ArrayBufferView;
  free(): void;
}

function prepare(R: RaceRuntime, p: Problem, seed: number, withHost: boolean): Prepared {
  const { bh, t, d, H } = p;
  const rows = p.layout === "rows";
  const n = bh * t * d;
  const datas = rows ? [randHalves(3 * n, seed)] : [0, 1, 2].map((i) => randHalves(n, seed + i));
  const ins = datas.map((h) => {
    const b = R.createBuffer(h.byteLength);
    R.uploadBuffer(b, h);
    return b;
  });
  const oBytes = n * 2, lseBytes = bh * t * 4;
  const o = R.createBuffer(oBytes), lse = R.createBuffer(lseBytes);
  const vals = withHost ? datas.map((x) => Float64Array.from(x, f16BitsToF32)) : [];
  const host = !withHost ? null : rows ? [0, 1, 2].map((part) => rowsToHeads(vals[0], p, part)) : vals;
  const push = packPush(rows ? FA_ROWS_PUSH : FA_PUSH, { T: t, scale: 1 / Math.sqrt(d), cap: p.cap > 0 ? p.cap : 1, ...(rows ? { H, ld: 3 * H * d, kv: H * d } : {}) });
  const bufs = [...(rows ? [ins[0], ins[0], ins[0]] : ins), o, lse];
  return { p, bufs, oBytes, lseBytes, host, push, free: () => [...ins, o, lse].forEach((b) => R.destroyBuffer(b)) };
}

interface Kernel { desc: KernelDesc; pipe: number; groups: [number, number, number]; stats: Record<string, number> }

function compile(R: RaceRuntime, pr: Prepared, c: FwdCandidate): Kernel {
  const { p } = pr;
  const desc = fwdKernel(c, { D: p.d, softCap: p.cap > 0, ...(p.layout === "rows" ? { layout: "rows" as const } : {}) });
  const pipe = R.compileKernel(JSON.stringify(desc));
  const stats: Record<string, number> = {};
  try {
    for (const s of R.pipelineStatistics?.(pipe) ?? []) stats[s.name] = s.value;
  } catch {
    // no HELIOS_PIPELINE_STATS or no VK_KHR_pipeline_executable_properties: timings without registers
  }
  return { desc, pipe, groups: [p.t / fwdRows(c), p.bh, 1], stats };
}

/** Records `kern` `iters` times in one batch and waits; the batch's GPU busy ms when profiled. */
function runBatch(R: RaceRuntime, pr: Prepared, kern: Kernel, iters: number, profile: boolean): number {
  R.beginBatch({ profile });
  for (let i = 0; i < iters; i++) R.recordDispatch(kern.pipe, pr.bufs, kern.groups, pr.push);
  const v = R.submitBatch();
  R.waitTimeline(v);
  if (!profile) return 0;
  const es = R.batchProfile(v) as { gpuNs: number; startNs?: number; endNs?: number }[];
  // the union of the stamp intervals; a runtime without start/end stamps (the interpreter): the sum
  const stamped = es.every((e) => e.startNs !== undefined && e.endNs !== undefined);
  return (stamped ? busyNs(es as { startNs: number; endNs: number }[]) : es.reduce((a, e) => a + e.gpuNs, 0)) / 1e6;
}

/** O (f16 bits) and lse as written by one dispatch of `kern` (the outputs zeroed first). */
function outputsOf(R: RaceRuntime, pr: Prepared, kern: Kernel): { o: Uint16Array; lse: Float32Array } {
  const [o, lse] = pr.bufs.slice(3);
  R.uploadBuffer(o, new Uint8Array(pr.oBytes));
  R.uploadBuffer(lse, new Uint8Array(pr.lseBytes));
  runBatch(R, pr, kern, 1, false);
  return { o: new Uint16Array(R.readBuffer(o, 0, pr.oBytes)), lse: new Float32Array(R.readBuffer(lse, 0, pr.lseBytes)) };
}

/** Largest O error (absolute) and lse error (relative) against float64 on a gate problem; NaN counts as infinite. */
function gateErrors(R: RaceRuntime, pr: Prepared, kern: Kernel): { out: number; lse: number } {
  const { p, host } = pr;
  if (!host) throw new Error("flash forward race: the gate problem keeps its host values");
  const ref = naive(host[0], host[1], host[2], p.bh, p.t, p.d, 1 / Math.sqrt(p.d), p.cap);
  const got = outputsOf(R, pr, kern);
  const vals = Float64Array.from(got.o, f16BitsToF32);
  const o = p.layout === "rows" ? rowsToHeads(vals, p, 0) : vals;
  const worse = (w: number, e: number) => (Number.isNaN(e) ? Infinity : Math.max(w, e));
  let out = 0, lse = 0;
  for (let i = 0; i < o.length; i++) out = worse(out, Math.abs(o[i] - ref.o[i]));
  for (let i = 0; i < got.lse.length; i++) lse = worse(lse, Math.abs(got.lse[i] - ref.lse[i]) / Math.max(1, Math.abs(ref.lse[i])));
  return { out, lse };
}

interface Versus { oMaxAbs: number; oRel: number; lseMaxAbs: number; identical: boolean }

/** O's largest |got - want| (over its largest |want|), lse's largest difference, and whether every bit matched. */
function compare(got: { o: Uint16Array; lse: Float32Array }, want: { o: Uint16Array; lse: Float32Array }): Versus {
  let oMaxAbs = 0, mag = 0, lseMaxAbs = 0, identical = true;
  for (let i = 0; i < want.o.length; i++) {
    const y = f16BitsToF32(want.o[i]);
    mag = Math.max(mag, Math.abs(y));
    if (got.o[i] === want.o[i]) continue;
    identical = false;
    const x = f16BitsToF32(got.o[i]);
    oMaxAbs = Math.max(oMaxAbs, Number.isFinite(x) ? Math.abs(x - y) : Infinity);
  }
  for (let i = 0; i < want.lse.length; i++) {
    if (Object.is(got.lse[i], want.lse[i])) continue;
    identical = false;
    lseMaxAbs = Math.max(lseMaxAbs, Number.isFinite(got.lse[i]) ? Math.abs(got.lse[i] - want.lse[i]) : Infinity);
  }
  return { oMaxAbs, oRel: oMaxAbs / Math.max(mag, 1e-30), lseMaxAbs, identical };
}

/** Median ms per dispatch of each kernel, timed in turns (see the header). */
function timeInTurns(R: RaceRuntime, pr: Prepared, kerns: Kernel[], iters: number, warmMs: number): { ms: number; reps: number[] }[] {
  warmFor(warmMs, () => kerns.forEach((k) => runBatch(R, pr, k, iters, false)));
  const reps = kerns.map(() => [] as number[]);
  for (let r = 0; r < REPEATS; r++) kerns.forEach((k, i) => reps[i].push(runBatch(R, pr, k, iters, true) / iters));
  return reps.map((rs) => ({ ms: median(rs), reps: rs }));
}

const regsOf = (s: Record<string, number>) => Object.entries(s).find(([n]) => /regist/i.test(n))?.[1];
const spillOf = (s: Record<string, number>) => Object.entries(s).filter(([n]) => /spill|stack/i.test(n)).reduce((a, [, v]) => a + v, 0);

export interface RaceRow {
  layout: RaceLayout; variant: string; kernel: string; what: string; status: "ok" | "FAIL" | "n/a";
  gate?: { out: number; lse: number }[]; vsCurrent?: Versus;
  ms?: number; reps?: number[]; tflops?: number; speedup?: number; vsTorch?: number; registers?: number; spills?: number; stats?: Record<string, number>;
}

export interface RaceResult { code: number; rows: RaceRow[] }

/** Gates, compares and times the candidates in every layout; prints the table last. Exit code 1 when a candidate failed or none was timed. */
export function raceForward(o: FwdRaceOptions): RaceResult {
  const names = o.variants.includes("all") ? FWD_CANDIDATES.map((c) => c.name) : [FWD_CURRENT, ...o.variants.filter((n) => n !== FWD_CURRENT)];
  const cands = names.map(fwdCandidate);
  const R = o.runtime;
  const info = R.getDeviceInfo();
  const torch = o.torchFwd();
  const rows: RaceRow[] = [];
  let failed = 0;
  const flops = (4 * o.bh * o.t * o.t * o.d) / 2;
  for (const layout of o.layouts) {
    const H = layout === "rows" ? (o.bh % o.heads === 0 ? o.heads : o.bh) : 1;
    const gateH = layout === "rows" ? 2 : 1;
    const gates = [
      prepare(R, { layout, bh: 4, t: Math.min(256, o.t), d: o.d, H: gateH, cap: 0 }, 1234, true),
      prepare(R, { layout, bh: 2, t: Math.min(128, o.t), d: o.d, H: gateH, cap: 2.5 }, 4321, true),
    ];
    const full = prepare(R, { layout, bh: o.bh, t: o.t, d: o.d, H, cap: 0 }, 99, false);
    let want: { o: Uint16Array; lse: Float32Array } | null = null;
    const timed: { row: RaceRow; kern: Kernel }[] = [];
    for (const c of cands) {
      const base: RaceRow = { layout, variant: c.name, kernel: "", what: c.what, status: "n/a" };
      const serves = [full, ...gates].every((g) => fwdApplies(c, info, "f16", g.p.t, o.d));
      if (!serves) {
        rows.push(base);
        console.log(`n/a  ${layout} ${c.name}: does not serve T=${o.t} (gates ${gates.map((g) => g.p.t).join(", ")}), D=${o.d} on ${info.deviceName}`);
        continue;
      }
      const gate = gates.map((g) => gateErrors(R, g, compile(R, g, c)));
      const kern = compile(R, full, c);
      const got = outputsOf(R, full, kern);
      want ??= got; // "current" comes first
      const vs = compare(got, want);
      const row: RaceRow = { ...base, kernel: kern.desc.name, gate, vsCurrent: vs, registers: regsOf(kern.stats), spills: spillOf(kern.stats), stats: kern.stats };
      const ok = gate.every((e) => e.out < GATE_OUT && e.lse < GATE_LSE) && vs.oRel <= SAME_O && vs.lseMaxAbs <= SAME_LSE;
      console.log(`${ok ? "ok  " : "FAIL"} ${layout} ${c.name} (${kern.desc.name}): float64 gate O/lse ${gate.map((e) => `${e.out.toExponential(2)}/${e.lse.toExponential(2)}`).join(", ")}; vs current O max abs ${vs.oMaxAbs.toExponential(2)} (rel ${vs.oRel.toExponential(2)}), lse ${vs.lseMaxAbs.toExponential(2)}${vs.identical ? " (identical)" : ""}; registers ${row.registers ?? "?"}`);
      if (!ok) {
        failed++;
        rows.push({ ...row, status: "FAIL" });
        continue;
      }
      timed.push({ row: { ...row, status: "ok" }, kern });
    }
    if (timed.length) {
      const times = timeInTurns(R, full, timed.map((x) => x.kern), o.iters, o.warmMs);
      const curAt = timed.findIndex((x) => x.row.variant === FWD_CURRENT);
      timed.forEach((x, i) => {
        const { ms, reps } = times[i];
        rows.push({
          ...x.row, ms, reps, tflops: flops / (ms * 1e9), speedup: curAt >= 0 ? times[curAt].ms / ms : undefined,
          vsTorch: typeof torch === "number" ? torch / ms : undefined,
        });
      });
    }
    [...gates, full].forEach((g) => g.free());
  }
  if (o.out) {
    const json = {
      meta: {
        device: info.deviceName, driver: info.driverVersion ?? null, problem: { bh: o.bh, t: o.t, d: o.d, heads: o.heads }, causal: true, dtype: "f16",
        iters: o.iters, repeats: REPEATS, warmMs: o.warmMs, time: new Date().toISOString(),
      },
      torchFwdMs: typeof torch === "number" ? torch : null, torchNote: typeof torch === "string" ? torch : null, rows,
    };
    writeFileSync(o.out, JSON.stringify(json, null, 2));
    console.log(`wrote ${o.out}`);
  }
  printTable(o, info.deviceName, torch, rows);
  // a device none of them serves (no cooperative matrices, 48 KiB or 32-wide subgroups) timed nothing
  const none = !rows.some((r) => r.ms !== undefined);
  if (none) console.log("nothing timed: no candidate serves this problem on this device");
  return { code: failed || none ? 1 : 0, rows };
}

function printTable(o: FwdRaceOptions, device: string, torch: number | string, rows: RaceRow[]): void {
  console.log(`\nflash attention forward candidates, causal f16, BH=${o.bh} T=${o.t} D=${o.d} (rows: packed qkv, H=${o.heads}) on ${device}`);
  console.log(typeof torch === "number" ? `PyTorch sdpa forward (bhtd): ${torch.toFixed(4)} ms, ${((4 * o.bh * o.t * o.t * o.d) / 2 / (torch * 1e9)).toFixed(1)} TFLOP/s` : `PyTorch: ${torch}`);
  const head = ["layout", "variant", "ms", "TFLOP/s", "x current", "x sdpa", "regs", "spill", "vs current", "f64 gate O"];
  const w = [6, 8, 8, 8, 9, 6, 5, 5, 10, 10];
  const line = (cells: string[]) => console.log(cells.map((c, i) => (i < 2 ? c.padEnd(w[i]) : c.padStart(w[i]))).join("  "));
  line(head);
  const worstGate = (r: RaceRow) => (r.gate ? Math.max(...r.gate.map((e) => e.out)).toExponential(1) : "");
  const vs = (r: RaceRow) => (!r.vsCurrent ? "" : r.vsCurrent.identical ? "identical" : r.vsCurrent.oRel.toExponential(1));
  for (const r of rows) {
    if (r.ms === undefined) {
      line([r.layout, r.variant, r.status, "", "", "", "", "", vs(r), worstGate(r)]);
      continue;
    }
    line([
      r.layout, r.variant, r.ms.toFixed(4), r.tflops!.toFixed(1), r.speedup?.toFixed(3) ?? "-", r.vsTorch?.toFixed(2) ?? "-",
      String(r.registers ?? "?"), String(r.spills ?? "?"), vs(r), worstGate(r),
    ]);
  }
}
