// bench/fma-peak: the f32 FMA rate a generated kernel reaches on this device, with the parts of the
// SIMT matmul's inner loop added one at a time, to find which one holds the SIMT tile at half the
// FP32 peak (bench/MATMUL_NOTES.md, round 15):
//   scalar      32 independent accumulator chains per thread, operands in push constants
//   outer       the tile's register pattern: acc[i][j] = fma(a[i], b[j], acc[i][j]), 8×8 scalars
//   outer_4x16, outer_16x4   the same 64 FMAs over a 4×16 / 16×4 block (other operand reuse)
//   outer_v4    the 8×8 block written as the matmul writes it (f32x4 rows, a splat of a[i])
//   outer_lds   outer_v4 with a and b read from shared memory every step (4 f32x4 per 64 FMAs)
//   outer_lds_pf  outer_lds with the next step's reads before this step's FMAs in source order
//   outer_bar   outer_lds plus a workgroup barrier every 8 steps (the k-tile's barrier)
// Every kernel writes the sum of its accumulators (checked against a host evaluation of one
// thread) so nothing is dead code. GPU busy time from timestamps, after a 300 ms warm-up; median
// of 3 repetitions.
//
//   node dist/bench/fma-peak.js [--iters=10] [--steps=4096] [--groups=<8 per SM>] [--out=perf/fma-peak.json]
import { writeFileSync } from "node:fs";
import { f32, fma, kernel, lit, u32, vecOf, type Expr, type KernelBuilder, type KernelDesc, type Var } from "../ts/ir/index.js";
import { read } from "../ts/kernels/matmul/common.js";
import { native } from "../ts/native.js";
import { busyNs, warmFor } from "./profiling.js";

// eslint-disable-next-line @typescript-eslint/no-explicit-any
const rt: any = native;
const arg = (k: string, d: string) => process.argv.find((a) => a.startsWith(`--${k}=`))?.slice(k.length + 3) ?? d;
const iters = Number(arg("iters", "10")), steps = Number(arg("steps", "4096")), out = arg("out", "perf/fma-peak.json");
const WG = 256;

/** Register-only outer products: form name → [rows, cols] of the thread's block (64 FMAs). */
const OUTER: Record<string, [number, number]> = { outer: [8, 8], outer_4x16: [4, 16], outer_16x4: [16, 4] };
type Form = "scalar" | "outer" | "outer_4x16" | "outer_16x4" | "outer_v4" | "outer_lds" | "outer_lds_pf" | "outer_bar";
const FORMS: Form[] = ["scalar", "outer", "outer_4x16", "outer_16x4", "outer_v4", "outer_lds", "outer_lds_pf", "outer_bar"];
/** FMAs per thread and step. */
const fmasPerStep = (f: Form) => (f === "scalar" ? 32 : 64);

/** Thread t's starting values: small, distinct, so the sums stay finite and checkable. */
const seedOf = (t: number, i: number) => ((t * 7 + i * 13) % 97) / 97 - 0.5;

type Push = { steps: Expr; m: Expr; c: Expr };

function scalarChains(k: KernelBuilder, seed: (i: number) => Expr, pc: Push): Var[] {
  const accs = Array.from({ length: 32 }, (_, i) => k.var(f32, seed(i), `acc${i}`));
  k.for(0, pc.steps, () => {
    for (const a of accs) a.set(fma(read(a), pc.m, pc.c));
  }, { name: "s" });
  return accs;
}

/** acc[i][j] = fma(a[i], b[j], acc[i][j]) over a rows×cols block of scalars. */
function outerScalar(k: KernelBuilder, seed: (i: number) => Expr, pc: Push, rows: number, cols: number): Var[] {
  const a = Array.from({ length: rows }, (_, i) => seed(i));
  const b = Array.from({ length: cols }, (_, j) => seed(rows + j).mul(pc.m));
  const accs: Var[] = [];
  for (let i = 0; i < rows; i++) for (let j = 0; j < cols; j++) accs.push(k.var(f32, seed(i + j), `acc${i}_${j}`));
  k.for(0, pc.steps, () => {
    for (let i = 0; i < rows; i++) for (let j = 0; j < cols; j++) accs[i * cols + j].set(fma(a[i], b[j], read(accs[i * cols + j])));
  }, { name: "s" });
  return accs;
}

