// bench/add-paths: the same c = a + b (2^26 f32) through HeliosBackend three ways, GPU busy time
// per op: randn inputs (as bench/ops), host-uploaded inputs, and batched (HELIOS_BATCH_SIZE
// dispatches per submission instead of one per op). Diagnoses bench/ops' add against
// bench/bandwidth's native-API add.
//   node dist/bench/add-paths.js [--n=67108864] [--dump]
import { HeliosBackend } from "../ts/backend.js";
import { runtime } from "../ts/device.js";
import { ProfilingRuntime, busyNs, summarize } from "./profiling.js";
import { generateFused } from "../ts/kernels/elementwise.js";
import { grid1d } from "../ts/kernels/common.js";

const N = Number(process.argv.find((a) => a.startsWith("--n="))?.slice(4) ?? 1 << 26), iters = 20;
const P = new ProfilingRuntime(runtime());
const B = new HeliosBackend({ runtime: P.rt });
const time = (name: string, a: ReturnType<typeof B.randn>, b: ReturnType<typeof B.randn>, evaluateEach: boolean) => {
  const once = () => {
    const outs = [];
    for (let i = 0; i < iters; i++) {
      const o = B.add(a, b);
      if (evaluateEach) B.evaluate(o);
      outs.push(o);
    }
    B.evaluate(...outs);
    B.syncGpu();
    outs.forEach((o) => B.releaseGpuTensor(o));
  };
  once();
  const ms: number[] = [];
  for (let r = 0; r < 3; r++) {
    P.profiling = true;
    once();
    P.profiling = false;
    const batches = P.take();
    const sm = summarize(batches);
    ms.push(sm.spanMs / iters);
    if (r === 0 && process.argv.includes("--dump")) {
      const all = batches.flat();
      const t0 = Math.min(...all.map((p) => p.startNs));
      console.log(`  ${name}: first dispatches [start, end] µs: ` + all.slice(0, 6).map((p) => `[${((p.startNs - t0) / 1e3).toFixed(1)}, ${((p.endNs - t0) / 1e3).toFixed(1)}]`).join(" "));
    }
  }
  ms.sort((x, y) => x - y);
  console.log(`${name.padEnd(52)} ${ms[1].toFixed(3)} ms  ${((3 * 4 * N) / (ms[1] * 1e6)).toFixed(0)} GB/s`);
};
const ra = B.randn([N]), rb = B.randn([N]);
time("randn inputs, one submission per op", ra, rb, true);
time("randn inputs, outputs kept, batched", ra, rb, false);
const host = new Float32Array(N).map((_, i) => Math.sin(i));
const ha = B.fromArray(host as unknown as number[], [N]), hb = B.fromArray(host as unknown as number[], [N]);
time("uploaded inputs, one submission per op", ha, hb, true);

// The same kernel through the native API on plain buffers, one submission per dispatch.
{
  const rt = P.rt as unknown as {
    createBuffer(n: number): number; uploadBuffer(h: number, d: ArrayBufferView): void; compileKernel(d: string): number;
    beginBatch(o?: { profile?: boolean }): void; recordDispatch(p: number, b: number[], g: number[], push?: ArrayBufferView): void;
    submitBatch(): number; waitTimeline(v: number): void; batchProfile(v: number): { startNs: number; endNs: number; label: string; gpuNs: number }[];
  };
  const key = { signature: "x", inputs: [{ dtype: "f32", mode: "full" }, { dtype: "f32", mode: "full" }], rank: 1, program: [{ k: "load", input: 0 }, { k: "load", input: 1 }, { k: "bin", op: "add", a: 0, b: 1 }], nParams: 0, outDtype: "f32", vec4: true };
  const pipe = rt.compileKernel(JSON.stringify(generateFused(key as unknown as Parameters<typeof generateFused>[0])));
  const [a, b, c] = [0, 1, 2].map(() => rt.createBuffer(4 * N));
  rt.uploadBuffer(a, host);
  rt.uploadBuffer(b, host);
  const groups = grid1d(N / 4);
  const ms: number[] = [];
  for (let r = 0; r < 4; r++) {
    const vals: number[] = [];
    for (let i = 0; i < iters; i++) {
      rt.beginBatch({ profile: true });
      rt.recordDispatch(pipe, [a, b, c], groups, new Uint32Array([N]));
      vals.push(rt.submitBatch());
    }
    rt.waitTimeline(vals[vals.length - 1]);
    const all = vals.flatMap((v) => rt.batchProfile(v));
    if (r > 0) ms.push(busyNs(all) / 1e6 / iters);
    if (r === 1 && process.argv.includes("--dump")) {
      const t0 = Math.min(...all.map((p) => p.startNs));
      console.log(`  native: first dispatches [start, end] µs: ` + all.slice(0, 6).map((p) => `[${((p.startNs - t0) / 1e3).toFixed(1)}, ${((p.endNs - t0) / 1e3).toFixed(1)}]`).join(" "));
    }
  }
  ms.sort((x, y) => x - y);
  console.log(`${"native API, same kernel, one submission per op".padEnd(52)} ${ms[1].toFixed(3)} ms  ${((3 * 4 * N) / (ms[1] * 1e6)).toFixed(0)} GB/s`);
}
