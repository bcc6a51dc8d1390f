// GPU timestamps: a profiled batch reports one {label, gpuNs} per dispatch, in order.
import assert from "node:assert/strict";
import { test } from "node:test";
import {
  assertThrowsCode, bufferWith, groupsFor, packDispatches, pipeline, randomF32, randomU32, readU32, rng, rt, runBatch,
  slowShapeFor, useDevice,
} from "./helpers.js";
import { push } from "./kernels/index.js";

const info = useDevice();

test("the device reports a positive timestamp period", () => {
  assert.ok(info.timestampPeriodNs > 0, `timestampPeriodNs ${info.timestampPeriodNs}`);
});

test("a profiled batch gives one entry per dispatch with the pipeline labels and gpuNs > 0", () => {
  const n = 4096;
  const r = rng(501);
  const hx = bufferWith(randomF32(n, r));
  const hy = bufferWith(randomF32(n, r));
  const hu = bufferWith(randomU32(n, r));
  const shape = slowShapeFor(20);
  const hs = bufferWith(randomU32(shape.n, r));
  const order = ["axpb", "inc", "copy", "slow", "inc"];
  // On a CPU device a timestamp pair can straddle a preemption of the worker thread, so the
  // timing relation gets three tries; labels and positive durations are checked every time.
  const relations: string[] = [];
  for (let attempt = 0; attempt < 3; attempt++) {
    const v = runBatch(() => {
      rt.recordDispatch(pipeline("axpb"), [hx, hy], [groupsFor(n)], push([["u", n], ["f", 1], ["f", 2]]));
      rt.recordDispatch(pipeline("inc"), [hu], [groupsFor(n)], push([["u", n]]));
      rt.recordDispatch(pipeline("copy"), [hu, hx], [groupsFor(n)], push([["u", n]]));
      rt.recordDispatch(pipeline("slow"), [hs], [groupsFor(shape.n)], Uint32Array.of(shape.n, shape.iters));
      rt.recordDispatchMany(packDispatches([{ pipeline: pipeline("inc"), buffers: [hu], groups: [groupsFor(n)], push: Uint32Array.of(n) }]), 1);
    }, { profile: true });
    const profile = rt.batchProfile(v);
    assert.deepEqual(profile.map((p) => p.label), order);
    for (const p of profile) {
      assert.ok(Number.isFinite(p.gpuNs) && p.gpuNs > 0, `${p.label}: gpuNs ${p.gpuNs}`);
      // startNs/endNs: stamps on the queue's clock, end - start = gpuNs
      assert.ok(Math.abs(p.endNs - p.startNs - p.gpuNs) < 1, `${p.label}: end - start = gpuNs`);
    }
    for (let i = 1; i < profile.length; i++) assert.ok(profile[i].startNs >= profile[i - 1].startNs, "start stamps in recording order");
    const slow = profile[3].gpuNs;
    const inc = profile[1].gpuNs;
    if (slow > inc) return;
    relations.push(`slow ${slow} ns vs inc ${inc} ns`);
  }
  assert.fail(`the slow kernel should take longer than inc in at least one of 3 batches: ${relations.join("; ")}`);
});

test("an unprofiled batch has no profile", () => {
  const h = bufferWith(randomU32(64, rng(502)));
  const v = runBatch(() => rt.recordDispatch(pipeline("inc"), [h], [1], push([["u", 64]])));
  let profile: Array<{ label: string; gpuNs: number }> = [];
  try {
    profile = rt.batchProfile(v);
  } catch (err) {
    assert.equal((err as { code?: string }).code, "ERR_HELIOS_INVALID_ARGUMENT", String(err));
  }
  assert.deepEqual(profile, []);
});