/** The 8×8 block as the matmul writes it (f32x4 rows, splats), operands in registers or shared memory. */
function outerVec(k: KernelBuilder, seed: (i: number) => Expr, pc: Push, form: Form): Var[] {
  const a = Array.from({ length: 8 }, (_, i) => seed(i));
  const b = Array.from({ length: 8 }, (_, j) => seed(8 + j).mul(pc.m));
  const sh = form === "outer_v4" ? undefined : k.shared("ab", "f32x4", 8 * 64);
  const lid = k.let(k.localIndex, "lid");
  if (sh) {
    // 8 rows of 64 f32x4: row r holds (a[0..3], a[4..7], b[0..3], b[4..7]) of 16 threads' seeds
    k.for(lid, 8 * 64, (i) => sh.store(i, vecOf("f32x4", i.cast(f32).mul(0.001), pc.c, pc.m, 0.25)), { step: WG });
    k.barrier();
  }
  const accs: Var[] = [];
  for (let i = 0; i < 8; i++) for (let j = 0; j < 2; j++) accs.push(k.var("f32x4", vecOf("f32x4", seed(i + j)), `acc${i}_${j}`));
  const inRegisters = [vecOf("f32x4", a[0], a[1], a[2], a[3]), vecOf("f32x4", a[4], a[5], a[6], a[7]), vecOf("f32x4", b[0], b[1], b[2], b[3]), vecOf("f32x4", b[4], b[5], b[6], b[7])];
  // like the matmul's k-step: two f32x4 of A (broadcast within a row of threads), two of B
  const ty = lid.div(16), tx = lid.rem(16);
  const load = (s: Expr): Expr[] => {
    const row = k.let(s.band(7).mul(64), "row");
    return [sh!.load(row.add(ty.rem(16))), sh!.load(row.add(ty.rem(16)).add(16)), sh!.load(row.add(tx).add(32)), sh!.load(row.add(tx).add(48))];
  };
  // outer_lds_pf: step s multiplies what step s - 1 read and reads step s + 1's fragments first
  const held = form === "outer_lds_pf" ? load(lit(u32, 0)).map((v, r) => k.var("f32x4", v, `frag${r}`)) : [];
  const fragments = (s: Expr): Expr[] => {
    if (!sh) return inRegisters;
    if (!held.length) return load(s);
    const now = held.map((r) => k.let(read(r), "f"));
    load(s.add(1)).forEach((v, r) => held[r].set(v));
    return now;
  };
  k.for(0, pc.steps, (s) => {
    const [av0, av1, bv0, bv1] = fragments(s);
    const av = [av0, av1], bv = [bv0, bv1];
    for (let i = 0; i < 8; i++) {
      const ai = vecOf("f32x4", av[i >> 2].swz("xyzw"[i & 3]));
      for (let j = 0; j < 2; j++) accs[i * 2 + j].set(fma(ai, bv[j], read(accs[i * 2 + j])));
    }
    if (form === "outer_bar") k.if(s.band(7).eq(7), () => k.barrier());
  }, { name: "s" });
  return accs;
}

function peakKernel(form: Form): KernelDesc {
  const k = kernel(`fma_peak_${form}`, { workgroup: [WG] });
  const o = k.buffer("out", f32, "write");
  const pc = k.push({ steps: u32, m: f32, c: f32 });
  const t = k.let(k.globalId.x, "t");
  const seed = (i: number) => k.let(t.mul(7).add(i * 13).rem(97).cast(f32).div(97).sub(0.5), "s");
  const accs = form === "scalar" ? scalarChains(k, seed, pc) : OUTER[form] ? outerScalar(k, seed, pc, ...OUTER[form]) : outerVec(k, seed, pc, form);
  let sum: Expr = k.let(lit(f32, 0), "sum");
  for (const a of accs) {
    const parts = a.type === f32 ? [read(a)] : [..."xyzw"].map((q) => read(a).swz(q));
    sum = k.let(parts.reduce((x, y) => x.add(y), sum), "sum");
  }
  o.store(t, sum);
  return k.finish();
}

