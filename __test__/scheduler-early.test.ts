// The scheduler's early submission (HELIOS_SUBMIT_EARLY_US): an open batch older than the limit
// goes as soon as the GPU has at most one submission left, never while it is further ahead, and
// never for a captured or profiled batch. A scripted runtime plays the GPU's progress; then the
// device itself.
import { test } from "node:test";
import assert from "node:assert/strict";
import { Scheduler } from "../ts/exec/scheduler.js";
import type { Runtime } from "../ts/exec/runtime.js";
import { makeBackend } from "./backend-helpers.js";
import { Rng, randTensor, values } from "./harness.js";

/** The runtime calls the scheduler makes, with the GPU's completed value set by the test. */
function scriptedRuntime() {
  const rt = {
    submitted: 0,
    completed: 0,
    recorded: 0,
    beginBatch() {},
    recordDispatchMany(_w: Uint32Array, n: number) {
      rt.recorded += n;
    },
    submitBatch() {
      return ++rt.submitted;
    },
    getCompleted() {
      return rt.completed;
    },
    waitTimeline(v: number) {
      rt.completed = Math.max(rt.completed, v);
    },
    captureBatch() {
      return 1;
    },
    replayBatch() {
      return ++rt.submitted;
    },
    destroyCapture() {},
  };
  return rt;
}


function schedulerOn(rt: ReturnType<typeof scriptedRuntime>, earlyUs: number): Scheduler {
  const s = new Scheduler(rt as unknown as Runtime, 1000);
  s.earlyMs = earlyUs / 1000;
  return s;
}

const dispatch = (s: Scheduler) => s.record(7, [1, 2], [1, 1, 1]);

test("an open batch older than the limit goes at the next dispatch when the GPU is idle", () => {
  const rt = scriptedRuntime();
  const s = schedulerOn(rt, 2000);
  dispatch(s);
  dispatch(s);
  assert.equal(rt.submitted, 0, "a young batch waits");
  spin(3);
  dispatch(s);
  assert.equal(rt.submitted, 1, "an old batch goes to an idle GPU");
  assert.equal(rt.recorded, 3);
});

test("it waits while the GPU has two submissions to run, and goes once one is done", () => {
  const rt = scriptedRuntime();
  const s = schedulerOn(rt, 1000);
  for (let i = 0; i < 2; i++) {
    dispatch(s);
    s.submit();
  }
  assert.equal(rt.submitted, 2);
  rt.completed = 0; // both still to run
  dispatch(s);
  spin(2);
  dispatch(s);
  assert.equal(rt.submitted, 2, "two ahead: no early submission");
  rt.completed = 1; // one left
  spin(1); // past the next look (a quarter of the limit)
  dispatch(s);
  assert.equal(rt.submitted, 3, "one left: the open batch goes");
});

test("0 turns it off; captured and profiled batches stay whole", () => {
  const rt = scriptedRuntime();
  const off = schedulerOn(rt, 0);
  dispatch(off);
  spin(2);
  dispatch(off);
  assert.equal(rt.submitted, 0);
  off.submit();
  const s = schedulerOn(rt, 1000);
  const before = rt.submitted;
  s.beginCapture();
  dispatch(s);
  spin(2);
  dispatch(s);
  s.endCapture();
  s.profiled("test", () => {
    dispatch(s);
    spin(2);
    dispatch(s);
  });
  assert.equal(rt.submitted - before, 1, "only the profiled batch's own submit");
});

// On the device (lavapipe in CI, with validation and synchronization validation on): a workload cut
// into a batch at nearly every dispatch gives bit for bit what one batch gives; any missing
// cross-batch barrier or release ordering would show as a validation message or a wrong value.
test("a workload split at nearly every dispatch (HELIOS_SUBMIT_EARLY_US 1) equals it in one batch", () => {
  const run = (submitEarlyUs: number) => {
    const B = makeBackend({ submitEarlyUs, fusion: false, batchSize: 1000 });
    const rng = new Rng(7);
    const a = randTensor(rng, [33, 40]).td, b = randTensor(rng, [40, 29]).td;
    const w = randTensor(rng, [29]).td, bias = randTensor(rng, [29]).td;
    const pass = () => {
      let x = B.matmul(a, b);
      for (let i = 0; i < 12; i++) {
        const y = B.layerNorm(B.add(x, B.scale(x, 0.5)), w, bias, 1e-5);
        const s = B.softmax(y);
        B.releaseGpuTensor(x);
        x = B.add(s, B.gelu(y));
        spin(1); // the host between ops: the open batch ages past the limit, the device catches up
      }
      return [values(x), values(B.sum(x, 0)), values(B.matmulTransposed(x, b))];
    };
    pass(); // the kernels compiled (no early submission while dispatches wait for a compile)
    const b0 = B.stats().batches;
    const out = pass();
    return { out, batches: B.stats().batches - b0 };
  };
  const split = run(1);
  const whole = run(0);
  assert.ok(split.batches >= whole.batches + 6, `split into ${split.batches} batches against ${whole.batches}`);
  split.out.forEach((v, i) => assert.deepEqual(Array.from(v), Array.from(whole.out[i]), `result ${i}`));
});

function spin(ms: number): void {
  const end = performance.now() + ms;
  while (performance.now() < end) {
    // the scheduler reads performance.now()
  }
}
