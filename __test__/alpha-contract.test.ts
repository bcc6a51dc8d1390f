// What Alpha's own code relies on beyond the Backend interface (issue 23): reads of released
// tensors (its autograd releases the loss, then reads it), plain host tensors kept resident on
// the device (its AdamW state), and the upstream Helios calls it probes for.
import { test } from "node:test";
import assert from "node:assert/strict";
import { makeBackend, onNative } from "./backend-helpers.js";
import { Rng, randTensor, values } from "./harness.js";
import * as N from "./ref/nn.js";
import type { TensorData } from "../ts/types.js";
import { heliosRegistry } from "../ts/registry.js";
import { HeliosBackend } from "../ts/backend.js";
import { fromF16Array, toF16Array } from "../ts/f16.js";

const B = makeBackend();

/** Records `n` small products and sums that lease and release buffers of every small size. */
function churn(n: number, len: number): void {
  for (let i = 0; i < n; i++) {
    const a = B.fromArray(Array.from({ length: len }, (_, j) => j + i), [len]);
    const s = B.sum(B.mul(a, a));
    B.evaluate(s);
    B.releaseGpuTensor(s);
    B.releaseGpuTensor(a);
  }
}

test("a released scalar stays readable until the next round trip, even after more work", () => {
  const rng = new Rng(5);
  const x = randTensor(rng, [7, 13]);
  const xs = B.fromArray([...x.ref.data], [7, 13]);
  // the loss pattern: a pending scalar expression, released before it was ever computed
  const loss = B.scale(B.sum(B.mul(xs, xs)), 0.5);
  B.releaseGpuTensor(loss);
  churn(40, 1);
  let expect = 0;
  for (const v of x.ref.data) expect += v * v;
  assert.ok(Math.abs(values(loss)[0] - expect / 2) <= 1e-4 * Math.abs(expect), `loss ${values(loss)[0]} vs ${expect / 2}`);
  // read once: the value stays with the tensor
  B.syncGpu();
  churn(5, 1);
  assert.ok(Math.abs(values(loss)[0] - expect / 2) <= 1e-4 * Math.abs(expect));
});

test("a released tensor is a coded error to read once its buffer went back to the pool", () => {
  // a small one at the next host round trip
  const small = B.sum(B.fromArray([1, 2, 3], [3]));
  const other = B.sum(B.fromArray([4, 5, 6], [3]));
  B.releaseGpuTensor(small);
  B.releaseGpuTensor(other);
  churn(3, 1000);
  assert.equal(values(small)[0], 6); // a host read: released buffers go back to the pool after it
  assert.equal(values(small)[0], 6, "the value read stays with the tensor");
  assert.throws(() => values(other), (e: Error & { code?: string }) => e.code === "ERR_HELIOS_RELEASED" && /buffer has been reused/.test(e.message));
  const third = B.sum(B.fromArray([1, 1], [2]));
  B.releaseGpuTensor(third);
  B.syncGpu();
  assert.throws(() => third.data, (e: Error & { code?: string }) => e.code === "ERR_HELIOS_RELEASED");
  // a large one (over 64 KiB) at once: a step's activations are reused within its own batch
  const n = 40_000;
  const big = B.scale(B.fromArray(Array.from({ length: n }, (_, i) => i % 101), [n]), 2);
  B.releaseGpuTensor(big);
  assert.throws(() => values(big), (e: Error & { code?: string }) => e.code === "ERR_HELIOS_RELEASED");
});

test("small released buffers go back to the pool at the next round trip, large ones at once", () => {
  B.syncGpu();
  const live0 = B.gpuMemStats().liveAllocs;
  const ts = Array.from({ length: 10 }, (_, i) => B.full([1000], i));
  for (const t of ts) B.releaseGpuTensor(t);
  assert.equal(B.gpuMemStats().deferredReleases, 10);
  assert.equal(B.gpuMemStats().liveAllocs, live0 + 10);
  const big = B.full([100_000], 1);
  B.releaseGpuTensor(big);
  assert.equal(B.gpuMemStats().liveAllocs, live0 + 10);
  B.syncGpu();
  assert.equal(B.gpuMemStats().deferredReleases, 0);
  assert.equal(B.gpuMemStats().liveAllocs, live0);
});

test("released tensors are refused as op inputs", () => {
  const t = B.fromArray([1, 2], [2]);
  B.releaseGpuTensor(t);
  assert.throws(() => B.add(t, t), /add: tensor \[2\] was already released/);
});

