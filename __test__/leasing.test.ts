// Buffer leasing: reuse only behind the last use (completed, or ordered after it), never aliasing between
// live leases, bounded pool growth under a long random lease/release stress.
import assert from "node:assert/strict";
import { test } from "node:test";
import {
  assertArrayEqual, assertThrowsCode, bufferWith, groupsFor, pipeline, randInt, randomU32, readU32, recordSlow, rng, rt,
  runBatch, slowShapeFor, useDevice,
} from "./helpers.js";
import { checksumOf, push } from "./kernels/index.js";

useDevice();

test("a leased buffer holds data like any buffer and can be released", () => {
  const u = randomU32(1000, rng(301));
  const h = rt.leaseBuffer(u.byteLength);
  rt.uploadBuffer(h, u);
  runBatch(() => rt.recordDispatch(pipeline("inc"), [h], [groupsFor(1000)], Uint32Array.of(1000)));
  assertArrayEqual(readU32(h, 0, u.byteLength), u.map((v) => v + 1), "leased buffer");
  const before = rt.poolStats();
  assert.ok(before.leasedBytes >= u.byteLength, `leasedBytes ${before.leasedBytes}`);
  rt.releaseBuffer(h);
  assert.ok(rt.poolStats().leasedBytes <= before.leasedBytes - u.byteLength);
});

test("a buffer released with work pending comes back only behind that work, and a lease never waits", () => {
  const shape = slowShapeFor(400);
  const bytes = 4 * shape.n;
  const h = rt.leaseBuffer(bytes);
  rt.uploadBuffer(h, randomU32(shape.n, rng(302)));
  rt.beginBatch();
  recordSlow(h, shape); // rewrites h in place for ~400 ms
  const v = rt.submitBatch();
  rt.releaseBuffer(h);
  const reusesBefore = rt.poolStats().reuses;
  const runningBefore = rt.getCompleted() < v;
  const h2 = rt.leaseBuffer(bytes); // same bucket
  const runningAfter = rt.getCompleted() < v;
  const reusedEarly = rt.poolStats().reuses > reusesBefore;
  assert.ok(runningBefore, "test precondition: the slow batch should still be running");
  assert.ok(runningAfter, "the slow batch finished during leaseBuffer: a lease must never wait for the GPU");
  assert.notEqual(h2, h);
  // With in-batch reuse (the default) the buffer may come back at once, also with no batch open:
  // everything its new holder does is ordered after the slow write (an upload waits for it on
  // the transfer queue). The new data must survive that pending write. Without it, not before
  // the slow batch completed.
  if (process.env.HELIOS_INBATCH_REUSE === "0") assert.ok(!reusedEarly, "the pool reused a buffer whose last use had not completed");
  const fresh = randomU32(shape.n, rng(304));
  rt.uploadBuffer(h2, fresh);
  assertArrayEqual(readU32(h2, 0, bytes), fresh, `data uploaded into a ${reusedEarly ? "reused" : "fresh"} lease`);
  rt.waitTimeline(v);
  rt.releaseBuffer(h2);
  const reusesAfterWait = rt.poolStats().reuses;
  const h3 = rt.leaseBuffer(bytes);
  assert.ok(rt.poolStats().reuses > reusesAfterWait, "after completion the released buffer should be reused");
  assert.notEqual(h3, h2, "a reused buffer gets a fresh handle");
  rt.releaseBuffer(h3);
});

test("the handle of a released lease is dead even after its memory is reused", () => {
  const h = rt.leaseBuffer(4096);
  rt.releaseBuffer(h);
  const h2 = rt.leaseBuffer(4096);
  assert.throws(() => rt.uploadBuffer(h, new Uint32Array(4)), { code: "ERR_HELIOS_INVALID_HANDLE" });
  assert.throws(() => rt.releaseBuffer(h), { code: "ERR_HELIOS_INVALID_HANDLE" });
  rt.releaseBuffer(h2);
});

test("trimPool frees idle buffers", () => {
  const hs = Array.from({ length: 16 }, (_, i) => rt.leaseBuffer(1024 * (i + 1)));
  hs.forEach((h) => rt.releaseBuffer(h));
  rt.trimPool();
  assert.equal(rt.poolStats().freeBytes, 0);
});

