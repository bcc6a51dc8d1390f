// crossEntropyWithGrad: crossEntropy's loss and crossEntropyBackward's dlogits in one dispatch
// (xent_fused, ts/kernels/loss.ts), against the float64 reference and against the two ops.
import { test } from "node:test";
import assert from "node:assert/strict";
import { makeBackend, recordingBackend, testRuntime } from "./backend-helpers.js";
import { HeliosBackend } from "../ts/backend.js";
import { Rng, randTensor, randIndices, assertClose, assertArrayClose, values } from "./harness.js";
import * as N from "./ref/nn.js";
import type { Dtype, TensorData } from "../ts/types.js";
import { xentFusedWorkgroup } from "../ts/kernels/loss.js";

const B = makeBackend();

test("xentFusedWorkgroup: the most invocations up to 1024 the device allows, a power of two", () => {
  assert.equal(xentFusedWorkgroup(1024), 1024);
  assert.equal(xentFusedWorkgroup(4096), 1024);
  assert.equal(xentFusedWorkgroup(1000), 512);
  assert.equal(xentFusedWorkgroup(256), 256);
});

/**
 * `scale`: the largest |value| (g / N for dlogits). f16 results round once more than the reference
 * (to 2^-11 relative, or half the smallest subnormal, 2^-25); against the two ops, one f16 ulp.
 */
const tolOf = (dt: Dtype, scale: number) => (dt === "f16" ? { atol: 2 ** -24 + 1e-6 * scale, rtol: 2e-3 } : { atol: 1e-6 * scale, rtol: 1e-4 });
const sameTol = (dt: Dtype, scale: number) => (dt === "f16" ? { atol: 2 ** -24, rtol: 2 ** -10 } : { atol: 1e-7 * scale, rtol: 1e-5 });

const fusedNames = (names: Set<string>) => [...names].filter((s) => s.startsWith("xent_fused")).map((s) => s.replace(/_sg/, "")).sort();

function check(R: typeof B, rng: Rng, dt: Dtype, n: number, c: number): void {
  const logits = randTensor(rng, [n, c], dt, -4, 4);
  const t = randIndices(rng, [n], c);
  (t.data as Int32Array)[0] = 0;
  (t.data as Int32Array)[n - 1] = c - 1;
  const g = randTensor(rng, [], dt, 0.5, 2);
  const gv = values(g.td)[0];
  const what = `${dt} [${n}, ${c}]`;
  const { loss, dlogits } = R.crossEntropyWithGrad(logits.td, t, g.td);
  assert.equal(loss.dtype, dt, `loss dtype ${what}`);
  assert.equal(dlogits.dtype, dt, `dlogits dtype ${what}`);
  assertClose(loss, N.crossEntropy(logits.ref, t.data), tolOf(dt, 1), `loss ${what}`);
  assertClose(dlogits, N.crossEntropyBackward(logits.ref, t.data, gv), tolOf(dt, gv / n), `dlogits ${what}`);
  const loss2 = R.crossEntropy(logits.td, t), dl2 = R.crossEntropyBackward(logits.td, t, g.td);
  assert.deepEqual([...loss.shape], [...loss2.shape]);
  assertArrayClose(values(loss), values(loss2), sameTol(dt, 1), `loss vs crossEntropy ${what}`);
  assertArrayClose(values(dlogits), values(dl2), sameTol(dt, gv / n), `dlogits vs crossEntropyBackward ${what}`);
}

test("crossEntropyWithGrad matches the reference and crossEntropy + crossEntropyBackward (f32, f16; odd sizes)", () => {
  const rng = new Rng(41);
  const R = recordingBackend();
  for (const dt of ["f32", "f16"] as Dtype[]) {
    for (const n of [1, 3, 37]) for (const c of [1, 2, 5, 33, 1000, 4099]) check(R.B, rng, dt, n, c);
    // GPT-2's rows
    check(R.B, rng, dt, 3, 50304);
  }
  assert.deepEqual(fusedNames(R.names), ["xent_fused_w1024_f16", "xent_fused_w1024_f32"]);
});

