// The upstream raw API (ts/upstream-native.ts) under the validation layer: Alpha's
// scripts/gpu-raw-test.ts replayed on small odd sizes, every upstream elementwise kernel of
// getKernelSpirv against a float64 reference, and the misuse each call refuses.
import assert from "node:assert/strict";
import { test } from "node:test";
import { getKernelSpirv, getNative, ERR_UNKNOWN_KERNEL, type NativeAddon } from "../ts/upstream-native.js";
import { upstreamKernel, upstreamKernelNames, upstreamKey } from "../ts/kernels/upstream.js";
import { native } from "../ts/native.js";
import { assertThrowsCode, randomF32, rng, useDevice } from "./helpers.js";

useDevice();
const vk: NativeAddon = getNative();
const WG = 256;
/** A float no kernel writes here, to show which elements a dispatch left alone. */
const SENTINEL = -12345.5;
const SENTINEL_BITS = new Uint32Array(new Float32Array([SENTINEL]).buffer)[0];

function buffer(data: Float32Array): number {
  const h = vk.createBuffer(data.byteLength, 0);
  vk.uploadBuffer(h, data);
  return h;
}

function output(n: number): number {
  const h = vk.createBuffer(n * 4, 0);
  vk.fillBuffer(h, n * 4, SENTINEL_BITS);
  return h;
}

/** c[i] = a[i] + b[i] over the first 4 * floor(n / 4) elements (add_vec4's contract), the rest untouched. */
function assertAddVec4(got: Float32Array, a: Float32Array, b: Float32Array, what: string): void {
  const covered = (a.length >> 2) * 4;
  for (let i = 0; i < a.length; i++) {
    const want = i < covered ? Math.fround(a[i] + b[i]) : SENTINEL;
    if (got[i] !== want) assert.fail(`${what}: [${i}] = ${got[i]}, expected ${want}`);
  }
}

test("gpu-raw-test replay: dispatch and batches of add_vec4 on odd sizes", () => {
  const pipeline = vk.createPipeline(getKernelSpirv("add_vec4", WG), 3); // as the script: no push size
  const r = rng(7);
  for (const size of [5, 1003, 4099, 70001]) {
    const vec4Size = size >> 2;
    const groups = Math.ceil(vec4Size / WG);
    const push = new Float32Array([vec4Size, 0]);
    const dataA = randomF32(size, r), dataB = randomF32(size, r);
    const bufA = buffer(dataA), bufB = buffer(dataB), bufC = output(size);
    let tv = 0;
    for (let i = 0; i < 3; i++) tv = vk.dispatch(pipeline, [bufA, bufB, bufC], groups, 1, 1, push);
    vk.waitTimeline(tv);
    assert.ok(vk.getCompleted() >= tv);
    assertAddVec4(vk.readBuffer(bufC), dataA, dataB, `dispatch, size ${size}`);

    const outBufs = Array.from({ length: 5 }, () => output(size));
    for (let b = 0; b < 2; b++) {
      vk.batchBegin();
      for (const out of outBufs) vk.batchDispatch(pipeline, [bufA, bufB, out], groups, 1, 1, push);
      const value = vk.batchSubmit();
      vk.waitTimeline(value);
      assert.ok(value > tv, "each submit signals a later timeline value");
      tv = value;
    }
    outBufs.forEach((h, i) => assertAddVec4(vk.readBuffer(h), dataA, dataB, `batch output ${i}, size ${size}`));
    for (const h of [bufA, bufB, bufC, ...outBufs]) vk.destroyBuffer(h);
  }
});

type Ref = (x: number[], p: number[]) => number;
const tanh = (x: number) => Math.tanh(Math.max(-15, Math.min(15, x)));
const sig = (x: number) => 1 / (1 + Math.exp(-x));
const geluRef = (x: number) => 0.5 * x * (1 + Math.tanh(0.7978845608028654 * (x + 0.044715 * x ** 3)));
const geluGradRef = (x: number) => {
  const t = Math.tanh(0.7978845608028654 * (x + 0.044715 * x ** 3));
  return 0.5 * (1 + t) + 0.5 * x * (1 - t * t) * 0.7978845608028654 * (1 + 3 * 0.044715 * x * x);
};

