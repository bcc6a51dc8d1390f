import assert from "node:assert/strict";
import { test } from "node:test";
import { cv, mean, median, percentile, summarize, tflops } from "../bench/stats.js";

test("median / percentile / mean / cv", () => {
  assert.equal(median([3, 1, 2]), 2);
  assert.equal(median([4, 1, 2, 3]), 2.5);
  assert.ok(Number.isNaN(median([])));
  assert.equal(percentile([1, 2, 3, 4, 5, 6, 7, 8, 9, 10], 95), 10);
  assert.equal(percentile([1, 2, 3, 4, 5, 6, 7, 8, 9, 10], 50), 5);
  assert.equal(mean([1, 2, 3]), 2);
  assert.equal(cv([5]), 0);
  assert.ok(Math.abs(cv([1, 2, 3]) - 0.5) < 1e-12);
});

test("summarize takes the median of per-repeat medians", () => {
  const s = summarize([[1, 1, 9], [2, 2, 2], [3, 100, 3]]);
  assert.deepEqual(s.repeatMedians, [1, 2, 3]);
  assert.equal(s.ms, 2);
  assert.equal(s.samples, 9);
  assert.equal(s.p95Ms, 100);
});

test("tflops", () => {
  assert.ok(Math.abs(tflops(4096, 4096, 4096, 0.188) - 731.1) < 0.5);
  assert.ok(Number.isNaN(tflops(1, 1, 1, 0)));
  assert.equal(tflops(1000, 1000, 1000, 1, 2), 4);
});

test("busyNs: the union of stamp intervals (overlaps once, gaps excluded)", async () => {
  const { busyNs } = await import("../bench/profiling.js");
  const iv = (startNs: number, endNs: number) => ({ startNs, endNs });
  assert.equal(busyNs([]), 0);
  assert.equal(busyNs([iv(10, 20)]), 10);
  assert.equal(busyNs([iv(10, 20), iv(15, 30)]), 20, "overlap counted once");
  assert.equal(busyNs([iv(40, 50), iv(10, 20)]), 20, "gap between excluded, order free");
  assert.equal(busyNs([iv(0, 100), iv(10, 20), iv(30, 40)]), 100, "nested intervals");
});