test("crossEntropyWithGrad: rows of 4-wide vectors are fused whatever their length; others take the two kernels", () => {
  const rng = new Rng(42);
  const R = recordingBackend();
  for (const dt of ["f32", "f16"] as Dtype[]) for (const c of [4, 8, 4104, 12296, 65544]) check(R.B, rng, dt, dt === "f16" ? 5 : 2, c);
  assert.deepEqual(fusedNames(R.names), ["xent_fused_w1024_f16", "xent_fused_w1024_f32"]);
  const F = recordingBackend();
  for (const dt of ["f32", "f16"] as Dtype[]) check(F.B, rng, dt, 2, 4099);
  assert.deepEqual(fusedNames(F.names), []);
});

test("crossEntropyWithGrad without subgroups (shared-memory tree) and on a 256-invocation device", () => {
  const rng = new Rng(43);
  const base = testRuntime();
  const info = base.getDeviceInfo();
  const runtime = { ...base, getDeviceInfo: () => ({ ...info, subgroupSize: 0, maxWorkgroupSize: 256 }) };
  const S = new HeliosBackend({ runtime, validation: true });
  // 256 invocations per row (3000, 8200: xentFusedWorkgroup(256)), the two kernels (7)
  for (const dt of ["f32", "f16"] as Dtype[]) for (const c of [7, 3000, 8200]) check(S, rng, dt, 3, c);
});

test("crossEntropyWithGrad: the two ops' errors; device-only targets out of range are clamped and reported", () => {
  const logits = B.randn([2, 4]);
  const one: TensorData = { shape: [], dtype: "f32", data: Float32Array.of(1) };
  const bad: TensorData = { shape: [2], dtype: "i32", data: Int32Array.of(1, 4) };
  const err = (f: () => unknown) => {
    try { f(); } catch (e) { return e as Error & { code?: string }; }
    assert.fail("expected an error");
  };
  const mine = err(() => B.crossEntropyWithGrad(logits, bad, one)), theirs = err(() => B.crossEntropyBackward(logits, bad, one));
  assert.equal(mine.code, theirs.code);
  assert.equal(mine.constructor, theirs.constructor);
  assert.equal(mine.message, theirs.message.replace("crossEntropyBackward", "crossEntropyWithGrad"));
  assert.match(mine.message, /crossEntropyWithGrad: targets\[1\] = 4 is out of range \[0, 4\)/);
  assert.throws(() => B.crossEntropyWithGrad(logits, { shape: [3], dtype: "i32", data: Int32Array.of(0, 0, 0) }, one), /crossEntropyWithGrad: targets \[3\] must have 2 elements for logits \[2, 4\]/);
  assert.throws(() => B.crossEntropyWithGrad(logits, Object.assign({}, bad, { data: Int32Array.of(0, 1) }), B.ones([2])), /crossEntropyWithGrad: gradOutput must be a scalar, got \[2\]/);
  assert.throws(() => B.crossEntropyWithGrad(B.randn([2, 3, 4]), bad, one), /crossEntropyWithGrad: logits must be \[N, C\]/);

  void B.stats(); // clear the flag
  const dev = B.castDtype!(B.fromArray([1, 7], [2]), "i32"); // computed on the device: no host copy
  const got = B.crossEntropyWithGrad(logits, dev, one);
  const clamped: TensorData = { shape: [2], dtype: "i32", data: Int32Array.of(1, 3) };
  assert.deepEqual(values(got.dlogits), values(B.crossEntropyBackward(logits, clamped, one)));
  assert.deepEqual(values(got.loss), values(B.crossEntropyWithGrad(logits, clamped, one).loss));
  assert.equal(B.stats().clampedIndices, 1);
});

test("crossEntropyWithGrad on empty logits: crossEntropy's NaN and an empty gradient", () => {
  const out = B.crossEntropyWithGrad(B.zeros([0, 5]), { shape: [0], dtype: "i32", data: new Int32Array(0) }, B.ones([1]));
  assert.ok(Number.isNaN(values(out.loss)[0]));
  assert.deepEqual([...out.dlogits.shape], [0, 5]);
});