/** float64 references and push parameters (after len) of every upstream op. */
const REFS: Record<string, { fn: Ref; params: number[]; positive?: boolean }> = {
  add: { fn: ([a, b]) => a + b, params: [0] },
  sub: { fn: ([a, b]) => a - b, params: [0] },
  mul: { fn: ([a, b]) => a * b, params: [0] },
  div: { fn: ([a, b]) => a / b, params: [0] },
  neg: { fn: ([a]) => -a, params: [0] },
  scale: { fn: ([a], [s]) => a * s, params: [-1.75] },
  exp: { fn: ([a]) => Math.exp(a), params: [0] },
  log: { fn: ([a]) => Math.log(a), params: [0], positive: true },
  sqrt: { fn: ([a]) => Math.sqrt(a), params: [0], positive: true },
  relu: { fn: ([a]) => Math.max(a, 0), params: [0] },
  gelu: { fn: ([a]) => geluRef(a), params: [0] },
  clamp_min: { fn: ([a], [s]) => Math.max(a, s), params: [0.5] },
  clamp: { fn: ([a], [lo, hi]) => Math.min(Math.max(a, lo), hi), params: [-1, 2] },
  gelu_backward: { fn: ([x, g]) => g * geluGradRef(x), params: [0] },
  silu_backward: { fn: ([x, g]) => g * sig(x) * (1 + x * (1 - sig(x))), params: [0] },
  relu_backward: { fn: ([x, g]) => (x > 0 ? g : 0), params: [0] },
  clamp_backward: { fn: ([x, g], [lo, hi]) => (x > lo && x < hi ? g : 0), params: [-1, 2] },
  softcap_forward: { fn: ([x], [cap]) => tanh(x / cap) * cap, params: [1.5] },
  softcap_backward: { fn: ([g, x], [cap]) => g * (1 - tanh(x / cap) ** 2), params: [1.5] },
};

test("every upstream elementwise kernel matches a float64 reference (odd n, wg 64)", () => {
  const n = 1001, wg = 64;
  const r = rng(11);
  const failures: string[] = [];
  for (const name of upstreamKernelNames()) {
    const key = upstreamKey(name)!;
    const ref = REFS[key.op];
    assert.ok(ref, `no reference for ${key.op}`);
    const inputs = upstreamKernel(key, wg).bindings.length - 1;
    const data = Array.from({ length: inputs }, () => {
      const d = randomF32(n, r);
      return ref.positive ? d.map(Math.abs) : d;
    });
    const ins = data.map(buffer);
    const out = output(n);
    const len = key.form === "" ? n : n >> 2; // elements, or vectors
    const covered = key.form === "" ? n : len * 4;
    const threads = key.form === "_vec4x2" ? Math.ceil(len / 2) : len;
    const pipeline = vk.createPipeline(getKernelSpirv(name, wg), inputs + 1);
    const push = new Float32Array([len, ...ref.params]);
    vk.waitTimeline(vk.dispatch(pipeline, [...ins, out], Math.ceil(threads / wg), 1, 1, push));
    const got = vk.readBuffer(out);
    for (let i = 0; i < n; i++) {
      const want = i < covered ? ref.fn(data.map((d) => d[i]), ref.params) : SENTINEL;
      const err = Math.abs(got[i] - want) / Math.max(1, Math.abs(want));
      // f32 with cancellation: gelu_backward sums terms near 1 to ~1e-3, times g up to 4
      if (!(err <= 1e-5)) {
        failures.push(`${name}: [${i}] = ${got[i]}, expected ${want}`);
        break;
      }
    }
    for (const h of [...ins, out]) vk.destroyBuffer(h);
  }
  assert.deepEqual(failures, []);
});

