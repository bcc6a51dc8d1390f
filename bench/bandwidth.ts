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
const A = rt.createBuffer(n * 4), B = rt.createBuffer(n * 4), C = rt.createBuffer(n * 4);
const ha = new Float32Array(n), hb = new Float32Array(n);
for (let i = 0; i < n; i++) {
  ha[i] = (i % 1013) * 0.25;
  hb[i] = (i % 517) * 0.5;
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
      if (got[i] !== ha[i] + hb[i]) throw new Error(`${desc.name}: c[${i}] = ${got[i]}, expected ${ha[i] + hb[i]}`);
    }
    const reps: number[] = [];
    for (let r = 0; r < 4; r++) {
      rt.beginBatch({ profile: true });
      for (let i = 0; i < iters; i++) rt.recordDispatch(pipe, [A, B, C], groups, push);
      const v = rt.submitBatch();
      rt.waitTimeline(v);
      const prof = rt.batchProfile(v) as { endNs: number }[];
      if (r > 0) reps.push(Math.max(...prof.map((p) => p.endNs)) / 1e6 / iters);
    }
    reps.sort((x, y) => x - y);
    const ms = reps[1];
    rows.push({ kernel: desc.name, wg, u, ms, gbps: (3 * n * 4) / (ms * 1e6) });
  }
}
writeFileSync(out, JSON.stringify({ device: info.deviceName, mib, iters, rows }, null, 1));
console.log(`device: ${info.deviceName}; c = a + b over ${mib} MiB f32 (3 x ${mib} MiB moved), GPU span per dispatch, median of 3 x ${iters}`);
console.log("wg \\ vectors/thread " + [1, 2, 4, 8].map((u) => String(u).padStart(10)).join(""));
for (const wg of [64, 128, 256, 512, 1024]) {
  console.log(String(wg).padEnd(20) + rows.filter((r) => r.wg === wg).map((r) => `${r.gbps.toFixed(0)} GB/s`.padStart(10)).join(""));
}
rt.destroy();
