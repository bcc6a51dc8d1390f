// Buffer operations at their edges: host-visible buffers, typed-array views with byte
// offsets, zero-length and overlapping operations, and destroy/release while a read is
// still pending. Nothing here may crash or reach the driver as an invalid command.
import assert from "node:assert/strict";
import { test } from "node:test";
import {
  assertArrayEqual, assertThrowsCode, bufferWith, groupsFor, pipeline, randomF32, randomU32, readF32, readU32,
  recordSlow, rng, rt, runBatch, slowShapeFor, useDevice,
} from "./helpers.js";
import { push } from "./kernels/index.js";

useDevice();

test("host-visible buffers work in dispatches and keep program order for uploads", () => {
  const n = 1500;
  const r = rng(801);
  const [x0, x1] = [randomF32(n, r), randomF32(n, r)];
  const hx = rt.createBuffer(4 * n, { hostVisible: true });
  const y0 = rt.createBuffer(4 * n, { hostVisible: true });
  const y1 = rt.createBuffer(4 * n);
  rt.uploadBuffer(hx, x0);
  const pc = push([["u", n], ["f", 3], ["f", -1]]);
  runBatch(() => {
    rt.recordDispatch(pipeline("axpb"), [hx, y0], [groupsFor(n)], pc);
    rt.uploadBuffer(hx, x1); // a direct write here would race the dispatch above
    rt.recordDispatch(pipeline("axpb"), [hx, y1], [groupsFor(n)], pc);
  });
  const ref = (x: Float32Array) => x.map((v) => Math.fround(Math.fround(v * 3) - 1));
  assertArrayEqual(readF32(y0), ref(x0), "dispatch before the second upload");
  assertArrayEqual(readF32(y1), ref(x1), "dispatch after the second upload");
  [hx, y0, y1].forEach((h) => rt.destroyBuffer(h));
});

test("typed-array views with a byte offset upload and push only their own bytes", () => {
  const n = 100;
  const r = rng(802);
  const backing = randomU32(n + 16, r);
  const view = backing.subarray(7, 7 + n); // byteOffset 28
  const h = bufferWith(randomU32(n, r));
  rt.uploadBuffer(h, view);
  assertArrayEqual(readU32(h), view, "upload from a subarray");
  rt.uploadBuffer(h, new Uint8Array(view.buffer, view.byteOffset + 8, 8), 40); // words 2,3 -> 10,11
  const expected = view.slice();
  expected[10] = view[2];
  expected[11] = view[3];
  assertArrayEqual(readU32(h), expected, "partial upload from a Uint8Array view");
  // push constants from a view into a larger buffer: {n} must be read at the view's offset
  const pushBacking = new Uint32Array([0xffffffff, 0xffffffff, n, 0xffffffff]);
  runBatch(() => rt.recordDispatch(pipeline("inc"), [h], [groupsFor(n)], pushBacking.subarray(2, 3)));
  assertArrayEqual(readU32(h), expected.map((v) => (v + 1) >>> 0), "inc with push constants from a subarray");
  // and from a plain ArrayBuffer
  runBatch(() => rt.recordDispatch(pipeline("inc"), [h], [groupsFor(n)], Uint32Array.of(n).buffer as unknown as ArrayBufferView));
  assertArrayEqual(readU32(h), expected.map((v) => (v + 2) >>> 0), "inc with push constants from an ArrayBuffer");
});

test("zero-length operations are no-ops or INVALID_ARGUMENT, never an invalid Vulkan command", () => {
  const u = randomU32(64, rng(803));
  const h = bufferWith(u);
  const other = bufferWith(randomU32(64, rng(804)));
  const tolerate = (what: string, fn: () => unknown) => {
    try {
      fn();
    } catch (err) {
      const code = (err as { code?: string }).code ?? "";
      assert.ok(["ERR_HELIOS_INVALID_ARGUMENT", "ERR_HELIOS_OUT_OF_RANGE"].includes(code), `${what}: ${String(err)}`);
    }
  };
  rt.beginBatch();
  rt.recordDispatch(pipeline("inc"), [h], [1], push([["u", 64]]));
  tolerate("empty upload", () => rt.uploadBuffer(h, new Uint8Array(0)));
  tolerate("zero-length copy", () => rt.copyBuffer(h, other, 0, 0, 0));
  tolerate("zero-length fill", () => rt.fillBuffer(h, 5, 0, 0));
  tolerate("zero groups", () => rt.recordDispatch(pipeline("inc"), [h], [0], push([["u", 64]])));
  rt.waitTimeline(rt.submitBatch());
  tolerate("zero-length read", () => assert.equal(rt.readBuffer(h, 0, 0).byteLength, 0));
  assertArrayEqual(readU32(h), u.map((v) => (v + 1) >>> 0), "buffer after the zero-length operations");
});

