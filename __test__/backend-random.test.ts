// randn: standard normals generated on the device, reproducible from the backend's seed.
import { test } from "node:test";
import assert from "node:assert/strict";
import { HeliosBackend } from "../ts/backend.js";
import { testRuntime } from "./backend-helpers.js";
import { values } from "./harness.js";

const backend = (seed?: number) => new HeliosBackend({ runtime: testRuntime(), seed, validation: true });

function moments(v: Float64Array): { mean: number; variance: number; kurtosis: number; beyond3: number } {
  let s = 0, q = 0, k = 0, t = 0;
  for (const x of v) {
    s += x; q += x * x; k += x ** 4;
    if (Math.abs(x) > 3) t++;
  }
  const n = v.length;
  return { mean: s / n, variance: q / n, kurtosis: k / n, beyond3: t / n };
}

test("randn f32 has the moments of a standard normal (odd size, 5-sigma bounds)", () => {
  const n = 256 * 1024 + 3;
  const m = moments(values(backend(11).randn([n])));
  // standard errors: mean 1/sqrt(n), variance sqrt(2/n), fourth moment sqrt(96/n), tail p(1-p)/n
  assert.ok(Math.abs(m.mean) < 5 / Math.sqrt(n), `mean ${m.mean}`);
  assert.ok(Math.abs(m.variance - 1) < 5 * Math.sqrt(2 / n), `variance ${m.variance}`);
  assert.ok(Math.abs(m.kurtosis - 3) < 5 * Math.sqrt(96 / n), `fourth moment ${m.kurtosis}`);
  const p = 0.0026998;
  assert.ok(Math.abs(m.beyond3 - p) < 5 * Math.sqrt((p * (1 - p)) / n), `P(|x| > 3) = ${m.beyond3}`);
});

test("randn neighbours are uncorrelated and every element is finite", () => {
  const v = values(backend(3).randn([509, 257]));
  let c = 0;
  for (let i = 1; i < v.length; i++) c += v[i] * v[i - 1];
  assert.ok(Math.abs(c / v.length) < 5 / Math.sqrt(v.length), `lag-1 correlation ${c / v.length}`);
  assert.ok(v.every(Number.isFinite));
  assert.ok(new Set(v).size > v.length * 0.99, "values repeat");
});

test("randn is reproducible from the seed and differs between calls and seeds", () => {
  const a = backend(5), b = backend(5), c = backend(6);
  const a1 = values(a.randn([1000])), a2 = values(a.randn([1000]));
  assert.deepEqual(values(b.randn([1000])), a1, "same seed, first call");
  assert.deepEqual(values(b.randn([1000])), a2, "same seed, second call");
  const c1 = values(c.randn([1000]));
  const same = (x: Float64Array, y: Float64Array) => x.filter((v, i) => v === y[i]).length;
  assert.equal(same(a1, a2), 0, "successive calls share values");
  assert.equal(same(a1, c1), 0, "different seeds share values");
});

test("randn f16 rounds the same draws; shapes with 0 or 1 element; i32 keeps whole numbers", () => {
  const f32 = values(backend(9).randn([3, 333]));
  const f16 = values(backend(9).randn([3, 333], "f16"));
  assert.equal(f16.length, f32.length);
  for (let i = 0; i < f32.length; i++) assert.ok(Math.abs(f16[i] - f32[i]) <= Math.abs(f32[i]) * 2 ** -10 + 2 ** -24, `element ${i}: ${f16[i]} vs ${f32[i]}`);
  const B = backend();
  assert.deepEqual(B.randn([0, 4]).shape, [0, 4]);
  assert.equal(values(B.randn([1])).length, 1);
  const ints = values(B.randn([64], "i32"));
  assert.ok(ints.every(Number.isInteger));
});
