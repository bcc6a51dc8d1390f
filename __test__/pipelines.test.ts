// Deferred pipeline compiles (ts/exec/pipelines.ts, issue 26): the kernels a step meets compile in
// one parallel compileKernels call before its queued dispatches reach the runtime, with results
// identical to compiling each at once; captures, profiled batches, destroyDevice() + initDevice(),
// runtimes without compileKernels, and a pipeline that fails to build when its dispatches need it.
import { test } from "node:test";
import assert from "node:assert/strict";
import { recordingBackend, onNative, testRuntime } from "./backend-helpers.js";
import { Rng } from "./harness.js";
import { HeliosBackend } from "../ts/backend.js";
import type { Engine } from "../ts/engine.js";
import { run } from "../ts/engine.js";
import type { HeliosTensor } from "../ts/tensor.js";
import type { TensorData } from "../ts/types.js";
import type { Runtime } from "../ts/exec/runtime.js";
import { deferBudget } from "../ts/exec/scheduler.js";
import { kernel, f32, u32 } from "../ts/ir/index.js";

const skip = !onNative() && "the mock runtime compiles each kernel at once (no compileKernels)";
const rng = new Rng(2600 + Math.floor(Math.random() * 1000));
const engineOf = (B: HeliosBackend): Engine => (B as unknown as { E: Engine }).E;
const f32s = (n: number) => Float32Array.from({ length: n }, () => rng.next() * 2 - 1);
const bits = (t: TensorData) => new Uint32Array(Float32Array.from(t.data as Float32Array).buffer);

/**
 * A step of distinct kernels (matmul, fused elementwise, softmax, layerNorm, transpose, a row
 * sum) over tensors big enough (> 64 KiB) that each release goes back to the pool at once, so
 * every op is followed by a release: the moments that would hand queued dispatches over.
 */
function step(B: HeliosBackend, x: TensorData, w: TensorData, g: TensorData, bias: TensorData): TensorData[] {
  const h = B.matmul(x, w);
  const a = B.gelu(B.add(h, bias));
  B.releaseGpuTensor(h);
  const s = B.softmax(a, -1);
  B.releaseGpuTensor(a);
  const n = B.layerNorm(s, g, bias, 1e-5);
  B.releaseGpuTensor(s);
  const t = B.transpose(n, 0, 1);
  B.releaseGpuTensor(n);
  const r = B.sum(t, 1);
  return [t, r];
}

function inputs(B: HeliosBackend, R: number, K: number, C: number, data: Float32Array[]): TensorData[] {
  return [B.fromArray(data[0], [R, K]), B.fromArray(data[1], [K, C]), B.fromArray(data[2], [C]), B.fromArray(data[3], [C])];
}

test("a step's new kernels compile in one compileKernels call, with results identical to one at a time", { skip }, () => {
  const [R, K, C] = [rng.int(130, 200), rng.int(8, 40), rng.int(130, 160)];
  const data = [f32s(R * K), f32s(K * C), f32s(C), f32s(C)];
  const outs: Uint32Array[][] = [];
  for (const compileThreads of [0, 1]) {
    const { B, names, calls } = recordingBackend({ compileThreads });
    const [x, w, g, bias] = inputs(B, R, K, C, data);
    const got = step(B, x, w, g, bias);
    if (compileThreads === 0) assert.deepEqual(calls, [], "nothing compiled before queued work must reach the runtime");
    outs.push(got.map(bits));
    const compiles = engineOf(B).stats().kernelCompiles;
    assert.ok(names.size >= 5, `distinct kernels: ${[...names]}`);
    assert.equal(compiles, names.size, "kernelCompiles counts each kernel once");
    if (compileThreads === 0) {
      assert.deepEqual(calls, [{ many: true, kernels: names.size }], "one native call for the step's kernels");
    } else {
      assert.equal(calls.length, names.size, "HELIOS_COMPILE_THREADS=1: one compileKernel per kernel");
      assert.ok(calls.every((c) => !c.many));
    }
    // a second step meets no new kernel
    const before = calls.length;
    step(B, x, w, g, bias).forEach((t) => void t.data);
    assert.equal(calls.length, before);
  }
  assert.deepEqual(outs[0], outs[1], "bit-identical results");
});