test("profiles of several batches in flight stay separate", () => {
  const n = 256;
  const h = bufferWith(randomU32(n, rng(503)));
  const values: number[] = [];
  for (let k = 1; k <= 4; k++) {
    rt.beginBatch({ profile: true });
    for (let i = 0; i < k; i++) rt.recordDispatch(pipeline("inc"), [h], [groupsFor(n)], push([["u", n]]));
    values.push(rt.submitBatch());
  }
  rt.waitTimeline(values[3]);
  values.forEach((v, i) => {
    const profile = rt.batchProfile(v);
    assert.equal(profile.length, i + 1, `batch ${i}`);
    assert.ok(profile.every((p) => p.label === "inc" && p.gpuNs > 0));
  });
});

test("batchProfile of a running batch is refused or waits; of a value never submitted, refused", () => {
  const shape = slowShapeFor(200);
  const h = bufferWith(randomU32(shape.n, rng(504)));
  rt.beginBatch({ profile: true });
  rt.recordDispatch(pipeline("slow"), [h], [groupsFor(shape.n)], Uint32Array.of(shape.n, shape.iters));
  const v = rt.submitBatch();
  let profile: Array<{ label: string; gpuNs: number }> | undefined;
  if (rt.getCompleted() < v) {
    // Either refused, or answered after waiting for the batch: never a partial profile.
    try {
      profile = rt.batchProfile(v);
    } catch (err) {
      const code = (err as { code?: string }).code ?? "";
      assert.ok(["ERR_HELIOS_INVALID_ARGUMENT", "ERR_HELIOS_OUT_OF_RANGE"].includes(code), String(err));
    }
  }
  rt.waitTimeline(v);
  profile ??= rt.batchProfile(v); // a profile may be handed out only once
  assert.equal(profile.length, 1);
  assert.ok(profile[0].gpuNs > 0);
  assertThrowsCode(() => rt.batchProfile(v + 1000), ["ERR_HELIOS_INVALID_ARGUMENT", "ERR_HELIOS_OUT_OF_RANGE"], { call: "batchProfile" });
});

test("a capture recorded while profiled: each replay's stamps are read by its value; only the latest replay's; none after destroyCapture", () => {
  const n = 1024;
  const r = rng(505);
  const u = randomU32(n, r);
  const h = bufferWith(u);
  const hx = bufferWith(randomF32(n, r));
  const hy = bufferWith(randomF32(n, r));
  rt.beginBatch({ profile: true });
  rt.recordDispatch(pipeline("inc"), [h], [groupsFor(n)], push([["u", n]]));
  rt.recordDispatch(pipeline("axpb"), [hx, hy], [groupsFor(n)], push([["u", n], ["f", 1], ["f", 2]]));
  const graph = rt.captureBatch();
  const first = rt.replayBatch(graph);
  rt.waitTimeline(first);
  const p1 = rt.batchProfile(first);
  assert.deepEqual(p1.map((p) => p.label), ["inc", "axpb"]);
  assert.ok(p1.every((p) => Number.isFinite(p.gpuNs) && p.gpuNs > 0 && Math.abs(p.endNs - p.startNs - p.gpuNs) < 1), JSON.stringify(p1));
  const second = rt.replayBatch(graph);
  rt.waitTimeline(second);
  const p2 = rt.batchProfile(second);
  assert.deepEqual(p2.map((p) => p.label), ["inc", "axpb"]);
  assert.ok(p2[0].startNs > p1[1].endNs, "the second replay's stamps are its own (later than the first's)");
  // the two replays shared the queries: the first replay's value is no longer answered
  assertThrowsCode(() => rt.batchProfile(first), ["ERR_HELIOS_INVALID_ARGUMENT"], { call: "batchProfile" });
  // the replays ran: two increments
  assert.deepEqual(Array.from(readU32(h)), Array.from(u, (v) => (v + 2) >>> 0));
  rt.destroyCapture(graph);
  assertThrowsCode(() => rt.batchProfile(second), ["ERR_HELIOS_INVALID_ARGUMENT"], { call: "batchProfile" });
});
