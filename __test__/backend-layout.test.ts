// Layout and selection ops: transpose, slice, cat, scatterSlice, sliceQkv, broadcast,
// reshape, clone, casts, argmax, topk, gather, masks and dropout.
import { test } from "node:test";
import assert from "node:assert/strict";
import { makeBackend, recordingBackend, testRuntime } from "./backend-helpers.js";
import { HeliosBackend } from "../ts/backend.js";
import { Rng, randTensor, randIndices, assertClose, TOL, values, sampleOf } from "./harness.js";
import * as N from "./ref/nn.js";
import { broadcastTo } from "./ref/tensor.js";
import { roundF16 } from "../ts/f16.js";
import type { Dtype, TensorData } from "../ts/types.js";

const B = makeBackend();
const EXACT = { atol: 0, rtol: 0 };

test("transpose every pair of axes; slice; cat on every axis (f32, f16, i32)", () => {
  const rng = new Rng(41);
  for (const dt of ["f32", "f16", "i32"] as Dtype[]) {
    const a = randTensor(rng, [2, 3, 5], dt === "i32" ? "f32" : dt, -9, 9);
    const t = dt === "i32" ? sampleOf([2, 3, 5], a.ref.data.map(Math.round), "i32") : a;
    for (let i = 0; i < 3; i++) for (let j = 0; j < 3; j++) {
      assertClose(B.transpose(t.td, i, j), N.transpose(t.ref, i, j), EXACT, `transpose ${dt} ${i},${j}`);
    }
    assertClose(B.slice(t.td, [1, 0, 2], [2, 3, 5]), N.slice(t.ref, [1, 0, 2], [2, 3, 5]), EXACT, `slice ${dt}`);
    for (let ax = 0; ax < 3; ax++) {
      const shape = [2, 3, 5];
      shape[ax] = 4;
      const b = dt === "i32" ? sampleOf(shape, new Array(shape.reduce((p, q) => p * q)).fill(0).map((_, k) => k - 7), "i32") : randTensor(rng, shape, dt);
      assertClose(B.cat([t.td, b.td], ax), N.cat([t.ref, b.ref], ax), EXACT, `cat ${dt} axis ${ax}`);
    }
  }
});

test("scatterSlice, sliceQkv, broadcast, reshape, clone", () => {
  const rng = new Rng(42);
  const g = randTensor(rng, [2, 3], "f32");
  assertClose(B.scatterSlice(g.td, [4, 5], [1, 2], [3, 5]), N.scatterSlice(g.ref, [4, 5], [1, 2]), EXACT, "scatterSlice");
  const qkv = randTensor(rng, [5, 12], "f32");
  const parts = B.sliceQkv(qkv.td);
  parts.forEach((p, i) => assertClose(p, N.slice(qkv.ref, [0, 4 * i], [5, 4 * i + 4]), EXACT, `sliceQkv ${i}`));
  const s = randTensor(rng, [3, 1], "f32");
  assertClose(B.broadcast!(s.td, [2, 3, 4]), broadcastTo(s.ref, [2, 3, 4]), EXACT, "broadcast");
  const r = B.reshape(qkv.td, [3, -1, 2]);
  assert.deepEqual([...r.shape], [3, 10, 2]);
  assertClose(r, { shape: [3, 10, 2], data: qkv.ref.data }, EXACT, "reshape");
  assertClose(B.clone(qkv.td), qkv.ref, EXACT, "clone");
});

/** A backend on the test runtime that records the name of every kernel it compiles. */
test("16-byte chunked strided copies (head transposes, aligned slices, cat, sliceQkv) match the reference; misaligned ones take one element per thread", () => {
  const rng = new Rng(47);
  const on = recordingBackend({});
  for (const dt of ["f32", "f16", "i32"] as Dtype[]) {
    const chunk = dt === "f16" ? 8 : 4;
    const D = 2 * chunk;
    const shape = [2, 3, 5, D];
    const a = randTensor(rng, shape, dt === "i32" ? "f32" : dt, -9, 9);
    const t = dt === "i32" ? sampleOf(shape, a.ref.data.map(Math.round), "i32") : a;
    const { B } = on;
    // [B, T, H, D] <-> [B, H, T, D]: contiguous D on both sides
    assertClose(B.transpose(t.td, 1, 2), N.transpose(t.ref, 1, 2), EXACT, `head transpose ${dt}`);
    assertClose(B.slice(t.td, [0, 1, 2, chunk], [2, 3, 5, D]), N.slice(t.ref, [0, 1, 2, chunk], [2, 3, 5, D]), EXACT, `aligned slice ${dt}`);
    // misaligned start: must take the one-element path and still be exact
    assertClose(B.slice(t.td, [0, 0, 0, 1], [2, 3, 5, D]), N.slice(t.ref, [0, 0, 0, 1], [2, 3, 5, D]), EXACT, `misaligned slice ${dt}`);
    const b = dt === "i32" ? sampleOf([2, 3, 5, chunk], new Array(30 * chunk).fill(0).map((_, k) => k - 11), "i32") : randTensor(rng, [2, 3, 5, chunk], dt);
    assertClose(B.cat([t.td, b.td], 3), N.cat([t.ref, b.ref], 3), EXACT, `cat last axis ${dt}`);
    const qkv = randTensor(rng, [3, 3 * D], dt === "i32" ? "f32" : dt);
    if (dt !== "i32") B.sliceQkv(qkv.td).forEach((p, i) => assertClose(p, N.slice(qkv.ref, [0, D * i], [3, D * i + D]), EXACT, `sliceQkv ${dt} ${i}`));
  }
  const chunked = (names: Set<string>) => [...names].filter((n) => n.startsWith("copy_strided_") && n.endsWith("_v128")).sort();
  assert.deepEqual(chunked(on.names), ["copy_strided_f16_v128", "copy_strided_f32_v128", "copy_strided_i32_v128"]);
  assert.ok(on.names.has("copy_strided_f32"), "the misaligned slice used the one-element kernel");
});