test("getKernelSpirv: a cached Uint32Array per (name, wgSize), SPIR-V with the upstream layout", () => {
  const words = getKernelSpirv("add_vec4", WG);
  assert.ok(words instanceof Uint32Array);
  assert.equal(words[0], 0x07230203);
  assert.equal(getKernelSpirv("add_vec4", WG), words);
  assert.equal(getKernelSpirv("add_vec4"), words, "wgSize defaults to 256");
  assert.notEqual(getKernelSpirv("add_vec4", 64), words);
  const layout = native.kernelLayout(upstreamKernel(upstreamKey("add_vec4")!, WG));
  assert.deepEqual(layout.bindings, ["read", "read", "write"]);
  assert.equal(layout.pushConstantBytes, 8, "[len, scalar] as f32");
  assert.equal(native.kernelLayout(upstreamKernel(upstreamKey("clamp")!, WG)).pushConstantBytes, 12, "[len, lo, hi]");
  for (const name of ["add", "sub", "mul", "div", "add_vec4", "sub_vec4", "mul_vec4", "div_vec4", "scale", "neg"]) {
    assert.ok(upstreamKernelNames().includes(name), `${name} is provided`);
  }
});

test("SPIR-V that getKernelSpirv did not make: readwrite bindings, push size from the caller", () => {
  const foreign = native.kernelSpirv(upstreamKernel(upstreamKey("sub")!, 128));
  assertThrowsCode(() => vk.createPipeline(foreign, 3), "ERR_HELIOS_INVALID_KERNEL", { mentions: "push" });
  const pipeline = vk.createPipeline(foreign, 3, 8);
  const r = rng(3);
  const a = randomF32(300, r), b = randomF32(300, r);
  const bufA = buffer(a), bufB = buffer(b), bufC = output(300);
  vk.waitTimeline(vk.dispatch(pipeline, [bufA, bufB, bufC], 3, 1, 1, new Float32Array([300, 0])));
  assert.deepEqual([...vk.readBuffer(bufC)], [...a].map((x, i) => Math.fround(x - b[i])));
  // a copy of getKernelSpirv's words is still recognized (push size from the kernel)
  vk.createPipeline(Uint32Array.from(getKernelSpirv("mul", 128)), 3);
  for (const h of [bufA, bufB, bufC]) vk.destroyBuffer(h);
});

test("gpuTime, waitIdle and initDevice", () => {
  const info = vk.initDevice();
  assert.equal(typeof info.deviceName, "string");
  assert.equal(info.hasDGC, false);
  assert.equal(typeof info.f16Supported, "boolean");
  const pipeline = vk.createPipeline(getKernelSpirv("scale", WG), 2);
  const a = buffer(randomF32(4096, rng(5))), c = output(4096);
  const us = vk.gpuTime(pipeline, [a, c], 16, 1, 1, new Float32Array([4096, 2]), 4, 2);
  assert.ok(Number.isFinite(us) && us > 0, `gpuTime ${us} µs`);
  vk.uploadBuffer(a, new Float32Array(4096).fill(3));
  vk.dispatch(pipeline, [a, c], 16, 1, 1, new Float32Array([4096, 2]));
  vk.waitIdle();
  assert.deepEqual(new Set(vk.readBuffer(c)), new Set([6]));
  vk.destroyBuffer(a);
  vk.destroyBuffer(c);
});

test("members without meaning in Helios are absent, not no-ops", () => {
  for (const m of ["batchDispatchMany", "batchExecuteAll", "batchExecuteAllDGC", "dgcSetup", "dgcInfo"] as const) {
    assert.equal(vk[m], undefined, m);
  }
});

