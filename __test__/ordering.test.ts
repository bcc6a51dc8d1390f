// Program order on one stream: barriers between dependent dispatches (RAW, WAW, WAR),
// and uploads, fills, copies and reads interleaved with open and in-flight batches.
import assert from "node:assert/strict";
import { test } from "node:test";
import {
  assertArrayEqual, bufferWith, groupsFor, packDispatches, pipeline, randomF32, randomU32, readF32, readU32,
  assertSlowResult, forcedStaging, recordSlow, rng, rt, runBatch, slowShapeFor, useDevice,
} from "./helpers.js";
import { push } from "./kernels/index.js";

const info = useDevice();

const plus = (u: Uint32Array, k: number) => u.map((v) => (v + k) >>> 0);
const incPush = (n: number) => push([["u", n]]);

test("1000 dependent dispatches in one batch see each other's writes (x + 1000)", () => {
  const n = 4099;
  const u = randomU32(n, rng(201));
  const h = bufferWith(u);
  runBatch(() => {
    for (let i = 0; i < 1000; i++) rt.recordDispatch(pipeline("inc"), [h], [groupsFor(n)], incPush(n));
  });
  assertArrayEqual(readU32(h), plus(u, 1000), "after 1000 incs");
  rt.destroyBuffer(h);
});

test("1000 dependent dispatches packed into one recordDispatchMany (x + 1000)", () => {
  const n = 515;
  const u = randomU32(n, rng(202));
  const h = bufferWith(u);
  const entry = { pipeline: pipeline("inc"), buffers: [h], groups: [groupsFor(n)] as [number], push: Uint32Array.of(n) };
  runBatch(() => rt.recordDispatchMany(packDispatches(Array(1000).fill(entry)), 1000));
  assertArrayEqual(readU32(h), plus(u, 1000), "after 1000 packed incs");
  rt.destroyBuffer(h);
});

test("write-after-read: ping-pong through two buffers keeps program order", () => {
  // Dispatch k reads A and writes B; dispatch k+1 reads B and writes A while A was just
  // read: without a WAR barrier the write could land before the read.
  const n = 2000;
  const x = new Float32Array(n).map((_, i) => (i % 97) + 1);
  const ha = bufferWith(x);
  const hb = bufferWith(randomF32(n, rng(203)));
  const step = push([["u", n], ["f", 1], ["f", 1]]);
  runBatch(() => {
    for (let k = 0; k < 500; k++) {
      rt.recordDispatch(pipeline("axpb"), [ha, hb], [groupsFor(n)], step);
      rt.recordDispatch(pipeline("axpb"), [hb, ha], [groupsFor(n)], step);
    }
  });
  assertArrayEqual(readF32(ha), x.map((v) => v + 1000), "A after 1000 ping-pong steps");
  assertArrayEqual(readF32(hb), x.map((v) => v + 999), "B after 1000 ping-pong steps");
});

test("write-after-read: a copy out of A is not disturbed by the next dispatch writing A", () => {
  const n = 3333;
  const u = randomU32(n, rng(204));
  const ha = bufferWith(u);
  const hb = bufferWith(randomU32(n, rng(205)));
  const hc = bufferWith(randomU32(n, rng(206)));
  runBatch(() => {
    rt.recordDispatch(pipeline("copy"), [ha, hb], [groupsFor(n)], incPush(n)); // reads A
    rt.recordDispatch(pipeline("inc"), [ha], [groupsFor(n)], incPush(n)); // then writes A
    rt.recordDispatch(pipeline("copy"), [hc, ha], [groupsFor(n)], incPush(n)); // then overwrites A
  });
  assertArrayEqual(readU32(hb), u, "B = A before the writes");
  assertArrayEqual(readU32(ha), readU32(hc), "A = C (write-after-write)");
});

test("an upload inside an open batch is seen by later dispatches only", () => {
  const n = 1001;
  const r = rng(207);
  const [u0, u1, u2] = [randomU32(n, r), randomU32(n, r), randomU32(n, r)];
  const hx = bufferWith(u0);
  const outs = [0, 1, 2].map(() => bufferWith(randomU32(n, r)));
  runBatch(() => {
    rt.recordDispatch(pipeline("copy"), [hx, outs[0]], [groupsFor(n)], incPush(n));
    rt.uploadBuffer(hx, u1);
    rt.recordDispatch(pipeline("copy"), [hx, outs[1]], [groupsFor(n)], incPush(n));
    rt.uploadBuffer(hx, u2.subarray(100, 300), 400); // partial, at a byte offset
    rt.recordDispatch(pipeline("copy"), [hx, outs[2]], [groupsFor(n)], incPush(n));
  });
  const partial = u1.slice();
  partial.set(u2.subarray(100, 300), 100);
  assertArrayEqual(readU32(outs[0]), u0, "before the first upload");
  assertArrayEqual(readU32(outs[1]), u1, "after the first upload");
  assertArrayEqual(readU32(outs[2]), partial, "after the partial upload");
});