test("AdamW state in plain host objects stays on the device across steps (no round trips)", () => {
  const rng = new Rng(17);
  const shape = [9, 37];
  const n = 9 * 37;
  const p0 = randTensor(rng, shape);
  const p = B.fromArray([...p0.ref.data], shape);
  const m: TensorData = { shape, dtype: "f32", data: new Float32Array(n) };
  const v: TensorData = { shape, dtype: "f32", data: new Float32Array(n) };
  const mArray = m.data as Float32Array; // Alpha's AdamW keeps this array too (stateDict)
  const rp = Float64Array.from(p0.ref.data), rm = new Float64Array(n), rv = new Float64Array(n);
  let b1 = 1, b2 = 1;
  const s0 = B.stats();
  for (let step = 0; step < 4; step++) {
    const g = randTensor(rng, shape);
    b1 *= 0.9;
    b2 *= 0.999;
    B.adamwStep!(p, g.td, m, v, 1e-2, 0.9, 0.999, 1e-8, 0.01, 1 - b1, 1 - b2);
    N.adamw(rp, g.ref.data, rm, rv, 1e-2, 0.9, 0.999, 1e-8, 0.01, 1 - b1, 1 - b2);
  }
  const s1 = B.stats();
  assert.equal(s1.readbacks - s0.readbacks, 0, "no readbacks during the steps");
  assert.equal(s1.uploads - s0.uploads, 2 + 4, "m and v uploaded once, each gradient once");
  assert.equal(s1.cpuFallbacks.hostInplace ?? 0, s0.cpuFallbacks.hostInplace ?? 0);
  const got = values(m);
  for (let i = 0; i < n; i++) assert.ok(Math.abs(got[i] - rm[i]) <= 1e-6 + 1e-4 * Math.abs(rm[i]), `m[${i}]`);
  // the read refreshed the caller's own array in place
  assert.equal(mArray[3], (m.data as Float32Array)[3]);
  assert.ok(mArray.some((x) => x !== 0));
  const gotV = values(v);
  for (let i = 0; i < n; i++) assert.ok(Math.abs(gotV[i] - rv[i]) <= 1e-7 + 1e-4 * Math.abs(rv[i]), `v[${i}]`);
  const gotP = values(p);
  for (let i = 0; i < n; i++) assert.ok(Math.abs(gotP[i] - rp[i]) <= 1e-5 + 1e-4 * Math.abs(rp[i]), `p[${i}]`);
});

test("host writes to a resident plain tensor are picked up by the next op", () => {
  const x: TensorData = { shape: [4], dtype: "f32", data: Float32Array.of(1, 2, 3, 4) };
  assert.deepEqual([...values(B.scale(x, 2))], [2, 4, 6, 8]);
  (x.data as Float32Array)[0] = 10; // through the array `data` hands out
  assert.deepEqual([...values(B.scale(x, 2))], [20, 4, 6, 8]);
  (x as { data: Float32Array }).data = Float32Array.of(5, 5, 5, 5); // a new array
  assert.deepEqual([...values(B.add(x, x))], [10, 10, 10, 10]);
  // an in-place op's result is what data reads, and release leaves `data` a plain property
  B.scaleInplace!(x, 3);
  B.releaseGpuTensor(x);
  const d = Object.getOwnPropertyDescriptor(x, "data");
  assert.ok(d && "value" in d && d.writable, "data is a plain property again");
  assert.deepEqual([...(x.data as Float32Array)], [15, 15, 15, 15]);
  // and a data loader refilling the array in place is seen after the release
  (x.data as Float32Array).fill(1);
  assert.deepEqual([...values(B.scale(x, 1))], [1, 1, 1, 1]);
});

test("a frozen plain tensor still works (uploaded per use)", () => {
  const x = Object.freeze({ shape: [3], dtype: "f32" as const, data: Float32Array.of(1, 2, 3) });
  assert.deepEqual([...values(B.add(x, x))], [2, 4, 6]);
  assert.deepEqual([...values(B.add(x, x))], [2, 4, 6]);
});

test("heliosRegistry lists and builds the helios backend", () => {
  assert.deepEqual(heliosRegistry.list(), ["helios"]);
  assert.ok(heliosRegistry.has("helios"));
  assert.throws(() => heliosRegistry.get("nope"), /Unknown implementation "nope"\. Available: helios/);
  if (onNative()) assert.ok(heliosRegistry.get("helios") instanceof HeliosBackend);
});