test("releases wait behind pending compiles only up to the budget", { skip }, () => {
  assert.equal(deferBudget(0), 64 << 20);
  assert.equal(deferBudget(2 ** 34), 2 ** 33);
  // 80 MiB of releases behind a pending kernel, none taken over: the budget (64 MiB here) cuts the group
  const { B, calls } = recordingBackend();
  const E = engineOf(B);
  const n = 5 << 20; // 20 MiB per tensor
  const x = B.fromArray(new Float32Array(n).fill(1), [n]);
  const ys = [B.exp(x), B.neg(x), B.sqrt(x), B.scale(B.exp(x), 3)];
  for (const y of ys) B.evaluate(y);
  assert.ok(E.pool.liveBytes < 2 * (64 << 20), "the floor applies");
  for (const y of ys) B.releaseGpuTensor(y);
  assert.equal(calls.length, 1, "the fourth release went past the budget and compiled the group");
  assert.equal(calls[0].kernels, 4);
  B.syncGpu();
});

test("a capture recorded cold compiles its kernels in one call and replays correctly", { skip }, () => {
  const [R, K, C] = [rng.int(130, 200), rng.int(8, 40), rng.int(130, 160)];
  const datas = [0, 1].map(() => [f32s(R * K), f32s(K * C), f32s(C), f32s(C)]);
  const ref = recordingBackend({ compileThreads: 1 });
  const wants = datas.map((data) => {
    const ri = inputs(ref.B, R, K, C, data);
    return step(ref.B, ri[0], ri[1], ri[2], ri[3]).map(bits);
  });
  const { B, names, calls, leases } = recordingBackend();
  const [x, w, g, bias] = inputs(B, R, K, C, datas[0].map((d) => d.map(() => 0)));
  const E = engineOf(B);
  const leased = E.pool.leases, fromRuntime = leases.n;
  B.beginCapture();
  const outs = step(B, x, w, g, bias);
  const c = B.endCapture(...outs);
  assert.deepEqual(calls, [{ many: true, kernels: names.size }], "one native call, at endCapture");
  assert.ok(leases.n - fromRuntime < E.pool.leases - leased, "released temporaries were taken over while compiles waited");
  for (const [i, data] of datas.entries()) {
    [x, w, g, bias].forEach((t, j) => B.writeTensor(t, data[j]));
    B.replay(c);
    assert.deepEqual(outs.map(bits), wants[i], `replay ${i} computes what the eager step does`);
  }
  B.destroyCapture(c);
});

test("inside a capture recorded cold, a buffer the host wrote is never taken over by a later lease", { skip }, () => {
  const n = rng.int(20000, 30000); // > 64 KiB: released at once
  const k = f32s(n);
  const { B, leases } = recordingBackend();
  const x = B.fromArray(new Float32Array(n), [n]);
  B.beginCapture();
  const first = B.neg(x);
  B.evaluate(first); // queued behind its pipeline compile: the upload below does not hand it over
  const konst = B.fromArray(k, [n]); // uploaded once, read by every replay
  const y = B.mul(first, konst);
  B.evaluate(y);
  B.releaseGpuTensor(konst);
  const before = leases.n;
  const z = B.exp(x); // the same size: it would take konst's buffer over if that were allowed
  B.evaluate(z);
  assert.equal(leases.n, before + 1, "leased from the runtime");
  const out = B.add(y, z);
  B.evaluate(out);
  const c = B.endCapture(out);
  for (let r = 0; r < 3; r++) {
    const xs = f32s(n);
    B.writeTensor(x, xs);
    B.replay(c);
    const got = out.data as Float32Array;
    for (let i = 0; i < n; i += 97) {
      const want = Math.fround(Math.fround(-xs[i] * k[i]) + Math.fround(Math.exp(xs[i])));
      assert.ok(Math.abs(got[i] - want) <= 1e-5 * Math.max(1, Math.abs(want)), `replay ${r} [${i}]: ${got[i]} vs ${want}`);
    }
  }
  B.destroyCapture(c);
});