test("an upload after a submitted, still-running batch does not reach that batch", () => {
  const shape = slowShapeFor(300);
  const r = rng(208);
  const u0 = randomU32(shape.n, r);
  const u1 = randomU32(shape.n, r);
  const hx = bufferWith(u0);
  const snapshot = bufferWith(randomU32(shape.n, r));
  rt.beginBatch();
  recordSlow(hx, shape);
  rt.recordDispatch(pipeline("copy"), [hx, snapshot], [groupsFor(shape.n)], incPush(shape.n));
  const v = rt.submitBatch();
  rt.uploadBuffer(hx, u1); // must be ordered after the slow dispatch and the copy
  rt.waitTimeline(v);
  assertArrayEqual(readU32(hx), u1, "x = the upload, which came last");
  assertSlowResult(readU32(snapshot), u0, shape.iters, "the batch saw the old x");
});

test("readBuffer returns everything recorded before it, even in an open batch", () => {
  const n = 640;
  const u = randomU32(n, rng(209));
  const h = bufferWith(u);
  rt.beginBatch();
  rt.recordDispatch(pipeline("inc"), [h], [groupsFor(n)], incPush(n));
  assertArrayEqual(readU32(h), plus(u, 1), "read inside the open batch");
  rt.recordDispatch(pipeline("inc"), [h], [groupsFor(n)], incPush(n));
  assertArrayEqual(readU32(h, 40, 400), plus(u, 2).subarray(10, 110), "ranged read, still in the batch");
  rt.recordDispatch(pipeline("inc"), [h], [groupsFor(n)], incPush(n));
  rt.waitTimeline(rt.submitBatch());
  assertArrayEqual(readU32(h), plus(u, 3), "after the batch");
});

test("readBuffer waits for in-flight batches that write the buffer", () => {
  const shape = slowShapeFor(200);
  const u = randomU32(shape.n, rng(210));
  const h = bufferWith(u);
  rt.beginBatch();
  recordSlow(h, shape);
  rt.submitBatch();
  assertSlowResult(readU32(h), u, shape.iters, "read right after submit");
});

test("readBufferAsync resolves to a snapshot at the point it was called", async () => {
  const n = 300;
  const r = rng(211);
  const u = randomU32(n, r);
  const replacement = randomU32(n, r);
  const h = bufferWith(u);
  rt.beginBatch();
  rt.recordDispatch(pipeline("inc"), [h], [groupsFor(n)], incPush(n));
  const afterOne = rt.readBufferAsync(h);
  rt.recordDispatch(pipeline("inc"), [h], [groupsFor(n)], incPush(n));
  const v = rt.submitBatch();
  const afterTwo = rt.readBufferAsync(h, 8, 16);
  rt.uploadBuffer(h, replacement);
  const afterUpload = rt.readBufferAsync(h);
  assertArrayEqual(new Uint32Array(await afterOne), plus(u, 1), "first snapshot");
  assertArrayEqual(new Uint32Array(await afterTwo), plus(u, 2).subarray(2, 6), "second (ranged) snapshot");
  assertArrayEqual(new Uint32Array(await afterUpload), replacement, "snapshot after the upload");
  assert.ok(rt.getCompleted() >= v);
});

test("readBufferAsync does not block the JS thread while the GPU works", async () => {
  const shape = slowShapeFor(300);
  const u = randomU32(shape.n, rng(212));
  const h = bufferWith(u);
  rt.beginBatch();
  recordSlow(h, shape);
  rt.submitBatch();
  let ticks = 0;
  const timer = setInterval(() => ticks++, 5);
  const data = await rt.readBufferAsync(h);
  clearInterval(timer);
  assertSlowResult(new Uint32Array(data), u, shape.iters, "async read");
  assert.ok(ticks > 0, "the event loop should keep running during readBufferAsync");
});

