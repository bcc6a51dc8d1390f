// Captured batches through HeliosBackend: replay with new inputs written by writeTensor, the
// device-scalar variants (adamwStepDevice, dropoutMaskAt) against their push-constant forms,
// and fromArray on typed arrays. Native runtime only (the mock has no captured batches).
import { test } from "node:test";
import assert from "node:assert/strict";
import { makeBackend, onNative } from "./backend-helpers.js";

const skip = !onNative() && "the mock runtime has no captured batches";

function rand(n: number, seed: number): Float32Array {
  let s = seed >>> 0;
  return Float32Array.from({ length: n }, () => {
    s = (Math.imul(s, 1664525) + 1013904223) >>> 0;
    return s / 4294967296 - 0.5;
  });
}

test("replay recomputes from inputs written between replays", { skip }, () => {
  const H = makeBackend();
  const n = 1000;
  const x = H.fromArray(rand(n, 1), [n]);
  const w = H.fromArray(rand(n, 2), [n]);
  H.beginCapture();
  const y = H.sum(H.mul(H.exp(x), w));
  const c = H.endCapture(y);
  for (let k = 0; k < 4; k++) {
    const xs = rand(n, 10 + k), ws = rand(n, 2);
    H.writeTensor(x, xs);
    H.replay(c);
    let ref = 0;
    for (let i = 0; i < n; i++) ref += Math.exp(xs[i]) * ws[i];
    const got = (y.data as Float32Array)[0];
    assert.ok(Math.abs(got - ref) < 1e-4 * Math.max(1, Math.abs(ref)), `replay ${k}: ${got} vs ${ref}`);
  }
  H.destroyCapture(c);
  assert.throws(() => H.replay(c), /destroyed/);
});

test("adamwStepDevice matches adamwStep; skip leaves everything untouched", { skip }, () => {
  const H = makeBackend();
  const n = 777;
  const [p0, g0, m0, v0] = [1, 2, 3, 4].map((s) => rand(n, s));
  const v0p = v0.map((x) => Math.abs(x));
  const mk = () => [H.fromArray(p0, [n]), H.fromArray(g0, [n]), H.fromArray(m0, [n]), H.fromArray(v0p, [n])];
  const a = mk(), b = mk();
  const [lr, b1, b2, eps, wd, bc1, bc2, gs] = [0.01, 0.9, 0.95, 1e-8, 0.1, 0.19, 0.0975, 0.37];
  H.adamwStep(a[0], a[1], a[2], a[3], lr, b1, b2, eps, wd, bc1, bc2, gs);
  H.adamwStepDevice(b[0], b[1], b[2], b[3], H.fromArray([lr, bc1, bc2, gs, 0], [5]), b1, b2, eps, wd);
  for (let j = 0; j < 4; j += j === 0 ? 2 : 1) {
    const x = a[j].data as Float32Array, y = b[j].data as Float32Array;
    for (let i = 0; i < n; i++) assert.ok(Math.abs(x[i] - y[i]) <= 1e-6 * Math.max(1, Math.abs(x[i])), `tensor ${j}[${i}]: ${x[i]} vs ${y[i]}`);
  }
  const before = Float32Array.from(b[0].data as Float32Array);
  H.adamwStepDevice(b[0], b[1], b[2], b[3], H.fromArray([lr, bc1, bc2, gs, 1], [5]), b1, b2, eps, wd);
  assert.deepEqual(b[0].data, before);
});

test("dropoutMaskAt reads its counter on the device and matches dropoutMask", { skip }, () => {
  const H = makeBackend();
  const ctr = H.fromArray(Int32Array.from([41]), [1], "i32");
  for (const offset of [0, 3]) {
    const a = H.dropoutMask([37, 11], 1234, 41 + offset, 0.3).data;
    const b = H.dropoutMaskAt([37, 11], 1234, ctr, offset, 0.3).data;
    assert.deepEqual(b, a);
  }
  H.writeTensor(ctr, [1000]);
  assert.deepEqual(H.dropoutMaskAt([5, 9], 7, ctr, 2, 0.5).data, H.dropoutMask([5, 9], 7, 1002, 0.5).data);
});