test("the upstream calls Alpha probes for: device info, memory, matmul and flash statistics", () => {
  const info = B.getDeviceInfo();
  assert.equal(info.minGpuSize, 0);
  assert.ok(Number.isInteger(info.workgroupSize) && info.workgroupSize > 0);
  B.setMinGpuSize(0);
  assert.throws(() => B.setMinGpuSize(-1), /setMinGpuSize: expects an integer >= 0, got -1/);

  const rng = new Rng(3);
  const a = B.fromArray([...randTensor(rng, [5, 7]).ref.data], [5, 7]);
  const b = B.fromArray([...randTensor(rng, [7, 3]).ref.data], [7, 3]);
  const before = B.getMatmulCoopStats().totalMatmulDispatches;
  B.evaluate(B.matmul(a, b));
  const st = B.getMatmulCoopStats();
  assert.equal(st.totalMatmulDispatches - before, 1);
  assert.equal(st.coopDispatches + st.simtDispatches, st.totalMatmulDispatches);
  assert.ok(st.coopHitRate >= 0 && st.coopHitRate <= 1);

  const mem = B.gpuMemStats();
  for (const k of ["bufferPoolEntries", "bufferPoolBytes", "outputPoolBytes", "deferredReleases", "pendingDestroys", "liveAllocs", "totalAllocs", "totalAllocMB"]) {
    assert.equal(typeof mem[k], "number", k);
  }
  assert.ok(mem.liveAllocs > 0);
  assert.match(B.poolBreakdown(3), /^(\d+\.\d+[KM]B×\d+)(, \d+\.\d+[KM]B×\d+){0,2}$/);
  assert.equal(B.coopMatmulPaused, false);
  B.coopMatmulPaused = true;
  assert.equal(B.coopMatmulPaused, true);
  B.coopMatmulPaused = false;

  const BH = 2, T = 5, D = 4;
  const q = randTensor(rng, [BH, T, D]).td, k = randTensor(rng, [BH, T, D]).td, v = randTensor(rng, [BH, T, D]).td;
  const plain = B.flashAttention(q, k, v, T, 0.5, 0);
  const coop = B.flashAttentionCoop(q, k, v, T, 0.5);
  assert.deepEqual([...values(coop.output)], [...values(plain.output)]);
  const dbg = B.getLastFlashDispatchDebug();
  assert.ok(dbg && dbg.BH === BH && dbg.T === T && dbg.D === D && typeof dbg.kernel === "string");
});

test("profileOp times an elementwise op on the GPU", { skip: !onNative() && "GPU timestamps need the native runtime" }, () => {
  const x = B.randn([4099]), y = B.randn([4099]);
  const r = B.profileOp(x, "add_vec4", { b: y, iters: 3 });
  assert.ok(r.gpuTimeUs > 0 && Number.isFinite(r.throughputGBps) && r.elementsPerSec > 0);
  assert.throws(() => B.profileOp(x, "add"), /profileOp: "add" needs opts\.b/);
  assert.throws(() => B.profileOp(x, "nope"), /profileOp: unknown kernel "nope"/);
});

test("Alpha's f16 activation cast stores f16: the round trip rounds, and frees the f32 source", () => {
  const rng = new Rng(23);
  const x = randTensor(rng, [6, 35]);
  const xs = B.scale(B.fromArray([...x.ref.data], [6, 35]), 1.0001); // pending f32
  const h = B.castDtype!(xs, "f16"); // castToF16
  const back = B.castDtype!(h, "f32"); // castToF32
  const got = values(back);
  const f16 = toF16Array(Array.from(x.ref.data, (v) => Math.fround(v * 1.0001)));
  const want = fromF16Array(f16);
  let rounded = 0;
  for (let i = 0; i < got.length; i++) {
    assert.equal(got[i], want[i], `element ${i}`);
    if (got[i] !== Math.fround(x.ref.data[i] * 1.0001)) rounded++;
  }
  assert.ok(rounded > 0, "some values changed by the f16 rounding");
  assert.ok(!(h as { expr?: unknown }).expr, "the f16 tensor is stored, not a pending expression over the f32 source");
});

test("clone then release (Alpha's tape): the clone takes the buffer over, no copy; clones stay independent", () => {
  const rng = new Rng(31);
  const x = randTensor(rng, [129, 257]); // over 64 KiB: released at once
  const g = B.scale(B.fromArray([...x.ref.data], [129, 257]), 3);
  B.evaluate(g);
  const before = B.stats().dispatches;
  const c = B.clone(g);
  B.releaseGpuTensor(g);
  B.evaluate(c);
  assert.equal(B.stats().dispatches - before, 0, "no copy kernel");
  const got = values(c);
  for (let i = 0; i < got.length; i += 97) assert.equal(got[i], Math.fround(Math.fround(x.ref.data[i]) * 3));
  // a clone whose source lives on is a real copy: in-place updates of either leave the other alone
  const a = B.fromArray([1, 2, 3], [3]);
  const ca = B.clone(a);
  B.addInplace!(a, B.fromArray([10, 10, 10], [3]));
  B.scaleInplace!(ca, 2);
  assert.deepEqual([...values(a)], [11, 12, 13]);
  assert.deepEqual([...values(ca)], [2, 4, 6]);
  const i32 = B.fromArray([16777217, -5], [2], "i32");
  assert.deepEqual([...values(B.clone(i32))], [16777217, -5], "i32 clones are exact");
});
