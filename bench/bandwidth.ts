// bench/bandwidth: what a streaming kernel reaches on this device. c = a + b (f32x4) over `mib`
// MiB: first as a function of the workgroup size and of how many 16-byte vectors each thread
// moves, then (wg 256, one vector per thread) with the buffers, data and submission pattern
// varied — the evidence that HeliosBackend's add runs at bandwidth and that the slow runs were
// GPU clocks (RESULTS, runs 12-17). Every variant is checked first; GPU busy time from timestamps
// after a 300 ms warm-up (short bursts after idle time run at idle SM clocks).
//
//   node dist/bench/bandwidth.js [--mib=256] [--iters=20] [--out=perf/bandwidth.json]
import { writeFileSync } from "node:fs";
import { f32, kernel, u32, type KernelDesc } from "../ts/ir/index.js";
import { native } from "../ts/native.js";
import { generateFused, type FusedKernelKey } from "../ts/kernels/elementwise.js";
import { grid1d } from "../ts/kernels/common.js";
import { busyNs, warmFor } from "./profiling.js";

// eslint-disable-next-line @typescript-eslint/no-explicit-any
const rt: any = native;
const arg = (k: string, d: string) => process.argv.find((a) => a.startsWith(`--${k}=`))?.slice(k.length + 3) ?? d;
const mib = Number(arg("mib", "256")), iters = Number(arg("iters", "20")), out = arg("out", "perf/bandwidth.json");

function addKernel(wg: number, u: number): KernelDesc {
  const k = kernel(`bw_add_wg${wg}_u${u}`, { workgroup: [wg] });
  const a = k.buffer("a", f32, "read"), b = k.buffer("b", f32, "read"), c = k.buffer("c", f32, "write");
  const pc = k.push({ n4: u32 });
  const g = k.globalId;
  const threads = k.let(k.numWorkgroups.x.mul(wg), "threads");
  const t = k.let(g.x.add(g.y.mul(threads)), "t");
  const stride = k.let(threads.mul(k.numWorkgroups.y), "stride");
  const last = k.let(pc.n4.sub(1), "last");
  // all loads first, then the stores: u independent 32-byte reads in flight per thread
  const idx = Array.from({ length: u }, (_, j) => k.let(t.add(stride.mul(j)), `i${j}`));
  const vals = idx.map((i, j) => k.let(a.loadVec(i.min(last), 4).add(b.loadVec(i.min(last), 4)), `v${j}`));
  idx.forEach((i, j) => k.if(i.lt(pc.n4), () => c.store(i, vals[j])));
  return k.finish();
}

/** HeliosBackend's generated kernel for add(a, b) on f32 (fused_f32_3_v4). */
const FUSED_ADD: FusedKernelKey = {
  signature: "bw", inputs: [{ dtype: "f32", mode: "full" }, { dtype: "f32", mode: "full" }], rank: 1,
  program: [{ k: "load", input: 0 }, { k: "load", input: 1 }, { k: "bin", op: "add", a: 0, b: 1 }], nParams: 0, outDtype: "f32", vec4: true,
} as unknown as FusedKernelKey;

const info = rt.initDevice({});
const n = (mib << 20) / 4, n4 = n / 4, gbps = (ms: number) => (3 * n * 4) / (ms * 1e6);
let seed = 12345;
const rnd = () => {
  seed ^= seed << 13;
  seed ^= seed >>> 17;
  seed ^= seed << 5;
  return (seed >>> 0) / 2 ** 32 - 0.5;
};
const fill = (gen: (i: number) => number) => Float32Array.from({ length: n }, (_, i) => gen(i));
const ha = fill(() => rnd()), hb = fill(() => rnd());
const C = rt.createBuffer(n * 4);
let A = rt.createBuffer(n * 4), B = rt.createBuffer(n * 4);
rt.uploadBuffer(A, ha);
rt.uploadBuffer(B, hb);

interface Launch { pipe: number; groups: number[]; push: Uint32Array }

/**
 * Median ms per dispatch (GPU busy time) of 3 repetitions of `iters` dispatches after the warm-up;
 * `perSubmit` submits each dispatch on its own, `output(i)`/`done(h)` pick and hand back C.
 */
function time(l: Launch, o: { perSubmit?: boolean; output?: (i: number) => number; done?: (h: number) => void } = {}): number {
  const output = o.output ?? (() => C);
  const rep = (profile: boolean) => {
    const values: number[] = [];
    if (!o.perSubmit) rt.beginBatch({ profile });
    for (let i = 0; i < iters; i++) {
      if (o.perSubmit) rt.beginBatch({ profile });
      const h = output(i);
      rt.recordDispatch(l.pipe, [A, B, h], l.groups, l.push);
      o.done?.(h);
      if (o.perSubmit) values.push(rt.submitBatch());
    }
    if (!o.perSubmit) values.push(rt.submitBatch());
    rt.waitTimeline(values[values.length - 1]);
    return profile ? busyNs(values.flatMap((v) => rt.batchProfile(v))) / 1e6 / iters : 0;
  };
  warmFor(300, () => rep(false));
  const reps = [rep(true), rep(true), rep(true)].sort((x, y) => x - y);
  return reps[1];
}

