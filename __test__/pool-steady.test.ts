// The pool under a steady workload (issue 24): a small add/matmul/softmax loop with a fresh
// input each iteration must stop allocating once it has warmed up. It used to grow by about a
// buffer per batch while the device lagged the recording thread: the first lease after each
// submit found every released buffer still pending (and nothing bounded the lag).
import { test } from "node:test";
import assert from "node:assert/strict";
import { makeBackend } from "./backend-helpers.js";

test("a steady add/matmul/softmax loop stops allocating after warm-up", () => {
  // Small batches: many batch boundaries per iteration count, where the growth happened.
  const B = makeBackend({ batchSize: 16 });
  const rnd = (n: number, s: number) => Float32Array.from({ length: n }, (_, i) => Math.sin(i * 1.7 + s));
  // x and x + x are 72 KiB: over the size HeliosBackend keeps after releaseGpuTensor until the
  // next host read (ts/engine.ts HOLD_BYTES), so they return to the pool at once.
  const w = B.fromArray(rnd(288 * 32, 0), [288, 32]);
  let sum = 0;
  const phase = (iters: number, seed: number) => {
    for (let i = 0; i < iters; i++) {
      const x = B.fromArray(rnd(64 * 288, seed + i), [64, 288]);
      const a = B.add(x, x);
      const m = B.matmul(a, w);
      const s = B.softmax(m, -1);
      // One host read per phase, as a training loop reads its loss now and then.
      if (i === iters - 1) sum = Number(s.data[0]) + Number(s.data[31]);
      for (const t of [x, a, m, s]) B.releaseGpuTensor(t);
    }
  };
  phase(300, 0);
  const warm = B.stats().pool;
  phase(300, 1000);
  phase(300, 2000);
  const after = B.stats().pool;
  assert.ok(sum > 0 && sum < 2, `softmax probabilities, got ${sum}`);
  const grew = after.allocations - warm.allocations;
  // Leased + free is what the pool holds from the driver; the loop's live set is constant.
  const held = (p: typeof warm) => p.leasedBytes + p.freeBytes;
  assert.ok(grew <= 12, `the pool allocated ${grew} more buffers after warm-up (${warm.allocations} -> ${after.allocations})`);
  assert.ok(held(after) <= held(warm) + 12 * 81920, `the pool grew from ${held(warm)} to ${held(after)} bytes`);
  B.releaseGpuTensor(w);
});