test("10,000 random-size lease/release cycles with batches in flight: checksums, reuse, bounded peak", () => {
  // Each live lease gets unique data; a checksum dispatch reads it just before release.
  // Aliasing between live leases, or reuse while an earlier checksum is pending, changes
  // a checksum. Up to three batches stay in flight while the loop keeps leasing.
  const r = rng(303);
  const cycles = 10_000;
  const maxLive = 24;
  const maxBytes = 64 * 1024;
  const slots = bufferWith(randomU32(cycles, r)); // out[slot] += checksum
  const initial = readU32(slots);
  const expected = initial.slice();
  const live: Array<{ h: number; words: number; slot: number }> = [];
  const inFlight: number[] = [];
  let slot = 0;
  let leasedTotal = 0;
  let released = 0;
  rt.trimPool();
  const statsBefore = rt.poolStats();
  const releaseOne = (i: number) => {
    const { h, words, slot: s } = live[i];
    live.splice(i, 1);
    rt.recordDispatch(pipeline("checksum"), [h, slots], [1], Uint32Array.of(words, s));
    rt.releaseBuffer(h);
    released++;
  };
  rt.beginBatch();
  for (let c = 0; c < cycles; c++) {
    if (live.length > 0 && (live.length >= maxLive || r() < 0.5)) {
      releaseOne(randInt(r, 0, live.length - 1));
    } else {
      // log-uniform sizes from 4 bytes to 64 KiB, word multiples
      const words = Math.max(1, Math.floor(2 ** (r() * Math.log2(maxBytes / 4))));
      const h = rt.leaseBuffer(4 * words);
      const data = randomU32(words, r, 0xffffffff);
      rt.uploadBuffer(h, data);
      expected[slot] = (expected[slot] + checksumOf(data)) >>> 0;
      live.push({ h, words, slot });
      slot++;
      leasedTotal += 4 * words;
    }
    if (c % 100 === 99) {
      inFlight.push(rt.submitBatch());
      if (inFlight.length > 3) rt.waitTimeline(inFlight.shift()!);
      rt.beginBatch();
    }
  }
  while (live.length > 0) releaseOne(live.length - 1);
  rt.waitTimeline(rt.submitBatch());
  const got = readU32(slots);
  for (let s = 0; s < slot; s++) assert.equal(got[s], expected[s], `checksum of lease #${s}`);
  assertArrayEqual(got.subarray(slot), initial.subarray(slot), "unused slots");
  const stats = rt.poolStats();
  assert.equal(stats.leasedBytes, 0, "everything was released");
  assert.ok(stats.reuses > 0, "the pool should reuse released buffers");
  assert.ok(stats.allocations - statsBefore.allocations < slot / 4, `allocations ${stats.allocations} for ${slot} leases`);
  assert.ok(stats.peakBytes < 32 * 1024 * 1024, `peakBytes ${stats.peakBytes} (leased ${leasedTotal} in all)`);
  assert.ok(released === slot);
  rt.trimPool();
  rt.destroyBuffer(slots);
});

test("overlapAllocations: a fresh lease of 1 MiB or more submits the recorded work first; other leases and batches stay whole", () => {
  const n = 1000;
  const u = randomU32(n, rng(311));
  const h = bufferWith(u);
  const MiB = 1 << 20;
  // A batch split by a submit can no longer be captured: that is how the split shows.
  const attempt = (opts: { overlapAllocations?: boolean } | undefined, lease: () => number, expectSplit: boolean, what: string) => {
    rt.beginBatch(opts);
    rt.recordDispatch(pipeline("inc"), [h], [groupsFor(n)], push([["u", n]]));
    const l = lease();
    if (expectSplit) {
      assertThrowsCode(() => rt.captureBatch(), "ERR_HELIOS_INVALID_ARGUMENT", { call: "captureBatch", mentions: "overlapAllocations" });
      rt.waitTimeline(rt.submitBatch());
    } else {
      const graph = rt.captureBatch();
      rt.waitTimeline(rt.replayBatch(graph));
      rt.destroyCapture(graph);
    }
    rt.releaseBuffer(l);
  };
  rt.trimPool();
  attempt({ overlapAllocations: true }, () => rt.leaseBuffer(2 * MiB + 12), true, "fresh 2 MiB lease");
  attempt({ overlapAllocations: true }, () => rt.leaseBuffer(2 * MiB + 12), false, "the same size again comes from the pool");
  attempt({ overlapAllocations: true }, () => rt.leaseBuffer(64 * 1024 + 4), false, "a small fresh lease");
  rt.trimPool();
  attempt(undefined, () => rt.leaseBuffer(2 * MiB + 12), false, "a batch without the option");
  attempt({ overlapAllocations: false }, () => rt.leaseBuffer(3 * MiB), false, "overlapAllocations: false");
  // every recorded inc ran exactly once (5 batches), split or not
  assertArrayEqual(readU32(h), u.map((v) => (v + 5) >>> 0), "five increments");
});
