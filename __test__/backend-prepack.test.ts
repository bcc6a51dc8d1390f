// Prepacked matmul weights (ts/ops/prepack.ts, HELIOS_MATMUL_PREPACK): a 2-D B reused by products
// of one form across a host round trip is copied once into its other layout; every write to its buffer — an upload, an
// in-place op, an in-place device update through a view, a capture's replay — must make the next
// product read the new values, and releasing the weight must free the copy.
import { test } from "node:test";
import assert from "node:assert/strict";
import { makeBackend, onNative, withGpuLikeBackend } from "./backend-helpers.js";
import { Rng, randTensor, assertClose, asF16Output } from "./harness.js";
import * as N from "./ref/nn.js";
import { ref, type RefTensor } from "./ref/tensor.js";
import type { HeliosBackend } from "../ts/backend.js";
import type { Engine } from "../ts/engine.js";
import { packedCopyOf, packPays, prepackedB, PACK_MIN_GAIN, PACK_PAYBACK_USES } from "../ts/ops/prepack.js";
import type { MatmulProblem } from "../ts/kernels/matmul/index.js";
import type { TensorData } from "../ts/types.js";

const TOL = { atol: 1e-4, rtol: 1e-4 };
const engineOf = (B: HeliosBackend): Engine => (B as unknown as { E: Engine }).E;
const counts = (B: HeliosBackend) => {
  const s = B.stats();
  return { packs: s.matmulPrepacks, reads: s.matmulPrepackedReads };
};

/** x·Wᵀ on the backend against the fp64 reference of the values W holds now. */
function checkTimesWT(B: HeliosBackend, x: { td: TensorData; ref: RefTensor }, W: TensorData, what: string): void {
  const w = ref(W.shape, W.data as Float32Array);
  assertClose(B.matmulTransposed!(x.td, W), N.matmul(x.ref, N.transpose(w, 0, 1)), TOL, what);
}

test("a reused N×K weight is packed once and read by later products (f32, f16, 3-D x)", () => {
  const B = makeBackend({ matmulPrepack: "on" });
  const rng = new Rng(71);
  const x = randTensor(rng, [37, 53], "f32"), w = randTensor(rng, [29, 53], "f32");
  const W = B.fromArray([...w.ref.data], [29, 53]);
  for (let i = 0; i < 4; i++) checkTimesWT(B, x, W, `x·Wᵀ call ${i + 1}`);
  assert.deepEqual(counts(B), { packs: 1, reads: 3 }, "packed at the second product (after reading the first), read by the later ones");
  const x3 = randTensor(rng, [2, 5, 53], "f32");
  checkTimesWT(B, x3, W, "3-D x · 2-D Wᵀ (broadcast B) reads the copy");
  assert.deepEqual(counts(B), { packs: 1, reads: 4 });

  const xh = randTensor(rng, [19, 40], "f16"), wh = randTensor(rng, [33, 40], "f16");
  const exp = asF16Output(N.matmul(xh.ref, N.transpose(wh.ref, 0, 1)));
  for (let i = 0; i < 4; i++) assertClose(B.matmulTransposed!(xh.td, wh.td), exp, { atol: 2e-2, rtol: 4e-3 }, `f16 host tensors, call ${i + 1}`);
  assert.equal(counts(B).packs, 1, "host (non-device) weights are uploaded per call, never packed");
  const Wh = B.fromArray([...wh.ref.data], [33, 40], "f16");
  for (let i = 0; i < 4; i++) assertClose(B.matmulTransposed!(xh.td, Wh), exp, { atol: 2e-2, rtol: 4e-3 }, `f16 device weight, call ${i + 1}`);
  assert.equal(counts(B).packs, 2, "the f16 device weight is packed");
});

test("every kind of write to the weight's buffer makes the next product read the new values", () => {
  const B = makeBackend({ matmulPrepack: "on" });
  const rng = new Rng(72);
  const x = randTensor(rng, [21, 35], "f32");
  const n = 17 * 35;
  const W = B.fromArray([...randTensor(rng, [17, 35], "f32").ref.data], [17, 35]);
  const packTwice = (what: string) => {
    const before = counts(B).packs;
    checkTimesWT(B, x, W, `${what}: first product`);
    checkTimesWT(B, x, W, `${what}: second product`);
    assert.equal(counts(B).packs, before + 1, `${what}: a fresh copy for the new version`);
  };
  packTwice("initial");
  B.writeTensor(W, randTensor(rng, [17, 35], "f32").ref.data);
  packTwice("after writeTensor");
  B.addInplace(W, B.fromArray([...randTensor(rng, [17, 35], "f32").ref.data], [17, 35]));
  packTwice("after addInplace");
  B.scaleInplace(W, -0.5);
  packTwice("after scaleInplace");
  const z = () => B.fromArray(new Array(n).fill(0), [17, 35]);
  B.adamwStep(W, B.fromArray([...randTensor(rng, [17, 35], "f32").ref.data], [17, 35]), z(), z(), 0.1, 0.9, 0.99, 1e-8, 0, 1, 1);
  packTwice("after adamwStep");
  // in place on the same buffer through a view: the lease, not the tensor, counts the write
  const view = B.reshape(W, [n]);
  const hyper = B.fromArray([0.1, 1, 1, 1, 0], [5]);
  B.adamwStepDevice(view, B.fromArray([...randTensor(rng, [n], "f32").ref.data], [n]), B.fromArray(new Array(n).fill(0), [n]), B.fromArray(new Array(n).fill(0), [n]), hyper, 0.9, 0.99, 1e-8, 0);
  packTwice("after adamwStepDevice through a view");
});

