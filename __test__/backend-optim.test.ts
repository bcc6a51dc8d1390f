// adamwStep (Alpha's argument list, in place), addInplace, scaleInplace, and program order:
// a fused expression recorded before an in-place update still sees the old values.
import { test } from "node:test";
import assert from "node:assert/strict";
import { makeBackend } from "./backend-helpers.js";
import { Rng, randTensor, assertClose, values } from "./harness.js";
import * as N from "./ref/nn.js";
import type { TensorData } from "../ts/types.js";

const B = makeBackend();

test("adamwStep matches the reference over several steps, with and without weight decay", () => {
  const rng = new Rng(71);
  for (const wd of [0, 0.1]) {
    const p0 = randTensor(rng, [5, 33], "f32");
    const p = B.fromArray([...p0.ref.data], [5, 33]);
    const m = B.zeros([5, 33]), v = B.zeros([5, 33]);
    const rp = p0.ref.data.slice(), rm = new Float64Array(165), rv = new Float64Array(165);
    let b1p = 1, b2p = 1;
    for (let step = 0; step < 3; step++) {
      const g = randTensor(rng, [5, 33], "f32");
      b1p *= 0.9;
      b2p *= 0.999;
      B.adamwStep!(p, g.td, m, v, 1e-2, 0.9, 0.999, 1e-8, wd, 1 - b1p, 1 - b2p, 0.5);
      N.adamw(rp, g.ref.data, rm, rv, 1e-2, 0.9, 0.999, 1e-8, wd, 1 - b1p, 1 - b2p, 0.5);
    }
    assertClose(p, { shape: [5, 33], data: rp }, { atol: 1e-5, rtol: 1e-4 }, `params wd=${wd}`);
    assertClose(m, { shape: [5, 33], data: rm }, { atol: 1e-6, rtol: 1e-4 }, `m wd=${wd}`);
    assertClose(v, { shape: [5, 33], data: rv }, { atol: 1e-7, rtol: 1e-4 }, `v wd=${wd}`);
  }
});

test("adamwStep on plain host tensors updates their device copies; data reads them back", () => {
  const p: TensorData = { shape: [3], dtype: "f32", data: Float32Array.of(1, 2, 3) };
  const g: TensorData = { shape: [3], dtype: "f32", data: Float32Array.of(0.5, -0.5, 1) };
  const m: TensorData = { shape: [3], dtype: "f32", data: new Float32Array(3) };
  const v: TensorData = { shape: [3], dtype: "f32", data: new Float32Array(3) };
  const before = B.stats();
  B.adamwStep!(p, g, m, v, 0.1, 0.9, 0.999, 1e-8, 0, 0.1, 0.001);
  const after = B.stats();
  assert.equal(after.readbacks - before.readbacks, 0, "no readback until data is read");
  assert.equal(after.cpuFallbacks.hostInplace ?? 0, before.cpuFallbacks.hostInplace ?? 0);
  const rp = Float64Array.of(1, 2, 3), rm = new Float64Array(3), rv = new Float64Array(3);
  N.adamw(rp, Float64Array.of(0.5, -0.5, 1), rm, rv, 0.1, 0.9, 0.999, 1e-8, 0, 0.1, 0.001);
  assertClose(p, { shape: [3], data: rp }, { atol: 1e-6, rtol: 1e-5 }, "host params");
  assertClose(m, { shape: [3], data: rm }, { atol: 1e-6, rtol: 1e-5 }, "host m");
});

test("in-place ops keep program order for pending fused readers", () => {
  const a = B.fromArray([1, 2, 3], [3]);
  const pending = B.mul(a, B.fromArray([10, 10, 10], [3])); // not yet dispatched
  B.addInplace!(a, B.fromArray([1, 1, 1], [3]));
  B.scaleInplace!(a, 2);
  assert.deepEqual([...values(pending)], [10, 20, 30]);
  assert.deepEqual([...values(a)], [4, 6, 8]);
  assert.throws(() => B.addInplace!(a, B.zeros([2, 3])), /addInplace: b \[2, 3\] must broadcast to a \[3\]/);
});

test("adamwStep argument errors name the op", () => {
  assert.throws(() => B.adamwStep!(B.zeros([3]), B.zeros([4]), B.zeros([3]), B.zeros([3]), 1, 0.9, 0.9, 1e-8, 0, 1, 1), /adamwStep: grads \[4\] does not match params \[3\]/);
});
