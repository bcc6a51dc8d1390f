// bench/add-paths: the same c = a + b (2^26 f32) through HeliosBackend three ways, GPU busy time
// per op: randn inputs (as bench/ops), host-uploaded inputs, and batched (HELIOS_BATCH_SIZE
// dispatches per submission instead of one per op). Diagnoses bench/ops' add against
// bench/bandwidth's native-API add.
//   node dist/bench/add-paths.js [--n=67108864]
import { HeliosBackend } from "../ts/backend.js";
import { runtime } from "../ts/device.js";
import { ProfilingRuntime, summarize } from "./profiling.js";

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
    const sm = summarize(P.take());
    ms.push(sm.spanMs / iters);
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