test("a profiled batch whose kernels are pending times the real pipelines", { skip }, () => {
  const { B, calls, names } = recordingBackend();
  const E = engineOf(B);
  const x = B.fromArray(f32s(4096), [64, 64]);
  let y: TensorData | null = null;
  const value = E.sched.profiled("test", () => {
    y = B.softmax(B.exp(x), -1);
    B.evaluate(y);
  });
  assert.deepEqual(calls, [{ many: true, kernels: names.size }]);
  const profile = (testRuntime() as unknown as { batchProfile(v: number): { label: string; gpuNs: number }[] }).batchProfile(value);
  assert.deepEqual(profile.map((p) => p.label).sort(), [...names].sort(), "one timed dispatch per kernel, under its name");
  assert.ok((y as unknown as TensorData).data.length === 4096);
});

test("destroyDevice() + initDevice(): pending kernels are dropped, never compiled for the next device; stale handles are never recorded", { skip }, async () => {
  const { destroyDevice, initDevice } = await import("../ts/device.js");
  const { B, calls } = recordingBackend();
  const E = engineOf(B);
  const x = B.fromArray(f32s(300), [300]);
  B.evaluate(B.exp(B.mul(x, x))); // queued behind a pending pipeline
  const key = { pipelinesTest: "stale" };
  const stale = E.kernel(key, () => sampleKernel("pipelines_test_stale", 1));
  destroyDevice();
  initDevice({ validation: true });
  assert.equal(calls.length, 0, "nothing compiled for the destroyed device");
  assert.throws(() => E.sched.record(stale, [], [1]), (e: Error & { code?: string }) => e.code === "ERR_HELIOS_INVALID_HANDLE" && /destroyed since/.test(e.message));
  const y = B.add(B.fromArray([1, 2], [2]), B.fromArray([3, 4], [2]));
  assert.deepEqual([...(y.data as Float32Array)], [4, 6]);
  assert.deepEqual(calls.map((c) => c.many), [true], "the new device's kernels compiled when needed");
  const fresh = E.kernel(key, () => sampleKernel("pipelines_test_stale", 1));
  assert.notEqual(fresh, stale, "the engine asked again on the new device");
});

test("a runtime without compileKernels compiles each kernel when an op first needs it", () => {
  const base = testRuntime();
  const names: string[] = [];
  const rt = new Proxy(base, {
    get(target, key, recv) {
      if (key === "compileKernels") return undefined;
      if (key === "compileKernel") return (d: string) => (names.push(JSON.parse(d).name), target.compileKernel(d));
      const v = Reflect.get(target, key, recv);
      return typeof v === "function" ? v.bind(target) : v;
    },
  }) as Runtime;
  const B = new HeliosBackend({ runtime: rt, validation: true });
  assert.equal(engineOf(B).sched.pipelines, null);
  const x = B.fromArray([1, 4, 9], [3]);
  const y = B.sqrt(x);
  B.evaluate(y);
  assert.equal(names.length, 1, "compiled at the op, before any read");
  assert.deepEqual([...(y.data as Float32Array)], [1, 2, 3]);
});

/** out[i] = in[i] + k for i < n; `subgroupSize` pins one (128 is not a size any device has). */
function sampleKernel(name: string, k: number, subgroupSize?: number) {
  const b = kernel(name, { workgroup: [64], ...(subgroupSize ? { subgroupSize } : {}) });
  const src = b.buffer("src", f32, "read");
  const out = b.buffer("out", f32, "write");
  const { n } = b.push({ n: u32 });
  const i = b.let(b.globalId.x, "i");
  b.if(i.lt(n), () => out.store(i, src.load(i).add(k)));
  return b.finish();
}

