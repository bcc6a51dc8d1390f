// bench/bandwidth: what a streaming kernel reaches on this device, as a function of the
// workgroup size and of how many 16-byte vectors each thread moves. Evidence for the
// elementwise/row kernels' launch shape (issue 4: HeliosBackend.add at 0.58x PyTorch).
// Kernels: c = a + b (f32x4), u vectors per thread, thread t handles vectors t + j*threads
// (coalesced), grid of ceil(n4 / (wg*u)) workgroups (x, then y). GPU span timing with
// timestamps, a correctness check of every variant first.
//
//   node dist/bench/bandwidth.js [--mib=256] [--iters=20] [--out=perf/bandwidth.json]
import { writeFileSync } from "node:fs";
import { f32, kernel, u32, type KernelDesc } from "../ts/ir/index.js";
import { native } from "../ts/native.js";
import { busyNs } from "./profiling.js";
import { generateFused } from "../ts/kernels/elementwise.js";

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
  // all loads first, then the stores: u independent 32-byte reads in flight per thread
  const idx = Array.from({ length: u }, (_, j) => k.let(t.add(stride.mul(j)), `i${j}`));
  const vals = idx.map((i, j) => k.let(a.loadVec(k.let(i.min(k.let(pc.n4.sub(1), `last${j}`)), `c${j}`), 4).add(b.loadVec(i.min(pc.n4.sub(1)), 4)), `v${j}`));
  idx.forEach((i, j) => k.if(i.lt(pc.n4), () => c.store(i, vals[j])));
  return k.finish();
}

function grid(groups: number): [number, number, number] {
  if (groups <= 65535) return [groups, 1, 1];
  const y = Math.ceil(groups / 65535);
  return [Math.ceil(groups / y), y, 1];
}

