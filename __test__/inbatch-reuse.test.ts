// In-batch reuse (src/runtime/resources.rs, reusable_in_batch): a buffer released inside an
// open batch is leased again inside it, and every access stays in program order. Random chains
// of dependent dispatches, uploads, fills and copies over leases released as soon as they are
// dead, checked against a host reference with synchronization validation on (a missing barrier
// is a validation message, failing the test); then the same inside a capture replayed with new
// inputs, and a captured training step whose pool stays flat over replays.
import assert from "node:assert/strict";
import { test } from "node:test";
import {
  groupsFor, pipeline, randInt, randomF32, readF32, rng, rt, useDevice,
} from "./helpers.js";
import { push } from "./kernels/index.js";
import { Trainer } from "../train/trainer.js";
import { asTrainBackend } from "../train/backend.js";
import { initHostParams } from "../train/params.js";
import { DryRuntime } from "../bench/train/memsim.js";
import { HeliosBackend } from "../ts/backend.js";
import { makeBackend, onNative } from "./backend-helpers.js";
import { TINY_OPT, patternBatch } from "./train-helpers.js";
import type { GPTConfig } from "../train/config.js";

useDevice();
const N = 1024;
const BYTES = 4 * N;

/** One step of a random program over leases; `x` is the program's input. */
type Op =
  | { k: "axpb"; src: number; dst: number; a: number; b: number }
  | { k: "upload"; dst: number; data: Float32Array }
  | { k: "fill"; dst: number; value: number }
  | { k: "copy"; src: number; dst: number }
  | { k: "out"; src: number; slot: number };

/**
 * A random program: values live in numbered slots (slot 0 is the input); each new value gets a
 * fresh lease, and a value is released as soon as the program will not read it again.
 */
function randomProgram(seed: number, steps: number, outputs: number): { ops: Op[]; lastUse: number[] } {
  const r = rng(seed);
  // First a constant the host writes while the batch is open (into a fresh buffer: a direct
  // write, not a command of the batch), read once and released at once. A capture must keep its
  // buffer out of reuse: replays read it again, and a later lease would overwrite it.
  const ops: Op[] = [
    { k: "upload", dst: 1, data: randomF32(N, r) },
    { k: "axpb", src: 1, dst: 2, a: 0.5, b: -0.25 },
    { k: "out", src: 2, slot: 0 },
  ];
  let values = 3;
  let out = 1;
  const live = [0, 2];
  for (let i = 0; i < steps; i++) {
    const src = live[randInt(r, 0, live.length - 1)];
    const roll = r();
    const dst = values++;
    if (roll < 0.6) ops.push({ k: "axpb", src, dst, a: 2 * r() - 1, b: 2 * r() - 1 });
    else if (roll < 0.75) ops.push({ k: "upload", dst, data: randomF32(N, r) });
    else if (roll < 0.85) ops.push({ k: "fill", dst, value: 2 * r() - 1 });
    else ops.push({ k: "copy", src, dst });
    live.push(dst);
    if (out < outputs && r() < 0.2) ops.push({ k: "out", src: live[randInt(r, 0, live.length - 1)], slot: out++ });
    // Forget values at random (slot 0 stays readable): the last read decides the release.
    while (live.length > 4) live.splice(randInt(r, 1, live.length - 1), 1);
  }
  while (out < outputs) ops.push({ k: "out", src: live[live.length - 1], slot: out++ });
  const lastUse: number[] = new Array(values).fill(-1);
  ops.forEach((op, i) => {
    if ("src" in op) lastUse[op.src] = i;
    if ("dst" in op) lastUse[op.dst] = Math.max(lastUse[op.dst], i);
  });
  return { ops, lastUse };
}