/** Records one dispatch of `sampleKernel` over `x` through the engine (`run`, as ops do). */
function addK(B: HeliosBackend, x: HeliosTensor, name: string, k: number, subgroupSize?: number): HeliosTensor {
  const E = engineOf(B);
  const out = E.alloc(x.shape, "f32");
  const n = x.shape[0];
  run(E, "addK", { pipelinesTest: name }, () => sampleKernel(name, k, subgroupSize), { n: "u32" }, { n }, [x], [out], [Math.ceil(n / 64), 1, 1]);
  return out;
}

test("a pipeline that fails to build when its dispatches need it: a coded error naming the kernel, the rest of the batch recorded", { skip }, () => {
  const { B } = recordingBackend();
  const x = B.fromArray([1, 2, 3], [3]) as HeliosTensor;
  const before = addK(B, x, "pipelines_test_ok_a", 10);
  const bad = addK(B, x, "pipelines_test_bad_sg", 1, 128); // assembles; the driver refuses the subgroup size
  const after = B.mul(addK(B, x, "pipelines_test_ok_b", 20), B.fromArray([2, 2, 2], [3]));
  const failed = (e: Error & { code?: string }) => /^ERR_HELIOS_/.test(e.code ?? "") && /kernel pipelines_test_bad_sg/.test(e.message) && /requiredSubgroupSize 128/.test(e.message);
  assert.throws(() => before.data, failed);
  assert.deepEqual([...(before.data as Float32Array)], [11, 12, 13], "a dispatch queued before it ran");
  assert.deepEqual([...(after.data as Float32Array)], [42, 44, 46], "a dispatch queued after it ran");
  void bad;
  // asked for again, the kernel fails again when its dispatch must reach the runtime
  const again = addK(B, x, "pipelines_test_bad_sg", 1, 128);
  assert.throws(() => again.data, failed);
  // and inside a capture, endCapture reports it and leaves no capture open
  B.beginCapture();
  addK(B, x, "pipelines_test_bad_sg", 1, 128);
  assert.throws(() => B.endCapture(), failed);
  B.beginCapture();
  const y = addK(B, x, "pipelines_test_ok_c", 5);
  const c = B.endCapture(y);
  B.replay(c);
  assert.deepEqual([...(y.data as Float32Array)], [6, 7, 8]);
  B.destroyCapture(c);
});

test("a lease out of device memory first lets the releases held behind pending compiles go", { skip }, () => {
  const base = testRuntime();
  let failNext = false;
  let compiles = 0;
  const rt = new Proxy(base, {
    get(target, key, recv) {
      if (key === "leaseBuffer") {
        return (bytes: number) => {
          if (failNext) {
            failNext = false;
            throw Object.assign(new Error("leaseBuffer: out of device memory"), { code: "ERR_HELIOS_OUT_OF_MEMORY" });
          }
          return target.leaseBuffer(bytes);
        };
      }
      if (key === "compileKernels") return (d: string[], t?: number) => (compiles++, (target.compileKernels as NonNullable<Runtime["compileKernels"]>)(d, t));
      const v = Reflect.get(target, key, recv);
      return typeof v === "function" ? v.bind(target) : v;
    },
  }) as Runtime;
  const B = new HeliosBackend({ runtime: rt, validation: true });
  const n = 40000;
  const x = B.fromArray(f32s(n), [n]);
  const y = B.exp(x);
  B.evaluate(y); // queued behind its compile
  B.releaseGpuTensor(y); // held behind it
  assert.equal(compiles, 0);
  failNext = true;
  const z = B.fromArray(new Float32Array(n + 4096).fill(2), [n + 4096]); // host-written: leased from the runtime
  assert.equal(compiles, 1, "the out-of-memory lease compiled the group and let the held release go");
  assert.equal((z.data as Float32Array)[n], 2);
  assert.throws(() => (failNext = true, B.fromArray([1], [1])), (e: Error & { code?: string }) => e.code === "ERR_HELIOS_OUT_OF_MEMORY", "nothing held: the error stands");
  failNext = false;
});