test("misuse is refused with a code and leaves the API usable", () => {
  const unknown = (name: string) => (e: unknown) => {
    assert.equal((e as { code?: string }).code, ERR_UNKNOWN_KERNEL);
    assert.match((e as Error).message, new RegExp(`"${name}"`));
    return true;
  };
  assert.throws(() => getKernelSpirv("softmax", WG), unknown("softmax"));
  assert.throws(() => getKernelSpirv("add_vec8", WG), unknown("add_vec8"));
  assertThrowsCode(() => getKernelSpirv("add", 0), "ERR_HELIOS_INVALID_ARGUMENT", { call: "getKernelSpirv" });
  assertThrowsCode(() => getKernelSpirv("add", 1 << 20), "ERR_HELIOS_INVALID_KERNEL");

  const spirv = getKernelSpirv("add_vec4", WG);
  assertThrowsCode(() => vk.createPipeline(spirv, 2), "ERR_HELIOS_INVALID_ARGUMENT", { mentions: "3 bindings" });
  assertThrowsCode(() => vk.createPipeline([1, 2, 3] as unknown as Uint32Array, 3), "ERR_HELIOS_INVALID_ARGUMENT");
  const pipeline = vk.createPipeline(spirv, 3);
  const a = buffer(randomF32(64, rng(9))), b = buffer(randomF32(64, rng(10))), c = output(64);
  const push = new Float32Array([16, 0]);
  assertThrowsCode(() => vk.dispatch(pipeline, [a, b, c], 1, 1, 1, new Float32Array([16])), "ERR_HELIOS_INVALID_ARGUMENT", { mentions: 8 });
  assertThrowsCode(() => vk.dispatch(pipeline, [a, b, c], 1), "ERR_HELIOS_INVALID_ARGUMENT", { call: "dispatch" });
  assertThrowsCode(() => vk.batchDispatch(pipeline, [a, b, c], 1, 1, 1, push), "ERR_HELIOS_INVALID_ARGUMENT", { call: "batchDispatch" });
  assertThrowsCode(() => vk.batchSubmit(), "ERR_HELIOS_INVALID_ARGUMENT", { call: "batchSubmit" });
  assertThrowsCode(() => vk.fillBuffer(c, 256, 1.5), "ERR_HELIOS_INVALID_ARGUMENT", { call: "fillBuffer" });
  assertThrowsCode(() => vk.uploadBuffer(c, new Float32Array(65)), "ERR_HELIOS_OUT_OF_RANGE");

  vk.batchBegin();
  assertThrowsCode(() => vk.batchBegin(), "ERR_HELIOS_INVALID_ARGUMENT", { call: "batchBegin" });
  assertThrowsCode(() => vk.dispatch(pipeline, [a, b, c], 1, 1, 1, push), "ERR_HELIOS_INVALID_ARGUMENT", { call: "dispatch" });
  vk.batchDispatch(pipeline, [a, b, c], 1, 1, 1, push);
  vk.waitTimeline(vk.batchSubmit());

  const stale = vk.createBuffer(256, 0);
  vk.destroyBuffer(stale);
  assertThrowsCode(() => vk.dispatch(pipeline, [a, b, stale], 1, 1, 1, push), "ERR_HELIOS_INVALID_HANDLE", { handle: stale });
  assertThrowsCode(() => vk.destroyBuffer(stale), "ERR_HELIOS_INVALID_HANDLE");
  // the refused dispatch left no batch open
  vk.waitTimeline(vk.dispatch(pipeline, [a, b, c], 1, 1, 1, push));
  assert.equal(vk.readBuffer(c)[0], Math.fround(vk.readBuffer(a)[0] + vk.readBuffer(b)[0]));
  for (const h of [a, b, c]) vk.destroyBuffer(h);
});

test("destroy releases the device; getNative initializes it again", () => {
  const h = vk.createBuffer(64, 0);
  vk.destroy();
  assertThrowsCode(() => vk.readBuffer(h), ["ERR_HELIOS_DESTROYED", "ERR_HELIOS_NO_DEVICE", "ERR_HELIOS_INVALID_HANDLE"]);
  const again = getNative();
  assert.equal(again, vk);
  const pipeline = again.createPipeline(getKernelSpirv("neg", WG), 2);
  const a = buffer(new Float32Array([1, -2, 3])), c = output(3);
  again.waitTimeline(again.dispatch(pipeline, [a, c], 1, 1, 1, new Float32Array([3, 0])));
  assert.deepEqual([...again.readBuffer(c)], [-1, 2, -3]);
  again.destroyBuffer(a);
  again.destroyBuffer(c);
});