test("an overlapping copy within one buffer is refused or done as if through a temporary", () => {
  const u = randomU32(64, rng(805));
  const h = bufferWith(u);
  try {
    rt.copyBuffer(h, h, 0, 16, 128); // words 0..32 -> 4..36
    const expected = u.slice();
    expected.set(u.subarray(0, 32), 4);
    assertArrayEqual(readU32(h), expected, "overlapping copy");
  } catch (err) {
    const code = (err as { code?: string }).code ?? "";
    assert.ok(["ERR_HELIOS_INVALID_ARGUMENT", "ERR_HELIOS_OUT_OF_RANGE"].includes(code), String(err));
    assertArrayEqual(readU32(h), u, "buffer after a refused copy");
  }
  // Non-overlapping ranges of the same buffer are an ordinary copy.
  const v = readU32(h);
  rt.copyBuffer(h, h, 0, 128, 64);
  const expected = v.slice();
  expected.set(v.subarray(0, 16), 32);
  assertArrayEqual(readU32(h), expected, "disjoint copy within one buffer");
});

test("destroying or releasing a buffer while its async read is pending still resolves the read", async () => {
  const shape = slowShapeFor(150);
  const r = rng(806);
  const u = randomU32(shape.n, r);
  const plain = bufferWith(u);
  const leased = rt.leaseBuffer(4 * shape.n);
  rt.uploadBuffer(leased, u);
  rt.beginBatch();
  recordSlow(plain, shape);
  recordSlow(leased, shape);
  rt.submitBatch();
  const a = rt.readBufferAsync(plain);
  const b = rt.readBufferAsync(leased, 0, 4 * shape.n);
  rt.destroyBuffer(plain);
  rt.releaseBuffer(leased);
  const reuse = rt.leaseBuffer(4 * shape.n); // must not be handed the pending buffer's memory
  rt.uploadBuffer(reuse, randomU32(shape.n, r));
  const [ga, gb] = [new Uint32Array(await a), new Uint32Array(await b)];
  assertArrayEqual(ga, gb, "both reads saw the same computation");
  const step = Math.max(1, Math.floor(shape.n / 50));
  for (let i = 0; i < shape.n; i += step) {
    let x = u[i];
    for (let k = 0; k < shape.iters; k++) x = (Math.imul(x, 1664525) + 1013904223) >>> 0;
    assert.equal(ga[i], x, `element ${i}`);
  }
  assertThrowsCode(() => rt.readBuffer(plain), "ERR_HELIOS_INVALID_HANDLE");
  rt.releaseBuffer(reuse);
});

test("many concurrent readBufferAsync calls each resolve to their own range", async () => {
  const n = 4096;
  const u = randomU32(n, rng(807));
  const h = bufferWith(u);
  rt.beginBatch();
  rt.recordDispatch(pipeline("inc"), [h], [groupsFor(n)], push([["u", n]]));
  rt.submitBatch();
  const reads = Array.from({ length: 100 }, (_, i) => rt.readBufferAsync(h, 4 * i * 40, 4 * 40));
  const waits = Array.from({ length: 20 }, () => rt.waitTimelineAsync(rt.getCompleted()));
  const got = await Promise.all(reads);
  await Promise.all(waits);
  got.forEach((buf, i) => assertArrayEqual(new Uint32Array(buf), u.subarray(i * 40, (i + 1) * 40).map((v) => (v + 1) >>> 0), `read ${i}`));
});

test("large reads (whole-range staging above 16 MiB) return program-order bytes at any offset", () => {
  const words = (20 << 20) / 4 + 333; // not a multiple of the 16 MiB DMA chunk
  const data = randomU32(words, rng(811));
  const h = rt.createBuffer(4 * words);
  rt.uploadBuffer(h, data);
  const pattern = 0x5eed1234;
  rt.fillBuffer(h, pattern, 4 * 1000, 4 * 4096); // a GPU write the read must wait for
  const expected = data.slice();
  expected.fill(pattern, 1000, 1000 + 4096);
  assertArrayEqual(new Uint32Array(rt.readBuffer(h)), expected, "whole buffer");
  const off = 4 * 777;
  const len = (17 << 20) + 4 * 5; // smaller than the staging now kept: reused
  assertArrayEqual(new Uint32Array(rt.readBuffer(h, off, len)), expected.subarray(777, 777 + len / 4), "offset range");
  const second = randomU32(words, rng(812));
  rt.uploadBuffer(h, second);
  assertArrayEqual(new Uint32Array(rt.readBuffer(h)), second, "after a second upload");
  rt.destroyBuffer(h);
});
