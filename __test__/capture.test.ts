// Captured batches (the CUDA Graph analogue): replay without re-recording, with new
// inputs uploaded between replays, many times, interleaved with ordinary batches.
import assert from "node:assert/strict";
import { test } from "node:test";
import {
  assertArrayEqual, assertThrowsCode, bufferWith, groupsFor, packDispatches, pipeline, randomF32, randomU32,
  readF32, readU32, rng, rt, useDevice,
} from "./helpers.js";
import { push } from "./kernels/index.js";

useDevice();

test("replay with new inputs computes on the new inputs", () => {
  const n = 1537;
  const r = rng(401);
  const hx = bufferWith(randomF32(n, r));
  const hy = bufferWith(randomF32(n, r));
  rt.beginBatch();
  rt.recordDispatch(pipeline("axpb"), [hx, hy], [groupsFor(n)], push([["u", n], ["f", 2], ["f", 0.5]]));
  const graph = rt.captureBatch();
  for (let k = 0; k < 5; k++) {
    const x = randomF32(n, r);
    rt.uploadBuffer(hx, x);
    const v = rt.replayBatch(graph);
    rt.waitTimeline(v);
    assertArrayEqual(readF32(hy), x.map((e) => Math.fround(Math.fround(e * 2) + 0.5)), `replay ${k}`);
  }
  rt.destroyCapture(graph);
});

test("captureBatch does not execute the batch; each replay does, in program order", () => {
  const n = 100;
  const u = randomU32(n, rng(402));
  const h = bufferWith(u);
  rt.beginBatch();
  rt.recordDispatch(pipeline("inc"), [h], [groupsFor(n)], push([["u", n]]));
  rt.recordDispatch(pipeline("inc"), [h], [groupsFor(n)], push([["u", n]]));
  const graph = rt.captureBatch();
  assertArrayEqual(readU32(h), u, "after capture, nothing ran");
  const values: number[] = [];
  for (let k = 0; k < 200; k++) values.push(rt.replayBatch(graph)); // many in flight
  rt.waitTimeline(values[values.length - 1]);
  assertArrayEqual(readU32(h), u.map((v) => (v + 400) >>> 0), "after 200 replays of 2 incs");
  rt.destroyCapture(graph);
});

test("replays interleave with ordinary batches and uploads in program order", () => {
  const n = 333;
  const r = rng(403);
  const u = randomU32(n, r);
  const h = bufferWith(u);
  const snap = bufferWith(randomU32(n * 3, r));
  rt.beginBatch();
  rt.recordDispatch(pipeline("inc"), [h], [groupsFor(n)], push([["u", n]]));
  const graph = rt.captureBatch();
  rt.replayBatch(graph); // u + 1
  rt.beginBatch();
  rt.copyBuffer(h, snap, 0, 0, 4 * n);
  rt.submitBatch();
  const replacement = randomU32(n, r);
  rt.uploadBuffer(h, replacement);
  rt.replayBatch(graph); // replacement + 1
  rt.copyBuffer(h, snap, 0, 4 * n, 4 * n);
  rt.replayBatch(graph); // replacement + 2
  const got = readU32(h);
  assertArrayEqual(got, replacement.map((v) => (v + 2) >>> 0), "final");
  const s = readU32(snap);
  assertArrayEqual(s.subarray(0, n), u.map((v) => (v + 1) >>> 0), "snapshot after first replay");
  assertArrayEqual(s.subarray(n, 2 * n), replacement.map((v) => (v + 1) >>> 0), "snapshot after the upload + replay");
  rt.destroyCapture(graph);
});

test("a captured recordDispatchMany batch with a dependency chain replays correctly", () => {
  const n = 4096;
  const u = randomU32(n, rng(404));
  const h = bufferWith(u);
  const e = { pipeline: pipeline("inc"), buffers: [h], groups: [groupsFor(n)] as [number], push: Uint32Array.of(n) };
  rt.beginBatch();
  rt.recordDispatchMany(packDispatches(Array(100).fill(e)), 100);
  const graph = rt.captureBatch();
  for (let k = 0; k < 10; k++) rt.replayBatch(graph);
  assertArrayEqual(readU32(h), u.map((v) => (v + 1000) >>> 0), "10 replays of 100 incs");
  rt.destroyCapture(graph);
});

test("a destroyed capture cannot be replayed; a new batch can be begun after capture", () => {
  const h = bufferWith(randomU32(64, rng(405)));
  rt.beginBatch();
  rt.recordDispatch(pipeline("inc"), [h], [1], push([["u", 64]]));
  const graph = rt.captureBatch();
  rt.beginBatch(); // capture ended the open batch
  rt.recordDispatch(pipeline("inc"), [h], [1], push([["u", 64]]));
  rt.waitTimeline(rt.submitBatch());
  rt.destroyCapture(graph);
  assertThrowsCode(() => rt.replayBatch(graph), "ERR_HELIOS_INVALID_HANDLE", { call: "replayBatch" });
  assertThrowsCode(() => rt.destroyCapture(graph), "ERR_HELIOS_INVALID_HANDLE", { call: "destroyCapture" });
});

test("destroying a buffer a capture uses is safe: replay is refused or harmless, never a crash", () => {
  const h = bufferWith(randomU32(64, rng(406)));
  rt.beginBatch();
  rt.recordDispatch(pipeline("inc"), [h], [1], push([["u", 64]]));
  const graph = rt.captureBatch();
  rt.destroyBuffer(h);
  try {
    rt.waitTimeline(rt.replayBatch(graph)); // allowed if the capture keeps its buffers alive
  } catch (err) {
    assert.ok(
      ["ERR_HELIOS_INVALID_HANDLE", "ERR_HELIOS_INVALID_ARGUMENT"].includes((err as { code?: string }).code ?? ""),
      `unexpected error: ${String(err)}`,
    );
  }
  rt.destroyCapture(graph);
});