const info = rt.initDevice({});
const n = (mib << 20) / 4, n4 = n / 4;
let A = rt.createBuffer(n * 4), B = rt.createBuffer(n * 4);
const C = rt.createBuffer(n * 4);
// Random data: patterned data can be compressed by the memory system and flatter the figure.
const ha = new Float32Array(n), hb = new Float32Array(n);
let seed = 12345;
const rnd = () => {
  seed ^= seed << 13;
  seed ^= seed >>> 17;
  seed ^= seed << 5;
  return (seed >>> 0) / 2 ** 32 - 0.5;
};
for (let i = 0; i < n; i++) {
  ha[i] = rnd();
  hb[i] = rnd();
}
rt.uploadBuffer(A, ha);
rt.uploadBuffer(B, hb);
const rows: { kernel: string; wg: number; u: number; ms: number; gbps: number }[] = [];
for (const wg of [64, 128, 256, 512, 1024]) {
  for (const u of [1, 2, 4, 8]) {
    const desc = addKernel(wg, u);
    const pipe = rt.compileKernel(JSON.stringify(desc));
    const groups = grid(Math.ceil(n4 / (wg * u)));
    const push = new Uint32Array([n4]);
    rt.fillBuffer(C, 0);
    rt.beginBatch();
    rt.recordDispatch(pipe, [A, B, C], groups, push);
    rt.waitTimeline(rt.submitBatch());
    const got = new Float32Array(rt.readBuffer(C));
    for (let i = 0; i < n; i += 4099) {
      if (got[i] !== Math.fround(ha[i] + hb[i])) throw new Error(`${desc.name}: c[${i}] = ${got[i]}, expected ${Math.fround(ha[i] + hb[i])}`);
    }
    const reps: number[] = [];
    for (let r = 0; r < 4; r++) {
      rt.beginBatch({ profile: true });
      for (let i = 0; i < iters; i++) rt.recordDispatch(pipe, [A, B, C], groups, push);
      const v = rt.submitBatch();
      rt.waitTimeline(v);
      const prof = rt.batchProfile(v) as { startNs: number; endNs: number }[];
      if (r > 0) reps.push((Math.max(...prof.map((p) => p.endNs)) - Math.min(...prof.map((p) => p.startNs))) / 1e6 / iters);
    }
    reps.sort((x, y) => x - y);
    const ms = reps[1];
    rows.push({ kernel: desc.name, wg, u, ms, gbps: (3 * n * 4) / (ms * 1e6) });
  }
}
// Where the output lives: one buffer every time (above), a different buffer each dispatch (what
// a pool that reuses memory only after the GPU is done does), and leased + released each time.
const pipe = rt.compileKernel(JSON.stringify(addKernel(256, 1)));
const groups = grid(Math.ceil(n4 / 256));
const push = new Uint32Array([n4]);
const rotating = Array.from({ length: 8 }, () => rt.createBuffer(n * 4));
const placements: { name: string; ms: number; gbps: number }[] = [];
const timeOutputs = (name: string, outFor: (i: number) => number, after: (h: number) => void) => {
  // 300 ms of sustained load first: after idle time the SMs sit at idle clocks through short bursts
  for (const t0 = Date.now(); Date.now() - t0 < 300; ) {
    rt.beginBatch();
    for (let i = 0; i < iters; i++) rt.recordDispatch(pipe, [A, B, C], groups, push);
    rt.waitTimeline(rt.submitBatch());
  }
  const reps: number[] = [];
  for (let r = 0; r < 4; r++) {
    rt.beginBatch({ profile: true });
    for (let i = 0; i < iters; i++) {
      const o = outFor(i);
      rt.recordDispatch(pipe, [A, B, o], groups, push);
      after(o);
    }
    const v = rt.submitBatch();
    rt.waitTimeline(v);
    const prof = rt.batchProfile(v) as { startNs: number; endNs: number }[];
    if (r > 0) reps.push((Math.max(...prof.map((p) => p.endNs)) - Math.min(...prof.map((p) => p.startNs))) / 1e6 / iters);
  }
  reps.sort((x, y) => x - y);
  placements.push({ name, ms: reps[1], gbps: (3 * n * 4) / (reps[1] * 1e6) });
};
timeOutputs("same output buffer", () => C, () => {});
// Inputs and output in host-visible device-local memory (ReBAR), then patterned inputs.
const [HA, HB, HC] = [0, 1, 2].map(() => rt.createBuffer(n * 4, { hostVisible: true }));
rt.uploadBuffer(HA, ha);
rt.uploadBuffer(HB, hb);
{
  const [a0, b0] = [A, B];
  const swap = (x: number, y: number) => {
    A = x;
    B = y;
  };
  swap(HA, HB);
  timeOutputs("host-visible device-local a, b, c", () => HC, () => {});
  swap(a0, b0);
  const pa = new Float32Array(n), pb = new Float32Array(n);
  for (let i = 0; i < n; i++) {
    pa[i] = (i % 1013) * 0.25;
    pb[i] = (i % 517) * 0.5;
  }
  rt.uploadBuffer(A, pa);
  rt.uploadBuffer(B, pb);
  timeOutputs("patterned (compressible) inputs", () => C, () => {});
  const sa = new Float32Array(n).map((_, i) => Math.sin(i));
  rt.uploadBuffer(A, sa);
  rt.uploadBuffer(B, sa);
  timeOutputs("a = b = sin(i)", () => C, () => {});
  const gauss = new Float32Array(n).map(() => (rnd() + rnd() + rnd() + rnd()) * 1.7);
  const gauss2 = gauss.map((x) => -x * 0.5);
  rt.uploadBuffer(A, gauss);
  rt.uploadBuffer(B, gauss2);
  timeOutputs("near-normal random inputs", () => C, () => {});
  // the same data in host-visible device-local memory (a memory type the CPU can map)
  rt.uploadBuffer(HA, gauss);
  rt.uploadBuffer(HB, gauss2);
  swap(HA, HB);
  timeOutputs("near-normal inputs, host-visible device-local a, b, c", () => HC, () => {});
  swap(a0, b0);
  // all-zero inputs: a figure far above ~3.35 TB/s (HBM3 peak) means the memory system compresses
  rt.fillBuffer(A, 0);
  rt.fillBuffer(B, 0);
  timeOutputs("all-zero inputs", () => C, () => {});
  rt.uploadBuffer(A, gauss);
  rt.uploadBuffer(B, gauss2);
  rt.uploadBuffer(A, ha);
  rt.uploadBuffer(B, hb);
}
[HA, HB, HC].forEach((h) => rt.destroyBuffer(h));
// Data sweep: a and b drawn independently from each distribution (the kernel has no data-dependent
// control flow, so any difference is the memory system's or the clock's).
const dists: [string, () => number][] = [
  ["uniform [-0.5, 0.5)", () => rnd()],
  ["uniform [0, 1)", () => rnd() + 0.5],
  ["uniform [-1, 1)", () => 2 * rnd()],
  ["uniform [-4, 4)", () => 8 * rnd()],
  ["normal(0, 1)", () => Math.sqrt(-2 * Math.log(rnd() + 0.5 + 1e-12)) * Math.cos(2 * Math.PI * (rnd() + 0.5))],
  ["constant 1", () => 1],
  ["constant 0", () => 0],
  ["uniform [-0.5, 0.5) again", () => rnd()],
];
const dataRows: { name: string; gbps: number }[] = [];
for (const [name, gen] of dists) {
  const x = new Float32Array(n), y = new Float32Array(n);
  for (let i = 0; i < n; i++) {
    x[i] = gen();
    y[i] = gen();
  }
  rt.uploadBuffer(A, x);
  rt.uploadBuffer(B, y);
  timeOutputs(`data: ${name}`, () => C, () => {});
  dataRows.push({ name, gbps: placements[placements.length - 1].gbps });
}
// One submission per dispatch (what HeliosBackend does for an evaluated elementwise op).
{
  const reps: number[] = [];
  for (let r = 0; r < 4; r++) {
    const entries: { startNs: number; endNs: number }[] = [];
    const values: number[] = [];
    for (let i = 0; i < iters; i++) {
      rt.beginBatch({ profile: true });
      rt.recordDispatch(pipe, [A, B, C], groups, push);
      values.push(rt.submitBatch());
    }
    rt.waitTimeline(values[values.length - 1]);
    for (const v of values) entries.push(...(rt.batchProfile(v) as { startNs: number; endNs: number }[]));
    if (r > 0) reps.push(busyNs(entries) / 1e6 / iters);
  }
  reps.sort((x, y) => x - y);
  placements.push({ name: "one submission per dispatch", ms: reps[1], gbps: (3 * n * 4) / (reps[1] * 1e6) });
}
// The backend's generated add kernel (fused_f32_3_v4) on the same buffers, and the bench kernel
// on leased inputs: which of the two differences from HeliosBackend's add matters.
{
  const key = { signature: "bw", inputs: [{ dtype: "f32", mode: "full" }, { dtype: "f32", mode: "full" }], rank: 1, program: [{ k: "load", input: 0 }, { k: "load", input: 1 }, { k: "bin", op: "add", a: 0, b: 1 }], nParams: 0, outDtype: "f32", vec4: true } as const;
  const fused = rt.compileKernel(JSON.stringify(generateFused(key as unknown as Parameters<typeof generateFused>[0])));
  const fusedPush = new Uint32Array([n]);
  const reps: number[] = [];
  for (let r = 0; r < 4; r++) {
    rt.beginBatch({ profile: true });
    for (let i = 0; i < iters; i++) rt.recordDispatch(fused, [A, B, C], groups, fusedPush);
    const v = rt.submitBatch();
    rt.waitTimeline(v);
    if (r > 0) reps.push(busyNs(rt.batchProfile(v)) / 1e6 / iters);
  }
  reps.sort((x, y) => x - y);
  placements.push({ name: "HeliosBackend's fused add kernel", ms: reps[1], gbps: (3 * n * 4) / (reps[1] * 1e6) });
  const [la, lb] = [rt.leaseBuffer(n * 4), rt.leaseBuffer(n * 4)];
  rt.uploadBuffer(la, ha);
  rt.uploadBuffer(lb, hb);
  const [a0, b0] = [A, B];
  A = la;
  B = lb;
  timeOutputs("leased inputs", () => C, () => {});
  A = a0;
  B = b0;
  rt.releaseBuffer(la);
  rt.releaseBuffer(lb);
}
timeOutputs("8 output buffers in turn", (i) => rotating[i % 8], () => {});
timeOutputs("leased output, released after recording", () => rt.leaseBuffer(n * 4), (h) => rt.releaseBuffer(h));
rotating.forEach((h) => rt.destroyBuffer(h));
writeFileSync(out, JSON.stringify({ device: info.deviceName, mib, iters, rows, placements }, null, 1));
console.log(`device: ${info.deviceName}; c = a + b over ${mib} MiB f32 (3 x ${mib} MiB moved), GPU span per dispatch, median of 3 x ${iters}`);
console.log("wg \\ vectors/thread " + [1, 2, 4, 8].map((u) => String(u).padStart(10)).join(""));
for (const wg of [64, 128, 256, 512, 1024]) {
  console.log(String(wg).padEnd(20) + rows.filter((r) => r.wg === wg).map((r) => `${r.gbps.toFixed(0)} GB/s`.padStart(10)).join(""));
}
console.log("output placement (wg 256, 1 vector/thread):");
for (const p of placements) console.log(`  ${p.name.padEnd(44)} ${p.gbps.toFixed(0)} GB/s`);
rt.destroy();