test("fillBuffer and copyBuffer take their place in program order", () => {
  const n = 256;
  const r = rng(213);
  const u = randomU32(n, r);
  const ha = bufferWith(u);
  const hb = bufferWith(randomU32(n, r));
  runBatch(() => {
    rt.recordDispatch(pipeline("inc"), [ha], [groupsFor(n)], incPush(n));
    rt.copyBuffer(ha, hb, 0, 0, 4 * n); // B = u + 1
    rt.fillBuffer(ha, 0xdeadbeef, 64, 128); // A[16..48) = pattern
    rt.recordDispatch(pipeline("inc"), [ha], [groupsFor(n)], incPush(n));
    rt.copyBuffer(ha, hb, 0, 512, 512); // B[128..256) = A[0..128)
  });
  const a = plus(u, 2);
  a.fill((0xdeadbeef + 1) >>> 0, 16, 48);
  const b = plus(u, 1);
  b.set(a.subarray(0, 128), 128);
  assertArrayEqual(readU32(ha), a, "A");
  assertArrayEqual(readU32(hb), b, "B");
});

test("batches in flight run in submission order; waiting on the last covers the rest", () => {
  const n = 1024;
  const u = randomU32(n, rng(214));
  const h = bufferWith(u);
  const out = bufferWith(randomU32(n * 8, rng(215)));
  const values: number[] = [];
  for (let k = 0; k < 8; k++) {
    rt.beginBatch();
    rt.recordDispatch(pipeline("inc"), [h], [groupsFor(n)], incPush(n));
    rt.copyBuffer(h, out, 0, 4 * n * k, 4 * n);
    values.push(rt.submitBatch());
  }
  for (let k = 1; k < values.length; k++) assert.ok(values[k] > values[k - 1], "timeline values increase");
  rt.waitTimeline(values[7]);
  assert.ok(rt.getCompleted() >= values[7]);
  const got = readU32(out);
  for (let k = 0; k < 8; k++) assertArrayEqual(got.subarray(k * n, (k + 1) * n), plus(u, k + 1), `batch ${k}`);
});

test("waitTimelineAsync resolves once the value completes", async () => {
  const shape = slowShapeFor(100);
  const h = bufferWith(randomU32(shape.n, rng(216)));
  rt.beginBatch();
  recordSlow(h, shape);
  const v = rt.submitBatch();
  await rt.waitTimelineAsync(v);
  assert.ok(rt.getCompleted() >= v);
  await rt.waitTimelineAsync(v); // already complete: resolves at once
});

test("many large uploads queued behind one open batch keep their own data", () => {
  // Exercises staging reuse: every upload is pending until the batch runs.
  const n = 256 * 1024; // 1 MiB each, 48 MiB in all
  const r = rng(217);
  const src = bufferWith(randomU32(n, r));
  const dsts: number[] = [];
  const expected: Uint32Array[] = [];
  rt.beginBatch();
  for (let k = 0; k < 48; k++) {
    const data = randomU32(n, r);
    rt.uploadBuffer(src, data);
    const d = rt.createBuffer(4 * n);
    rt.recordDispatch(pipeline("copy"), [src, d], [groupsFor(n)], incPush(n));
    dsts.push(d);
    expected.push(data);
  }
  rt.waitTimeline(rt.submitBatch());
  dsts.forEach((d, k) => assertArrayEqual(readU32(d), expected[k], `copy ${k}`));
  dsts.forEach((d) => rt.destroyBuffer(d));
});

test("the host does not wait for unrelated GPU work", (t) => {
  // Forced staging on a device without a transfer queue puts the read's copy on the compute
  // queue behind the slow batch, so there the wait is expected.
  if (forcedStaging() && !info.hasAsyncTransfer) return t.skip("staging shares the compute queue on this device");
  const shape = slowShapeFor(500);
  const r = rng(218);
  const busy = bufferWith(randomU32(shape.n, r));
  const other = bufferWith(randomU32(64, r));
  const data = randomU32(64, r);
  rt.beginBatch();
  recordSlow(busy, shape);
  const v = rt.submitBatch();
  rt.uploadBuffer(other, data);
  const got = readU32(other);
  const stillRunning = rt.getCompleted() < v;
  rt.waitTimeline(v);
  assertArrayEqual(got, data, "unrelated buffer");
  assert.ok(stillRunning, "upload + read of an unrelated buffer should not wait for the slow batch");
});
