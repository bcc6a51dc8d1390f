// Execution model: lazy data, batching and flush, leased buffers returned by
// releaseGpuTensor and by garbage collection, pool peak flat over a fixed loop.
import { test } from "node:test";
import assert from "node:assert/strict";
import { makeBackend, onNative } from "./backend-helpers.js";
import { values } from "./harness.js";
import { HeliosTensor } from "../ts/tensor.js";
import type { TensorData } from "../ts/types.js";

test("ops return at once; data reads back lazily and only once", () => {
  const B = makeBackend({ batchSize: 1000, submitEarlyUs: 0 });
  const s0 = B.stats();
  const x = B.fromArray([1, 2, 3, 4], [2, 2]);
  const y = B.softmax(x);
  assert.ok(y instanceof HeliosTensor);
  assert.equal(B.stats().batches, s0.batches, "nothing submitted yet");
  void y.data;
  void y.data;
  const s1 = B.stats();
  assert.equal(s1.readbacks - s0.readbacks, 1);
  assert.ok(s1.batches > s0.batches, "reading submitted the batch");
});

test("a batch is submitted at the size threshold and on flush()", () => {
  const B = makeBackend({ batchSize: 4, fusion: false, submitEarlyUs: 0 });
  const x = B.fromArray([1, 2], [2]);
  const b0 = B.stats().batches;
  let t = x;
  for (let i = 0; i < 8; i++) t = B.scale(t, 1.5);
  assert.equal(B.stats().batches - b0, 2);
  B.scale(t, 2);
  B.flush();
  assert.equal(B.stats().batches - b0, 3);
  assert.ok(B.gpuOpsThisStep >= 9);
  B.resetStepOps();
  assert.equal(B.gpuOpsThisStep, 0);
});

test("released tensors return buffers by the next round trip and cannot be op inputs", () => {
  const B = makeBackend();
  const x = B.randn([64]);
  const leased = B.stats().pool.leasedBytes;
  B.releaseGpuTensor(x);
  assert.throws(() => B.exp(x), /exp: tensor \[64\] was already released/);
  B.syncGpu();
  assert.equal(B.stats().pool.leasedBytes, leased - 256);
  B.releaseGpuTensor(x); // idempotent
});

test("pool peak stays flat over a 1000-step fixed loop", () => {
  const B = makeBackend();
  const w = B.randn([8, 8]);
  // The interpreter (mock runtime) runs every invocation on the CPU: keep its loop light.
  const heavy = onNative();
  const step = () => {
    const x = B.randn([4, 8]);
    const row = B.slice(w, [0, 0], [1, 8]);
    const z = heavy ? B.matmul(x, w) : B.mul(x, row);
    const h = B.gelu(z);
    const sq = B.mul(h, h);
    const loss = heavy ? B.mean(sq) : B.sum(sq, 0);
    void loss.data;
    for (const t of [x, row, z, h, sq, loss]) B.releaseGpuTensor(t);
    B.flush();
  };
  for (let i = 0; i < 20; i++) step();
  const peak = B.stats().pool.peakBytes;
  for (let i = 0; i < 1000; i++) step();
  assert.equal(B.stats().pool.peakBytes, peak, "peak bytes grew");
});

test("garbage-collected tensors return their buffers (FinalizationRegistry)", async (t) => {
  const gc = (globalThis as { gc?: () => void }).gc;
  if (!gc) {
    t.skip("run node with --expose-gc");
    return;
  }
  const B = makeBackend();
  const base = B.stats().pool.leasedBytes;
  (() => {
    for (let i = 0; i < 50; i++) void B.exp(B.randn([128])).data;
  })();
  for (let i = 0; i < 10 && B.stats().pool.leasedBytes > base; i++) {
    gc();
    await new Promise((r) => setTimeout(r, 10));
  }
  assert.equal(B.stats().pool.leasedBytes, base);
});

test("view tensors (reshape) share storage and keep it alive", () => {
  const B = makeBackend();
  const x = B.fromArray([1, 2, 3, 4, 5, 6], [2, 3]);
  const y = B.exp(x);
  const r = B.reshape(y, [3, 2]);
  B.releaseGpuTensor(y);
  assert.deepEqual([...values(r)].map((v) => Math.round(Math.log(v))), [1, 2, 3, 4, 5, 6]);
});

test("getDeviceInfo and smokeTest", () => {
  const B = makeBackend();
  assert.equal(typeof B.getDeviceInfo().deviceName, "string");
  assert.equal(B.smokeTest(2048).verified, true);
});

test("grids past 65535 workgroups fold into y and cover every row exactly once", async () => {
  const { grid1d, gridRows } = await import("../ts/kernels/common.js");
  for (const n of [1, 65535, 65536, 65535 * 3 + 7, 1 << 24]) {
    const [x, y] = gridRows(n);
    assert.ok(x <= 65535 && y <= 65535 && x * y >= n && x * (y - 1) < n, `rows ${n}: [${x}, ${y}]`);
    const [ex, ey] = grid1d(n * 256);
    assert.ok(ex <= 65535 && ex * ey * 256 >= n * 256, `elements ${n * 256}`);
  }
});

