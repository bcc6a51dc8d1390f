// Read results: large readBuffer results are external ArrayBuffers whose memory returns to a
// pool when JS collects them (a recycled result must hold exactly the new bytes; a held one is
// never overwritten), and readBufferInto writes into caller memory with no result allocation.
import assert from "node:assert/strict";
import { test } from "node:test";
import v8 from "node:v8";
import vm from "node:vm";
import { assertThrowsCode, bufferWith, groupsFor, pipeline, rng, rt, runBatch, useDevice } from "./helpers.js";
import { push } from "./kernels/index.js";

useDevice();
v8.setFlagsFromString("--expose-gc");
const gc = vm.runInNewContext("gc") as () => void;

function pattern(words: number, seed: number): Uint32Array {
  const r = rng(seed);
  return Uint32Array.from({ length: words }, () => (r() * 0x100000000) >>> 0);
}

async function collect(): Promise<void> {
  gc();
  // external-buffer finalizers run after the collection, on a later turn of the loop
  await new Promise((r) => setImmediate(r));
  gc();
  await new Promise((r) => setImmediate(r));
}

test("recycled large read results hold exactly the new data; held results stay untouched", async () => {
  const big = (17 << 20) / 4; // 17 MiB: above the pooled-result threshold (16 MiB)
  const a = pattern(big, 901), b = pattern(big - 1000, 902), c = pattern(big + 5000, 903);
  const [ha, hb, hc] = [bufferWith(a), bufferWith(b), bufferWith(c)];
  let first: Uint32Array | null = new Uint32Array(rt.readBuffer(ha));
  assert.deepEqual(first, a, "first read");
  // held: a second read must get other memory
  const second = new Uint32Array(rt.readBuffer(hb));
  assert.deepEqual(second, b, "second read while the first is held");
  assert.deepEqual(first, a, "the held first result is unchanged");
  first = null;
  await collect();
  for (let round = 0; round < 3; round++) {
    // smaller, larger and equal sizes: each must be exactly its own buffer's bytes
    assert.deepEqual(new Uint32Array(rt.readBuffer(hb)), b, `round ${round}: smaller read`);
    assert.deepEqual(new Uint32Array(rt.readBuffer(hc)), c, `round ${round}: larger read`);
    assert.deepEqual(new Uint32Array(await rt.readBufferAsync(ha)), a, `round ${round}: async read`);
    await collect();
  }
  assert.deepEqual(second, b, "the held second result is unchanged after all of it");
  rt.trimPool();
  assert.deepEqual(new Uint32Array(rt.readBuffer(ha, 4, 16)), a.subarray(1, 5), "small read after trimPool");
  [ha, hb, hc].forEach((h) => rt.destroyBuffer(h));
});

test("readBufferInto fills typed arrays, views with an offset and ArrayBuffers, in program order", () => {
  const n = 3000;
  const a = pattern(n, 911);
  const h = bufferWith(a);
  const whole = new Uint32Array(n);
  rt.readBufferInto(h, whole);
  assert.deepEqual(whole, a, "whole buffer into a Uint32Array");
  const backing = new Uint32Array(n + 8).fill(0xdeadbeef);
  const view = backing.subarray(3, 3 + 100);
  rt.readBufferInto(h, view, 40);
  assert.deepEqual(view, a.subarray(10, 110), "100 words at byte 40 into a view at word 3");
  assert.equal(backing[2], 0xdeadbeef, "bytes before the view untouched");
  assert.equal(backing[103], 0xdeadbeef, "bytes after the view untouched");
  const ab = new ArrayBuffer(16);
  rt.readBufferInto(h, ab, 4 * (n - 4));
  assert.deepEqual(new Uint32Array(ab), a.subarray(n - 4), "the last 16 bytes into an ArrayBuffer");
  // after a dispatch recorded (not yet submitted) that writes the buffer: sees its result
  const out = new Uint32Array(n);
  rt.beginBatch();
  rt.recordDispatch(pipeline("inc"), [h], [groupsFor(n)], push([["u", n]]));
  rt.readBufferInto(h, out);
  rt.waitTimeline(rt.submitBatch());
  assert.deepEqual(out, a.map((x) => (x + 1) >>> 0), "the read sees the dispatch recorded before it");
  rt.destroyBuffer(h);
  void runBatch;
});

test("readBufferInto rejects a bad handle, a range past the end and a non-buffer destination", () => {
  const h = bufferWith(pattern(16, 912));
  assertThrowsCode(() => rt.readBufferInto(h, new Uint8Array(65)), "ERR_HELIOS_OUT_OF_RANGE", { call: "readBufferInto" });
  assertThrowsCode(() => rt.readBufferInto(h, new Uint8Array(8), 60), "ERR_HELIOS_OUT_OF_RANGE", { call: "readBufferInto" });
  assertThrowsCode(() => rt.readBufferInto(h, [1, 2, 3] as unknown as Uint8Array), "ERR_HELIOS_INVALID_ARGUMENT", { call: "readBufferInto", mentions: "dst" });
  rt.destroyBuffer(h);
  assertThrowsCode(() => rt.readBufferInto(h, new Uint8Array(4)), "ERR_HELIOS_INVALID_HANDLE", { call: "readBufferInto" });
});
