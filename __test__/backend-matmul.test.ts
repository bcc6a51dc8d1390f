// SIMT matmul: odd sizes (not multiples of the 64 tile or 16 k-tile), batched with
// broadcast batch dims, transposed operands, f16 storage with f32 accumulation.
import { test } from "node:test";
import assert from "node:assert/strict";
import { makeBackend, onNative, withGpuLikeBackend } from "./backend-helpers.js";
import { Rng, randTensor, assertClose, asF16Output, values } from "./harness.js";
import { ref, type RefTensor } from "./ref/tensor.js";
import type { TensorData } from "../ts/types.js";
import * as N from "./ref/nn.js";
import type { Dtype } from "../ts/types.js";

const B = makeBackend();

test("matmul 2-D over odd shapes", () => {
  const rng = new Rng(51);
  for (const [m, k, n] of [[1, 1, 1], [17, 33, 65], [3, 70, 2], [65, 5, 9]]) {
    const a = randTensor(rng, [m, k], "f32"), b = randTensor(rng, [k, n], "f32");
    assertClose(B.matmul(a.td, b.td), N.matmul(a.ref, b.ref), { atol: 1e-4, rtol: 1e-4 }, `matmul ${m}x${k}x${n}`);
  }
});

/**
 * f32 products within 2e-5 of Σ|a||b| per element: the error bound of the tensor-core f32 path
 * (bf16 hi/lo operands, ~2^-16 per term) as well as the SIMT kernels'. Near-cancelling elements
 * (a small result of large terms) fail a tolerance relative to the result on the GPU host.
 */
function assertProductClose(got: TensorData, a: RefTensor, b: RefTensor, what: string): void {
  const want = N.matmul(a, b);
  const bound = N.matmul(ref(a.shape, a.data.map(Math.abs)), ref(b.shape, b.data.map(Math.abs)));
  const g = values(got);
  for (let i = 0; i < g.length; i++) {
    const err = Math.abs(g[i] - want.data[i]);
    if (!(err <= 1e-6 + 2e-5 * bound.data[i])) assert.fail(`${what}: element ${i} is ${g[i]}, expected ${want.data[i]} (|a||b| sum ${bound.data[i]})`);
  }
}

test("large outputs take the 128-wide tile: odd sizes and transposes", () => {
  const rng = new Rng(54);
  const a = randTensor(rng, [515, 19], "f32"), b = randTensor(rng, [19, 517], "f32");
  assertProductClose(B.matmul(a.td, b.td), a.ref, b.ref, "matmul 515x19x517");
  const bt = randTensor(rng, [517, 19], "f32");
  assertProductClose(B.matmulTransposed!(a.td, bt.td), a.ref, N.transpose(bt.ref, 0, 1), "matmulTransposed 515x19x517");
});

test("batched matmul with broadcast batch dims, f32 and f16", () => {
  const rng = new Rng(52);
  for (const dt of ["f32", "f16"] as Dtype[]) {
    for (const [sa, sb] of [[[2, 3, 5, 7], [2, 3, 7, 4]], [[3, 5, 7], [7, 4]], [[2, 1, 5, 7], [1, 3, 7, 4]], [[5, 7], [3, 7, 2]]]) {
      const a = randTensor(rng, sa, dt), b = randTensor(rng, sb, dt);
      const exp = N.matmul(a.ref, b.ref);
      assertClose(B.matmul(a.td, b.td), dt === "f16" ? asF16Output(exp) : exp, dt === "f16" ? { atol: 2e-2, rtol: 4e-3 } : { atol: 1e-4, rtol: 1e-4 }, `matmul ${dt} [${sa}] x [${sb}]`);
    }
  }
});

test("matmulTransposed (a @ b^T) and matmulTransposedA (a^T @ b)", () => {
  const rng = new Rng(53);
  const a = randTensor(rng, [2, 9, 13], "f32"), bt = randTensor(rng, [2, 11, 13], "f32");
  assertClose(B.matmulTransposed!(a.td, bt.td), N.matmul(a.ref, N.transpose(bt.ref, 1, 2)), { atol: 1e-4, rtol: 1e-4 }, "matmulTransposed");
  const at = randTensor(rng, [2, 13, 9], "f32"), b = randTensor(rng, [2, 13, 6], "f32");
  assertClose(B.matmulTransposedA!(at.td, b.td), N.matmul(N.transpose(at.ref, 1, 2), b.ref), { atol: 1e-4, rtol: 1e-4 }, "matmulTransposedA");
  const w = randTensor(rng, [6, 13], "f32");
  assertClose(B.matmulTransposed!(a.td, w.td), N.matmul(a.ref, N.transpose(w.ref, 0, 1)), { atol: 1e-4, rtol: 1e-4 }, "matmulTransposed 3-D x 2-D");
});

test("matmul shape errors name the op and shapes", () => {
  assert.throws(() => B.matmul(B.zeros([2, 3]), B.zeros([4, 5])), /matmul: inner dimensions differ: \[2, 3\] x \[4, 5\]/);
  assert.throws(() => B.matmul(B.zeros([3]), B.zeros([3, 5])), /matmul: needs tensors of rank >= 2/);
  assert.throws(() => B.matmul(B.zeros([2, 2, 3]), B.zeros([3, 3, 4])), /matmul: shapes \[2\] and \[3\] cannot be broadcast/);
});

// A shape class met untuned on a GPU runs the default plan at once and is tuned on request
// (HELIOS_AUTOTUNE=deferred, the default). Here lavapipe is presented as a discrete GPU so the
// tuner runs for real (SIMT candidates): the product must be right before and after tuning, the
// winner must land in the cache file (one entry), and a product of the same class must reuse it.
// __test__/matmul-deferred.test.ts covers the policy itself (eager mode, captures, no timing in calls).
test("matmul defers tuning a new shape class on a GPU-class device; tunePending caches the winner", { skip: !onNative() && "needs the native runtime" }, async () => {
  const { existsSync, readFileSync } = await import("node:fs");
  const { join } = await import("node:path");
  await withGpuLikeBackend({}, (G, dir) => {
    const rng = new Rng(57);
    const a = randTensor(rng, [70, 48], "f32"), b = randTensor(rng, [48, 90], "f32");
    assertClose(G.matmul(a.td, b.td), N.matmul(a.ref, b.ref), { atol: 1e-4, rtol: 1e-4 }, "untuned matmul 70x48x90");
    assert.equal(existsSync(join(dir, "matmul-tune-v1.json")), false, "nothing tuned inside the product call");
    assert.deepEqual({ ...G.tunePending(), ms: 0 }, { classes: 1, tuned: 1, ms: 0 });
    const cache = JSON.parse(readFileSync(join(dir, "matmul-tune-v1.json"), "utf8")) as Record<string, { variant: string; candidates: unknown[] }>;
    const entries = Object.entries(cache);
    assert.equal(entries.length, 1, "one shape class tuned");
    assert.match(entries[0][0], /f32->f32/);
    assert.ok(entries[0][1].candidates.length >= 2, "several candidates timed");
    const c = randTensor(rng, [66, 48], "f32");
    assertClose(G.matmul(c.td, b.td), N.matmul(c.ref, b.ref), { atol: 1e-4, rtol: 1e-4 }, "same class, cached winner");
    assert.equal(G.tunePending().classes, 0, "nothing left to tune");
  });
});