test("empty tensors flow through every op family without a dispatch error", () => {
  const B = makeBackend();
  const e = B.zeros([0, 4]);
  const checks: [string, () => TensorData][] = [
    ["sum axis 0", () => B.sum(e, 0)],
    ["sum axis 1", () => B.sum(e, 1)],
    ["mean all", () => B.mean(B.zeros([0]))],
    ["softmax", () => B.softmax(e)],
    ["layerNorm", () => B.layerNorm(e, B.ones([4]), B.zeros([4]), 1e-5)],
    ["matmul", () => B.matmul(e, B.ones([4, 3]))],
    ["matmul k=0", () => B.matmul(B.ones([2, 0]), B.ones([0, 3]))],
    ["transpose", () => B.transpose(e, 0, 1)],
    ["slice", () => B.slice(B.ones([3, 4]), [1, 0], [1, 4])],
    ["cat", () => B.cat([e, B.ones([2, 4])], 0)],
    ["embedding", () => B.embedding(B.ones([5, 4]), { shape: [0], dtype: "i32", data: new Int32Array(0) })],
    ["gelu", () => B.gelu(e)],
    ["sumOfSquares", () => B.sumOfSquares!(e)],
    ["checkFinite", () => B.checkFinite!(e)],
    ["dropoutMask", () => B.dropoutMask!([0, 3], 1, 2, 0.5)],
  ];
  for (const [name, f] of checks) {
    try {
      void f().data;
    } catch (err) {
      assert.fail(`${name}: ${(err as Error).message}`);
    }
  }
  assert.deepEqual([...values(B.sum(e, 0))], [0, 0, 0, 0]);
  assert.deepEqual([...values(B.matmul(B.ones([2, 0]), B.ones([0, 3])))], [0, 0, 0, 0, 0, 0]);
  assert.deepEqual([...values(B.cat([e, B.ones([2, 4])], 0))], [1, 1, 1, 1, 1, 1, 1, 1]);
});

test("a backend keeps working across destroyDevice() + initDevice()", async (t) => {
  if (!onNative()) {
    t.skip("needs the native runtime");
    return;
  }
  const { destroyDevice, initDevice } = await import("../ts/device.js");
  const B = makeBackend();
  assert.deepEqual([...values(B.add(B.fromArray([1], [1]), B.fromArray([2], [1])))], [3]);
  destroyDevice();
  initDevice({ validation: true });
  assert.deepEqual([...values(B.add(B.fromArray([1], [1]), B.fromArray([4], [1])))], [5]);
});

test("tensors from before destroyDevice() fail with a code instead of reading the next device's buffers (issue 24 item 2)", async (t) => {
  if (!onNative()) {
    t.skip("needs the native runtime");
    return;
  }
  const { destroyDevice, initDevice } = await import("../ts/device.js");
  const B = makeBackend();
  const pending = B.exp(B.fromArray([0, 1], [2])); // a fused expression, not yet run
  const done = B.matmul(B.fromArray([1, 2], [1, 2]), B.fromArray([3, 4], [2, 1])); // recorded, never read
  destroyDevice();
  initDevice({ validation: true });
  const B2 = makeBackend(); // shares the runtime's scheduler with B, which still queues `done`
  const fresh = B2.add(B2.fromArray([10, 20], [2]), B2.fromArray([30, 40], [2]));
  const stale = (what: string, f: () => unknown) =>
    assert.throws(f, (err: Error & { code?: string }) => {
      assert.equal(err.code, "ERR_HELIOS_INVALID_HANDLE", `${what}: ${err.message}`);
      assert.match(err.message, /device instance/, what);
      return true;
    }, what);
  stale("reading a recorded tensor", () => values(done));
  stale("running a pending expression", () => values(pending));
  stale("an old tensor in an op of the old backend", () => values(B.sum(done)));
  stale("an old tensor in an op of a new backend", () => values(B2.add(done, done)));
  assert.deepEqual([...values(fresh)], [40, 60]);
  assert.deepEqual([...values(B.add(B.fromArray([1], [1]), B.fromArray([4], [1])))], [5], "the old backend still runs new work");
});

test("backends on one runtime share tensors and one batch", () => {
  const A = makeBackend({ fusion: true });
  const U = makeBackend({ fusion: false });
  const x = A.exp(A.fromArray([0, 1], [2])); // pending in A
  const y = U.add(x, U.fromArray([1, 1], [2])); // recorded by U
  const v = values(y);
  assert.ok(Math.abs(v[0] - 2) < 1e-6 && Math.abs(v[1] - (Math.E + 1)) < 1e-5, `${[...v]}`);
});

test("folded grids on the device: 17M-element add, 70001-row softmax and layerNorm", (t) => {
  if (!onNative()) {
    t.skip("too large for the CPU interpreter");
    return;
  }
  const B = makeBackend();
  const n = 17_000_001; // odd: scalar path, past 65535 * 256 threads
  const a = new Float32Array(n);
  for (let i = 0; i < n; i++) a[i] = (i % 1000) * 0.5;
  const c = B.add({ shape: [n], dtype: "f32", data: a }, { shape: [n], dtype: "f32", data: a }).data as Float32Array;
  for (let i = 0; i < n; i += 9973) assert.equal(c[i], a[i] * 2, `add element ${i}`);
  assert.equal(c[n - 1], a[n - 1] * 2);
  const R = 70001, C = 3;
  const s = new Float32Array(R * C);
  for (let i = 0; i < s.length; i++) s[i] = (i % 7) * 0.3;
  const sm = B.softmax({ shape: [R, C], dtype: "f32", data: s }).data as Float32Array;
  const ln = B.layerNorm({ shape: [R, C], dtype: "f32", data: s }, B.ones([C]), B.zeros([C]), 1e-5).data as Float32Array;
  for (const r of [0, 65534, 65535, 65536, R - 1]) {
    const sum = sm[r * C] + sm[r * C + 1] + sm[r * C + 2];
    assert.ok(Math.abs(sum - 1) < 1e-6, `softmax row ${r} sums to ${sum}`);
    const mean = ln[r * C] + ln[r * C + 1] + ln[r * C + 2];
    assert.ok(Math.abs(mean) < 1e-5, `layerNorm row ${r} mean ${mean}`);
  }
});