/** The program on the host. */
function reference(ops: Op[], x: Float32Array, outputs: number): Float32Array[] {
  const v = new Map<number, Float32Array>([[0, x]]);
  const out: Float32Array[] = new Array(outputs);
  for (const op of ops) {
    if (op.k === "axpb") v.set(op.dst, v.get(op.src)!.map((s) => op.a * s + op.b));
    else if (op.k === "upload") v.set(op.dst, op.data);
    else if (op.k === "fill") v.set(op.dst, new Float32Array(N).fill(op.value));
    else if (op.k === "copy") v.set(op.dst, v.get(op.src)!.slice());
    else out[op.slot] = v.get(op.src)!.slice();
  }
  return out;
}

/** Records the program into the open batch: a lease per value, released right after its last use. */
function record(ops: Op[], lastUse: number[], x: number, outs: number[]): void {
  const h = new Map<number, number>([[0, x]]);
  const axpb = pipeline("axpb");
  const done = (i: number, ...slots: number[]) => {
    for (const s of slots) if (s !== 0 && lastUse[s] === i) rt.releaseBuffer(h.get(s)!);
  };
  ops.forEach((op, i) => {
    if (op.k !== "out") h.set(op.dst, rt.leaseBuffer(BYTES));
    if (op.k === "axpb") {
      rt.recordDispatch(axpb, [h.get(op.src)!, h.get(op.dst)!], [groupsFor(N)], push([["u", N], ["f", op.a], ["f", op.b]]));
    } else if (op.k === "upload") rt.uploadBuffer(h.get(op.dst)!, op.data);
    else if (op.k === "fill") rt.fillBuffer(h.get(op.dst)!, new Uint32Array(Float32Array.of(op.value).buffer)[0]);
    else if (op.k === "copy") rt.copyBuffer(h.get(op.src)!, h.get(op.dst)!, 0, 0, BYTES);
    else rt.copyBuffer(h.get(op.src)!, outs[op.slot], 0, 0, BYTES);
    if (op.k === "out") done(i, op.src);
    else done(i, ...("src" in op ? [op.src, op.dst] : [op.dst]));
  });
}

function assertClose(got: Float32Array, want: Float32Array, what: string): void {
  for (let i = 0; i < want.length; i++) {
    const tol = 1e-5 * Math.max(1, Math.abs(want[i]));
    if (!(Math.abs(got[i] - want[i]) <= tol)) assert.fail(`${what}[${i}]: ${got[i]} vs ${want[i]}`);
  }
}

test("released leases are reused inside the open batch, in program order", () => {
  rt.trimPool();
  const outputs = 6;
  for (let seed = 1; seed <= 4; seed++) {
    const { ops, lastUse } = randomProgram(seed, 60, outputs);
    const input = randomF32(N, rng(100 + seed));
    const x = rt.createBuffer(BYTES);
    rt.uploadBuffer(x, input);
    const outs = Array.from({ length: outputs }, () => rt.createBuffer(BYTES));
    const before = rt.poolStats();
    rt.beginBatch();
    record(ops, lastUse, x, outs);
    rt.waitTimeline(rt.submitBatch());
    const after = rt.poolStats();
    const leases = ops.filter((o) => o.k !== "out").length;
    assert.ok((after.inBatchReuses ?? 0) > (before.inBatchReuses ?? 0), `seed ${seed}: no in-batch reuse`);
    if (seed === 1) assert.ok(after.allocations - before.allocations <= 8, `seed 1: ${after.allocations - before.allocations} allocations for ${leases} leases`);
    const want = reference(ops, input, outputs);
    outs.forEach((o, i) => assertClose(readF32(o), want[i], `seed ${seed} output ${i}`));
    for (const b of [x, ...outs]) rt.destroyBuffer(b);
  }
});