test("a replayed capture that updates the weight invalidates its copy; no packing inside a capture", { skip: !onNative() && "captures need the native runtime" }, () => {
  const B = makeBackend({ matmulPrepack: "on" });
  const rng = new Rng(73);
  const x = randTensor(rng, [23, 31], "f32");
  const n = 13 * 31;
  const W = B.fromArray([...randTensor(rng, [13, 31], "f32").ref.data], [13, 31]);
  const g = B.fromArray([...randTensor(rng, [n], "f32").ref.data], [13, 31]);
  const m = B.fromArray(new Array(n).fill(0), [13, 31]), v = B.fromArray(new Array(n).fill(0), [13, 31]);
  const hyper = B.fromArray([0.05, 1, 1, 1, 0], [5]);
  B.beginCapture();
  B.adamwStepDevice(W, g, m, v, hyper, 0.9, 0.99, 1e-8, 0);
  const inCapture = [B.matmulTransposed!(x.td, W), B.matmulTransposed!(x.td, W)];
  const cap = B.endCapture(...inCapture);
  assert.equal(counts(B).packs, 0, "nothing packed while capturing");
  B.replay(cap);
  const after1 = Array.from(W.data as Float32Array);
  assertClose(inCapture[1], N.matmul(x.ref, N.transpose(ref([13, 31], after1), 0, 1)), TOL, "the captured product");
  checkTimesWT(B, x, W, "eager after replay 1");
  checkTimesWT(B, x, W, "eager after replay 1, packed");
  assert.equal(counts(B).packs, 1);
  B.replay(cap);
  checkTimesWT(B, x, W, "eager after replay 2 reads the replayed update");
  B.destroyCapture(cap);
});

test("products of the other form, the kill switch, and release", () => {
  const rng = new Rng(74);
  const x = randTensor(rng, [9, 12], "f32"), dy = randTensor(rng, [9, 10], "f32");
  const w = randTensor(rng, [10, 12], "f32");
  const B = makeBackend({ matmulPrepack: "on" });
  const W = B.fromArray([...w.ref.data], [10, 12]);
  // a training step's pattern: x·Wᵀ forward (three times: the LM head's row chunks), dy·W backward,
  // read once at the end (the loss), then the update
  for (let step = 0; step < 3; step++) {
    const w = ref(W.shape, W.data as Float32Array);
    const ys = [0, 1, 2].map(() => B.matmulTransposed!(x.td, W));
    const dx = B.matmul(dy.td, W);
    ys.forEach((y, i) => assertClose(y, N.matmul(x.ref, N.transpose(w, 0, 1)), TOL, `forward ${step}, chunk ${i}`));
    assertClose(dx, N.matmul(dy.ref, w), TOL, `backward ${step}`);
    B.scaleInplace(W, 0.75);
  }
  assert.equal(counts(B).packs, 0, "every version used before one host read: nothing to pack");
  checkTimesWT(B, x, W, "reuse 1");
  checkTimesWT(B, x, W, "reuse 2, after reading reuse 1");
  const E = engineOf(B);
  const copy = packedCopyOf(E, W as never);
  assert.ok(copy && !copy.released, "packed copy held");
  B.releaseGpuTensor(W);
  B.syncGpu(); // a small released tensor keeps its buffer until the next round trip
  assert.ok(copy.released, "released with its source");
  assert.equal(packedCopyOf(E, W as never), null);

  const off = makeBackend({ matmulPrepack: "off" });
  const W2 = off.fromArray([...w.ref.data], [10, 12]);
  for (let i = 0; i < 4; i++) checkTimesWT(off, x, W2, `off ${i}`);
  assert.deepEqual(counts(off), { packs: 0, reads: 0 }, "HELIOS_MATMUL_PREPACK=off");
  const auto = makeBackend({ matmulPrepack: "auto" });
  const W3 = auto.fromArray([...w.ref.data], [10, 12]);
  for (let i = 0; i < 4; i++) checkTimesWT(auto, x, W3, `auto ${i}`);
  if (onNative()) assert.equal(counts(auto).packs, 0, "auto on a CPU device: nothing is measured, nothing packed");
});