const rows: { kernel: string; wg: number; u: number; ms: number; gbps: number }[] = [];
for (const wg of [64, 128, 256, 512, 1024]) {
  for (const u of [1, 2, 4, 8]) {
    const desc = addKernel(wg, u);
    const l = { pipe: rt.compileKernel(JSON.stringify(desc)), groups: grid1d(Math.ceil(n4 / u), wg), push: new Uint32Array([n4]) };
    rt.fillBuffer(C, 0);
    rt.beginBatch();
    rt.recordDispatch(l.pipe, [A, B, C], l.groups, l.push);
    rt.waitTimeline(rt.submitBatch());
    const got = new Float32Array(rt.readBuffer(C));
    for (let i = 0; i < n; i += 4099) {
      if (got[i] !== Math.fround(ha[i] + hb[i])) throw new Error(`${desc.name}: c[${i}] = ${got[i]}, expected ${Math.fround(ha[i] + hb[i])}`);
    }
    const ms = time(l);
    rows.push({ kernel: desc.name, wg, u, ms, gbps: gbps(ms) });
  }
}

// wg 256, one vector per thread, with one thing varied at a time.
const base: Launch = { pipe: rt.compileKernel(JSON.stringify(addKernel(256, 1))), groups: grid1d(n4, 256), push: new Uint32Array([n4]) };
const placements: { name: string; ms: number; gbps: number }[] = [];
const row = (name: string, ms: number) => placements.push({ name, ms, gbps: gbps(ms) });
/** Times with a, b holding `x`, `y` (in buffers `a`, `b` when given), then restores the random inputs. */
const withInputs = (x: Float32Array, y: Float32Array, bufs: [number, number] | null, fn: () => void) => {
  const saved = [A, B];
  if (bufs) [A, B] = bufs;
  rt.uploadBuffer(A, x);
  rt.uploadBuffer(B, y);
  fn();
  [A, B] = saved;
  rt.uploadBuffer(A, ha);
  rt.uploadBuffer(B, hb);
};

row("same output buffer", time(base));
const hv = [0, 1, 2].map(() => rt.createBuffer(n * 4, { hostVisible: true }));
withInputs(ha, hb, [hv[0], hv[1]], () => row("host-visible device-local a, b, c", time(base, { output: () => hv[2] })));
withInputs(fill((i) => (i % 1013) * 0.25), fill((i) => (i % 517) * 0.5), null, () => row("patterned (compressible) inputs", time(base)));
const sin = fill((i) => Math.sin(i));
withInputs(sin, sin, null, () => row("a = b = sin(i)", time(base)));
const gauss = fill(() => (rnd() + rnd() + rnd() + rnd()) * 1.7), gauss2 = gauss.map((x) => -x * 0.5);
withInputs(gauss, gauss2, null, () => row("near-normal random inputs", time(base)));
withInputs(gauss, gauss2, [hv[0], hv[1]], () => row("near-normal inputs, host-visible device-local a, b, c", time(base, { output: () => hv[2] })));
const zeros = new Float32Array(n);
withInputs(zeros, zeros, null, () => row("all-zero inputs", time(base)));
hv.forEach((h) => rt.destroyBuffer(h));
// a and b drawn independently from each distribution (no data-dependent control flow in the kernel)
const dists: [string, () => number][] = [
  ["uniform [-0.5, 0.5)", () => rnd()],
  ["uniform [0, 1)", () => rnd() + 0.5],
  ["uniform [-1, 1)", () => 2 * rnd()],
  ["uniform [-4, 4)", () => 8 * rnd()],
  ["normal(0, 1)", () => Math.sqrt(-2 * Math.log(rnd() + 0.5 + 1e-12)) * Math.cos(2 * Math.PI * (rnd() + 0.5))],
  ["constant 1", () => 1],
  ["constant 0", () => 0],
];
for (const [name, gen] of dists) withInputs(fill(gen), fill(gen), null, () => row(`data: ${name}`, time(base)));
// What HeliosBackend does differently: one submission per op, its generated kernel, leased inputs.
row("one submission per dispatch", time(base, { perSubmit: true }));
row("HeliosBackend's fused add kernel", time({ ...base, pipe: rt.compileKernel(JSON.stringify(generateFused(FUSED_ADD))), push: new Uint32Array([n]) }));
const leased: [number, number] = [rt.leaseBuffer(n * 4), rt.leaseBuffer(n * 4)];
withInputs(ha, hb, leased, () => row("leased inputs", time(base)));
leased.forEach((h) => rt.releaseBuffer(h));
const rotating = Array.from({ length: 8 }, () => rt.createBuffer(n * 4));
row("8 output buffers in turn", time(base, { output: (i) => rotating[i % 8] }));
rotating.forEach((h) => rt.destroyBuffer(h));
row("leased output, released after recording", time(base, { output: () => rt.leaseBuffer(n * 4), done: (h) => rt.releaseBuffer(h) }));

writeFileSync(out, JSON.stringify({ device: info.deviceName, mib, iters, rows, placements }, null, 1));
console.log(`device: ${info.deviceName}; c = a + b over ${mib} MiB f32 (3 x ${mib} MiB moved), GPU busy time per dispatch, median of 3 x ${iters}`);
console.log("wg \\ vectors/thread " + [1, 2, 4, 8].map((u) => String(u).padStart(10)).join(""));
for (const wg of [64, 128, 256, 512, 1024]) {
  console.log(String(wg).padEnd(20) + rows.filter((r) => r.wg === wg).map((r) => `${r.gbps.toFixed(0)} GB/s`.padStart(10)).join(""));
}
console.log("wg 256, 1 vector/thread, one thing varied:");
for (const p of placements) console.log(`  ${p.name.padEnd(52)} ${p.gbps.toFixed(0)} GB/s`);
rt.destroy();