/** Thread t's result for the register-only forms, evaluated in f64 (a tolerance covers f32). */
function hostValue(form: Form, t: number, m: number, c: number, n: number): number | null {
  if (form === "scalar") {
    let s = 0;
    for (let i = 0; i < 32; i++) { let a = seedOf(t, i); for (let q = 0; q < n; q++) a = a * m + c; s += a; }
    return s;
  }
  let s = 0;
  const block = OUTER[form];
  if (block) {
    const [rows, cols] = block;
    for (let i = 0; i < rows; i++) for (let j = 0; j < cols; j++) s += seedOf(t, i + j) + n * seedOf(t, i) * seedOf(t, rows + j) * m;
    return s;
  }
  if (form !== "outer_v4") return null;
  // acc[i][j] is a splat of seed(i + j) plus n · a[i] · b[4j..4j+3]
  for (let i = 0; i < 8; i++) for (let j = 0; j < 2; j++) for (let q = 0; q < 4; q++) s += seedOf(t, i + j) + n * seedOf(t, i) * seedOf(t, 8 + 4 * j + q) * m;
  return s;
}

const info = rt.initDevice({});
const groups = Number(arg("groups", String((info.computeUnits ?? 132) * 8)));
const threads = groups * WG;
const outBuf = rt.createBuffer(threads * 4);
const m = 0.999, c = 0.001;
const push = (n: number) => { const b = new ArrayBuffer(12); new Uint32Array(b, 0, 1)[0] = n; new Float32Array(b, 4, 2).set([m, c]); return new Uint32Array(b); };

const rows: { form: Form; fmasPerThread: number; ms: number; tflops: number; checked: boolean }[] = [];
for (const form of FORMS) {
  const pipe = rt.compileKernel(JSON.stringify(peakKernel(form)));
  const dispatch = (n: number) => rt.recordDispatch(pipe, [outBuf], [groups, 1, 1], push(n));
  // correctness on a short run, then the timed runs
  const n0 = 64;
  rt.beginBatch();
  dispatch(n0);
  rt.waitTimeline(rt.submitBatch());
  const got = new Float32Array(rt.readBuffer(outBuf));
  let checked = false;
  for (const t of [0, 1, 777, threads - 1]) {
    if (!Number.isFinite(got[t])) throw new Error(`${form}: out[${t}] = ${got[t]}`);
    const want = hostValue(form, t, m, c, n0);
    if (want === null) continue;
    if (Math.abs(got[t] - want) > 1e-3 * (1 + Math.abs(want))) throw new Error(`${form}: out[${t}] = ${got[t]}, expected ${want}`);
    checked = true;
  }
  const rep = (profile: boolean) => {
    rt.beginBatch({ profile });
    for (let i = 0; i < iters; i++) dispatch(steps);
    const v = rt.submitBatch();
    rt.waitTimeline(v);
    return profile ? busyNs(rt.batchProfile(v)) / 1e6 / iters : 0;
  };
  warmFor(300, () => rep(false));
  const ms = [rep(true), rep(true), rep(true)].sort((x, y) => x - y)[1];
  const fmas = fmasPerStep(form) * steps;
  rows.push({ form, fmasPerThread: fmas, ms, tflops: (2 * fmas * threads) / (ms * 1e9), checked });
}
rt.destroyBuffer(outBuf);
const messages: string[] = rt.takeValidationMessages?.() ?? [];
if (messages.length) throw new Error(`fma-peak: validation messages: ${messages.slice(0, 3).join(" | ")}`);
const meta = { device: info.deviceName, driver: info.driverVersion ?? info.driverInfo, groups, wg: WG, steps, iters, at: new Date().toISOString() };
writeFileSync(out, JSON.stringify({ meta, rows }, null, 1));
console.log(`${meta.device}: ${groups} workgroups of ${WG}, ${steps} steps`);
for (const r of rows) console.log(`${r.form.padEnd(12)} ${r.ms.toFixed(4).padStart(9)} ms ${r.tflops.toFixed(1).padStart(6)} TF/s${r.checked ? "  (checked)" : ""}`);