test("the pay rule: a measurable gain that repays the copy over the products to come", () => {
  assert.equal(packPays(1.0, 1.0 - PACK_MIN_GAIN / 2, 1e6, 16), false, "inside the tuner's noise");
  assert.equal(packPays(1.0, 0.9, 1e6, 16), true, "10 % on a 1 ms product, 1 MB weight");
  assert.equal(packPays(0.01, 0.009, 100e6, 16), false, "a 10 µs product cannot repay copying 100 MB in 16 products");
  assert.equal(packPays(0.01, 0.009, 100e6, 1e5), true, "but can in 100000");
  assert.equal(packPays(0.9, 1.0, 1e3, 16), false, "slower");
});

test("prepackedB asks once per version and form, after a host round trip, with the products to come", () => {
  const B = makeBackend({ matmulPrepack: "auto" });
  const E = engineOf(B);
  const W = B.fromArray(Array.from({ length: 6 * 4 }, (_, i) => i - 7.5), [6, 4]);
  const problem: MatmulProblem = { m: 3, n: 6, k: 4, batch: 1, transA: false, transB: true, broadcastB: false, dtype: "f32", outDtype: "f32" };
  const asked: { p: MatmulProblem; bytes: number; uses: number }[] = [];
  const never = (p: MatmulProblem, bytes: number, uses: number) => { asked.push({ p, bytes, uses }); return false; };
  // versions of 4, 5 and 7 products, a round trip after each: no history, then the previous
  // version's count less the one product before the question
  for (const [products, expectUses] of [[4, PACK_PAYBACK_USES], [5, 4 - 1], [7, 5 - 1]]) {
    asked.length = 0;
    for (let i = 0; i < products; i++) {
      assert.equal(prepackedB(E, W, problem, never).B, W);
      E.roundTrips++;
    }
    assert.equal(asked.length, 1, "asked once per version");
    assert.deepEqual([asked[0].p.transB, asked[0].bytes, asked[0].uses], [false, 6 * 4 * 4, expectUses]);
    B.scaleInplace(W, 1);
  }
  asked.length = 0;
  for (let i = 0; i < 9; i++) prepackedB(E, W, problem, never);
  assert.equal(asked.length, 0, "no round trip between the products of a version: never asked");
  const always = () => true;
  const W2 = B.fromArray(Array.from({ length: 6 * 4 }, (_, i) => 0.25 * i), [6, 4]);
  assert.equal(prepackedB(E, W2, problem, always).B, W2, "first product: as is");
  E.roundTrips++;
  const packed = prepackedB(E, W2, problem, always);
  assert.equal(packed.transB, false);
  assert.deepEqual(packed.B.shape, [4, 6]);
  assert.deepEqual(Array.from(packed.B.data as Float32Array), Array.from({ length: 24 }, (_, i) => 0.25 * ((i % 6) * 4 + Math.floor(i / 6))), "the copy is Wᵀ");
});

// On lavapipe presented as a GPU the tuner and the layout race run for real (SIMT plans): whichever
// layout wins, every product must be right and the other layout's class must have been tuned.
test("auto decides from the tuning cache alone: no layout race inside the caller's loop", { skip: !onNative() && "needs the native runtime" }, async () => {
  const { readFileSync } = await import("node:fs");
  const { join } = await import("node:path");
  await withGpuLikeBackend({ matmulPrepack: "auto" }, (G, dir) => {
    const rng = new Rng(75);
    const x = randTensor(rng, [66, 40], "f32");
    const W = G.fromArray([...randTensor(rng, [72, 40], "f32").ref.data], [72, 40]);
    for (let i = 0; i < 4; i++) checkTimesWT(G, x, W, `auto on a GPU-class device, call ${i + 1}`);
    // tuning is deferred (HELIOS_AUTOTUNE unset): the classes met so far are tuned on request
    assert.equal(G.tunePending().classes, 1);
    const keys = () => Object.keys(JSON.parse(readFileSync(join(dir, "matmul-tune-v1.json"), "utf8")) as Record<string, unknown>);
    assert.equal(keys().length, 1, "only the form that ran was tuned (the other layout is never tuned as a side effect)");
    assert.equal(counts(G).packs, 0, "no pack without both layouts' records");
    // once the other layout has a record (a product of that form ran), the records decide
    const Wt = G.transpose(W, 0, 1);
    assertClose(G.matmul(x.td, Wt), N.matmul(x.ref, N.transpose(ref(W.shape, W.data as Float32Array), 0, 1)), TOL, "x·W");
    G.tunePending();
    assert.equal(keys().length, 2);
    const W2 = G.fromArray([...randTensor(rng, [72, 40], "f32").ref.data], [72, 40]);
    const before = counts(G);
    for (let i = 0; i < 4; i++) checkTimesWT(G, x, W2, `auto with both records, call ${i + 1}`);
    const packs = counts(G).packs - before.packs, reads = counts(G).reads - before.reads;
    assert.ok(packs <= 1 && reads === 3 * packs, `packed at most once, read by every later product (${packs}, ${reads})`);
  });
});
