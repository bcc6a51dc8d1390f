// bench/fma-peak: the f32 FMA rate a generated kernel reaches on this device, with the parts of the
// SIMT matmul's inner loop added one at a time, to find which one holds the SIMT tile at half the
// FP32 peak (bench/MATMUL_NOTES.md, round 15):
//   scalar      32 independent accumulator chains per thread, operands in push constants
//   outer       the tile's register pattern: acc[i][j] = fma(a[i], b[j], acc[i][j]), 8×8 scalars
//   outer_v4    the same written as the matmul writes it (f32x4 rows, a splat of a[i])
//   outer_lds   outer_v4 with a and b read from shared memory every step (4 f32x4 per 64 FMAs)
//   outer_bar   outer_lds plus a workgroup barrier every 8 steps (the k-tile's barrier)
// Every kernel writes the sum of its accumulators (checked against a host evaluation of one
// thread) so nothing is dead code. GPU busy time from timestamps, after a 300 ms warm-up; median
// of 3 repetitions.
//
//   node dist/bench/fma-peak.js [--iters=10] [--steps=4096] [--groups=<8 per SM>] [--out=perf/fma-peak.json]
import { writeFileSync } from "node:fs";
import { f32, fma, kernel, lit, u32, vecOf, type Expr, type KernelDesc, type Var } from "../ts/ir/index.js";
import { read } from "../ts/kernels/matmul/common.js";
import { native } from "../ts/native.js";
import { busyNs, warmFor } from "./profiling.js";

// eslint-disable-next-line @typescript-eslint/no-explicit-any
const rt: any = native;
const arg = (k: string, d: string) => process.argv.find((a) => a.startsWith(`--${k}=`))?.slice(k.length + 3) ?? d;
const iters = Number(arg("iters", "10")), steps = Number(arg("steps", "4096")), out = arg("out", "perf/fma-peak.json");
const WG = 256;

type Form = "scalar" | "outer" | "outer_v4" | "outer_lds" | "outer_bar";
const FORMS: Form[] = ["scalar", "outer", "outer_v4", "outer_lds", "outer_bar"];
/** FMAs per thread and step. */
const fmasPerStep = (f: Form) => (f === "scalar" ? 32 : 64);

/** Thread t's starting values: small, distinct, so the sums stay finite and checkable. */
const seedOf = (t: number, i: number) => ((t * 7 + i * 13) % 97) / 97 - 0.5;

function peakKernel(form: Form): KernelDesc {
  const k = kernel(`fma_peak_${form}`, { workgroup: [WG] });
  const o = k.buffer("out", f32, "write");
  const pc = k.push({ steps: u32, m: f32, c: f32 });
  const t = k.let(k.globalId.x, "t");
  const seed = (i: number) => k.let(t.mul(7).add(i * 13).rem(97).cast(f32).div(97).sub(0.5), "s");
  const accs: Var[] = [];
  if (form === "scalar") {
    for (let i = 0; i < 32; i++) accs.push(k.var(f32, seed(i), `acc${i}`));
    k.for(0, pc.steps, () => {
      for (const a of accs) a.set(fma(read(a), pc.m, pc.c));
    }, { name: "s" });
  } else {
    const a = Array.from({ length: 8 }, (_, i) => seed(i));
    const b = Array.from({ length: 8 }, (_, j) => seed(8 + j).mul(pc.m));
    const sh = form === "outer_lds" || form === "outer_bar" ? k.shared("ab", "f32x4", 8 * 64) : undefined;
    const lid = k.let(k.localIndex, "lid");
    if (sh) {
      // 8 rows of 64 f32x4: row r holds (a[0..3], a[4..7], b[0..3], b[4..7]) of 16 threads' seeds
      k.for(lid, 8 * 64, (i) => sh.store(i, vecOf("f32x4", i.cast(f32).mul(0.001), pc.c, pc.m, 0.25)), { step: WG });
      k.barrier();
    }
    if (form === "outer") {
      for (let i = 0; i < 8; i++) for (let j = 0; j < 8; j++) accs.push(k.var(f32, seed(i + j), `acc${i}_${j}`));
      k.for(0, pc.steps, () => {
        for (let i = 0; i < 8; i++) for (let j = 0; j < 8; j++) accs[i * 8 + j].set(fma(a[i], b[j], read(accs[i * 8 + j])));
      }, { name: "s" });
    } else {
      for (let i = 0; i < 8; i++) for (let j = 0; j < 2; j++) accs.push(k.var("f32x4", vecOf("f32x4", seed(i + j)), `acc${i}_${j}`));
      const bv0 = vecOf("f32x4", b[0], b[1], b[2], b[3]), bv1 = vecOf("f32x4", b[4], b[5], b[6], b[7]);
      const av0 = vecOf("f32x4", a[0], a[1], a[2], a[3]), av1 = vecOf("f32x4", a[4], a[5], a[6], a[7]);
      k.for(0, pc.steps, (s) => {
        let av: Expr[] = [av0, av1], bv: Expr[] = [bv0, bv1];
        if (sh) {
          // like the matmul's k-step: two f32x4 of A (broadcast within a row of threads), two of B
          const row = k.let(s.band(7).mul(64), "row");
          const ty = lid.div(16), tx = lid.rem(16);
          av = [sh.load(row.add(ty.rem(16))), sh.load(row.add(ty.rem(16)).add(16))];
          bv = [sh.load(row.add(tx).add(32)), sh.load(row.add(tx).add(48))];
        }
        for (let i = 0; i < 8; i++) {
          const ai = vecOf("f32x4", av[i >> 2].swz("xyzw"[i & 3]));
          for (let j = 0; j < 2; j++) accs[i * 2 + j].set(fma(ai, bv[j], read(accs[i * 2 + j])));
        }
        if (form === "outer_bar") k.if(s.band(7).eq(7), () => k.barrier());
      }, { name: "s" });
    }
  }
  let sum: Expr = k.let(lit(f32, 0), "sum");
  for (const a of accs) {
    const parts = form === "scalar" || form === "outer" ? [read(a)] : [..."xyzw"].map((q) => read(a).swz(q));
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
  if (form === "outer") {
    for (let i = 0; i < 8; i++) for (let j = 0; j < 8; j++) s += seedOf(t, i + j) + n * seedOf(t, i) * seedOf(t, 8 + j) * m;
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
for (const r of rows) console.log(`${r.form.padEnd(10)} ${r.ms.toFixed(4).padStart(9)} ms ${r.tflops.toFixed(1).padStart(6)} TF/s${r.checked ? "  (checked)" : ""}`);