test("a captured batch that reuses its own leases replays correctly with new inputs; pool flat", { skip: !rt.captureBatch && "no captures" }, () => {
  const outputs = 5;
  const { ops, lastUse } = randomProgram(77, 80, outputs);
  const x = rt.createBuffer(BYTES);
  const outs = Array.from({ length: outputs }, () => rt.createBuffer(BYTES));
  rt.trimPool();
  rt.beginBatch();
  record(ops, lastUse, x, outs);
  const graph = rt.captureBatch!();
  const s0 = rt.poolStats();
  assert.ok((s0.inBatchReuses ?? 0) > 0, "the capture should reuse its released leases");
  for (let rep = 0; rep < 5; rep++) {
    const input = randomF32(N, rng(500 + rep));
    rt.uploadBuffer(x, input);
    // Two replays back to back: the second's first writes follow the first's last reads.
    rt.replayBatch!(graph);
    rt.waitTimeline(rt.replayBatch!(graph));
    const want = reference(ops, input, outputs);
    outs.forEach((o, i) => assertClose(readF32(o), want[i], `replay ${rep} output ${i}`));
    const s = rt.poolStats();
    assert.equal(s.allocations, s0.allocations, "replays must not allocate");
    assert.equal(s.peakBytes, s0.peakBytes, "pool peak grew over replays");
  }
  // Other work while the capture lives must not get its (pinned) buffers.
  const other = rt.leaseBuffer(BYTES);
  assert.equal(rt.poolStats().allocations, s0.allocations + 1, "a lease got a buffer pinned by a live capture");
  rt.releaseBuffer(other);
  rt.destroyCapture!(graph);
  for (const b of [x, ...outs]) rt.destroyBuffer(b);
  rt.trimPool();
});

const MICRO: GPTConfig = { vocab: 64, blockSize: 16, layers: 2, heads: 2, dim: 16, dropout: 0.1 };

test("a captured training step recycles its temporaries: in-batch reuses, pool peak flat over replays", { skip: !onNative() && "the mock runtime has no captured batches" }, () => {
  const H = makeBackend({ capture: true }) as HeliosBackend;
  H.purgeBufferPools();
  const tr = new Trainer(asTrainBackend(H), MICRO, TINY_OPT, { init: initHostParams(MICRO, 3), seed: 3, capture: true });
  assert.ok(tr.capturing);
  const peaks: number[] = [];
  for (let s = 0; s < 8; s++) {
    const r = tr.step(patternBatch(MICRO.vocab, 2, 16, s));
    assert.ok(Number.isFinite(r.loss));
    peaks.push(H.stats().pool.peakBytes);
  }
  const pool = H.stats().pool;
  assert.ok((pool.inBatchReuses ?? 0) > 0, "the captured step should reuse released temporaries");
  assert.deepEqual(peaks, peaks.map(() => peaks[0]), `pool peak per step: ${peaks}`);
  tr.dropCapture();
});

test("memsim: in-batch reuse brings a step's pool peak near its live set", () => {
  const cfg: GPTConfig = { vocab: 512, blockSize: 64, layers: 3, heads: 4, dim: 64, dropout: 0 };
  const run = (reuse: boolean) => {
    const dry = new DryRuntime(undefined, reuse);
    // kernels compiled one at a time: grouping a cold step's compiles has new leases take
    // released buffers over in TypeScript (ts/exec/scheduler.ts), which would hide the pool's rule
    const B = asTrainBackend(new HeliosBackend({ runtime: dry, config: { compileThreads: 1 } }));
    const tr = new Trainer(B, cfg, TINY_OPT, { seed: 1, capture: true });
    const idx = new Int32Array(4 * 64);
    tr.step({ idx, targets: idx, B: 4, T: 64 });
    tr.step({ idx, targets: idx, B: 4, T: 64 });
    return dry.poolStats();
  };
  const on = run(true), off = run(false);
  assert.equal(on.peakLeasedBytes, off.peakLeasedBytes, "same live set either way");
  assert.ok(off.peakBytes > 1.5 * on.peakBytes, `peak without reuse ${off.peakBytes}, with ${on.peakBytes}`);
  assert.ok(on.peakBytes < 1.5 * on.peakLeasedBytes!, `pool peak ${on.peakBytes} vs live set ${on.peakLeasedBytes}`);
});