test("castDtype f32 <-> f16 rounds to nearest even", () => {
  const a = sampleOf([5], [1, 1 + 2 ** -11, 1 + 3 * 2 ** -11, 70000, -2.5e-8], "f32");
  const h = B.castDtype!(a.td, "f16");
  assert.equal(h.dtype, "f16");
  assert.deepEqual([...values(h)], [...a.ref.data].map(roundF16));
  const back = B.castDtype!(h, "f32");
  assert.deepEqual([...values(back)], [...a.ref.data].map(roundF16));
});

test("argmax (first max wins), topk (ties by lower index), gather", () => {
  const rng = new Rng(43);
  const a = randTensor(rng, [3, 4, 5], "f32");
  for (const ax of [undefined, 0, 1, 2, -1]) assertClose(B.argmax(a.td, ax), N.argmax(a.ref, ax), EXACT, `argmax ${ax}`);
  const ties = sampleOf([6], [1, 3, 3, 2, 3, 0], "f32");
  assert.deepEqual([...values(B.argmax(ties.td))], [1]);
  for (const ax of [0, 1, 2]) {
    const k = Math.min(3, a.td.shape[ax]);
    const got = B.topk(a.td, k, ax);
    const exp = N.topk(a.ref, k, ax);
    assertClose(got.values, exp.values, EXACT, `topk values axis ${ax}`);
    assertClose(got.indices, exp.indices, EXACT, `topk indices axis ${ax}`);
  }
  const tk = B.topk(ties.td, 4);
  assert.deepEqual([...values(tk.indices)], [1, 2, 4, 3]);
  const idx = randIndices(rng, [3, 2, 5], 4);
  assertClose(B.gather(a.td, 1, idx), N.gather(a.ref, 1, { shape: [...idx.shape], data: idx.data as Int32Array }), EXACT, "gather axis 1");
});

test("causalMask and maskedFill (broadcast and Alpha's tiling)", () => {
  assertClose(B.causalMask(5), N.causalMask(5), EXACT, "causalMask");
  const rng = new Rng(44);
  const a = randTensor(rng, [2, 3, 4], "f32");
  const m = sampleOf([3, 4], [1, 0, 0, 1, 0, 1, 0, 0, 1, 1, 1, 0], "f32");
  assertClose(B.maskedFill(a.td, m.td, -1e9), N.maskedFill(a.ref, m.ref.data, -1e9), EXACT, "maskedFill broadcast");
  const flat = sampleOf([6], [1, 0, 0, 1, 0, 1], "f32");
  assertClose(B.maskedFill(a.td, flat.td, -Infinity), N.maskedFill(a.ref, flat.ref.data, -Infinity), EXACT, "maskedFill tiled");
});

test("dropoutMask is bit-identical to Alpha's DropoutRng", () => {
  for (const [n, seed, counter, p] of [[1000, 42, 0, 0.1], [777, -5, 12345, 0.5], [33, 2147483647, 3, 0.0]] as const) {
    const got = B.dropoutMask!([n], seed, counter, p).data as Float32Array;
    const exp = N.dropoutMask(n, seed, counter, p);
    for (let i = 0; i < n; i++) assert.equal(got[i], exp[i], `mask[${i}] seed=${seed} counter=${counter}`);
  }
  assert.throws(() => B.dropoutMask!([3], 1, 0, 1), /dropoutMask: p=1 must be in \[0, 1\)/);
});

test("bad layout arguments are errors naming the op and shapes", () => {
  const a = B.zeros([2, 3]);
  assert.throws(() => B.slice(a, [0, 0], [2, 4]), /slice: bounds \[0, 4\) at dim 1 are outside shape \[2, 3\]/);
  assert.throws(() => B.reshape(a, [4, 2]), /reshape: cannot reshape \[2, 3\] to \[4, 2\]/);
  assert.throws(() => B.transpose(a, 0, 2), /transpose: axis 2 is out of range/);
  assert.throws(() => B.cat([a, B.zeros([3, 3])], 1), /cat: shapes \[2, 3\] and \[3, 3\] differ at dim 0/);
  assert.throws(() => B.topk(a, 4), /topk: k=4 must be in \[0, 3\]/);
  const i: TensorData = { shape: [2, 3], dtype: "i32", data: Int32Array.of(0, 1, 2, 3, 0, 1) };
  assert.throws(() => B.gather(a, 0, i), /gather: indices\[2\] = 2 out of range \[0, 2\)/);
  void TOL;
});
