// layerNorm, cross-entropy and embedding forward/backward against the reference (whose
// backward passes are themselves checked by finite differences in backend-ref.test.ts).
import { test } from "node:test";
import { ln4Shape } from "../ts/kernels/rows4.js";
import assert from "node:assert/strict";
import { makeBackend, recordingBackend } from "./backend-helpers.js";
import { Rng, randTensor, randIndices, assertClose, asF16Output, TOL, values } from "./harness.js";
import * as N from "./ref/nn.js";
import { ref } from "./ref/tensor.js";
import type { Dtype, TensorData } from "../ts/types.js";
import { indexCsr } from "../ts/ops/indices.js";

const B = makeBackend();

test("ln4Shape (LayerNorm forward, dx4 and the fused backward): the fewest threads a row (64 to 256) with at most 4 vectors each, else rows4's", () => {
  assert.deepEqual(ln4Shape(768), { v4: 3, wg: 64 });
  assert.deepEqual(ln4Shape(64), { v4: 1, wg: 64 });
  assert.deepEqual(ln4Shape(1028), { v4: 3, wg: 128 });
  assert.deepEqual(ln4Shape(3072), { v4: 4, wg: 256 }, "rows4Vpt's shape, as before");
  assert.deepEqual(ln4Shape(8192), { v4: 8, wg: 256 });
  assert.equal(ln4Shape(770), null);
});

test("layerNorm forward and backward (f32, f16; odd dims)", () => {
  const rng = new Rng(31);
  for (const dt of ["f32", "f16"] as Dtype[]) {
    // dims that are multiples of 4 take the 4-wide register kernels (rows4 and layernorm-bwd.ts on
    // 64 to 256 threads a row, ln4Shape: 768 is GPT-2's, 64 threads of 3 vectors)
    for (const shape of [[1, 5], [3, 37], [2, 3, 300], [1, 4099], [1, 4], [3, 12], [5, 768], [2, 1028], [2, 3072], [2, 4096], [1, 8192],
      // 64+ rows: dw/db as a column sum (layernorm_bwd_dwdb_cols): one chunk, or chunk partials
      // folded by colsum k2 (partial last chunk; 16-byte and scalar loads)
      [64, 3], [2, 65, 7], [1000, 12], [2, 2050, 40], [3001, 7], [4100, 64]]) {
      const dim = shape[shape.length - 1];
      const x = randTensor(rng, shape, dt, -2, 3);
      const w = randTensor(rng, [dim], dt), b = randTensor(rng, [dim], dt);
      const g = randTensor(rng, shape, dt);
      const tol = dt === "f16" ? { atol: 1e-2, rtol: 1e-2 } : { atol: 2e-5, rtol: 2e-4 };
      const f = N.layerNorm(x.ref, w.ref, b.ref, 1e-5);
      assertClose(B.layerNorm(x.td, w.td, b.td, 1e-5), dt === "f16" ? asF16Output(f) : f, tol, `layerNorm ${dt} [${shape}]`);
      const r = N.layerNormBackward(x.ref, w.ref, g.ref, 1e-5);
      const got = B.layerNormBackward(x.td, w.td, g.td, 1e-5);
      const btol = dt === "f16" ? { atol: 5e-2, rtol: 2e-2 } : { atol: 1e-4, rtol: 1e-3 };
      assertClose(got.dx, r.dx, btol, `dx ${dt} [${shape}]`);
      assertClose(got.dw, r.dw, btol, `dw ${dt} [${shape}]`);
      assertClose(got.db, r.db, btol, `db ${dt} [${shape}]`);
    }
  }
});

test("crossEntropy is the mean over rows; backward matches (4-wide and scalar kernels)", () => {
  const rng = new Rng(32);
  const v4 = recordingBackend();
  for (const dt of ["f32", "f16"] as Dtype[]) {
    // class counts that are multiples of 4 take xent_rows4 / xent_bwd4 by default; 2052 and
    // 50304 loop several vectors per thread; row 0 of each batch targets the last class
    for (const [n, c] of [[1, 2], [5, 9], [7, 300], [3, 4], [9, 2052], [2, 50304]]) {
      const logits = randTensor(rng, [n, c], dt, -4, 4);
      const t = randIndices(rng, [n], c);
      (t.data as Int32Array)[0] = c - 1;
      const tol = dt === "f16" ? { atol: 1e-2, rtol: 1e-2 } : { atol: 1e-5, rtol: 1e-4 };
      assertClose(v4.B.crossEntropy(logits.td, t), N.crossEntropy(logits.ref, t.data), tol, `crossEntropy ${dt} [${n}, ${c}]`);
      const g: TensorData = { shape: [], dtype: "f32", data: Float32Array.of(1.7) };
      assertClose(v4.B.crossEntropyBackward(logits.td, t, g), N.crossEntropyBackward(logits.ref, t.data, 1.7), dt === "f16" ? TOL.f16 : TOL.f32, `crossEntropyBackward ${dt} [${n}, ${c}]`);
    }
  }
  const xent = (names: Set<string>) => [...names].filter((n) => n.startsWith("xent_")).map((n) => n.replace(/_sg/, "")).sort();
  assert.deepEqual(xent(v4.names), ["xent_bwd4_f16", "xent_bwd4_f32", "xent_bwd_f16", "xent_bwd_f32", "xent_rows4_f16", "xent_rows4_f32", "xent_rows_f16", "xent_rows_f32"]);
});

test("embedding forward and backward (repeated indices accumulate)", () => {
  const rng = new Rng(33);
  for (const dt of ["f32", "f16"] as Dtype[]) {
    const w = randTensor(rng, [11, 7], dt);
    const idx = randIndices(rng, [3, 5], 11);
    const out = N.embedding(w.ref, { shape: [3, 5], data: idx.data });
    assertClose(B.embedding(w.td, idx), out, TOL.f32, `embedding ${dt}`);
    const g = randTensor(rng, [3, 5, 7], dt);
    const exp = N.embeddingBackward(idx.data, g.ref, 11);
    const tol = dt === "f16" ? TOL.f16 : TOL.f32;
    assertClose(B.embeddingBackward(idx, g.td, 11), exp, tol, `embeddingBackward ${dt} (host indices: CSR kernel)`);
    const devIdx = B.castDtype!(B.castDtype!(idx, "f32"), "i32"); // device-only: column kernel
    assertClose(B.embeddingBackward(devIdx, g.td, 11), exp, tol, `embeddingBackward ${dt} (device indices)`);
  }
});

test("embeddingBackward with device-only indices: vocabulary spans over many threads, bit-identical to the host-index CSR kernel", () => {
  const rng = new Rng(34);
  // [vocab, dim, count]: one span per thread row (small), several rows per span (vocab*dim > 64k,
  // last span partial), and a token repeated across most positions
  for (const [vocab, dim, count] of [[1000, 37, 513], [50304 / 16, 97, 777], [5, 3, 2049]]) {
    for (const dt of ["f32", "f16"] as Dtype[]) {
      const idx = randIndices(rng, [count], vocab);
      const ix = idx.data as Int32Array;
      if (vocab === 5) for (let i = 0; i < count; i += 3) ix[i] = 4;
      const g = randTensor(rng, [count, dim], dt);
      const exp = N.embeddingBackward(ix, g.ref, vocab);
      const host = B.embeddingBackward(idx, g.td, vocab);
      const dev = B.embeddingBackward(B.castDtype!(B.castDtype!(idx, "f32"), "i32"), g.td, vocab);
      const tol = dt === "f16" ? TOL.f16 : TOL.f32;
      assertClose(dev, exp, tol, `embeddingBackward device indices ${dt} [${vocab}, ${dim}] x ${count}`);
      // both sum each row's positions in increasing order
      assert.deepEqual(values(dev), values(host), `device vs host indices ${dt} [${vocab}, ${dim}] x ${count}`);
    }
  }
});

test("embeddingBackwardCsr: the CSR lists of host indices give embeddingBackward's result; bad lists are errors naming the call", () => {
  const rng = new Rng(35);
  const vocab = 29, dim = 11, count = 97;
  const idx = randIndices(rng, [count], vocab);
  const g = randTensor(rng, [count, dim], "f32");
  const { offsets, positions } = indexCsr("test", idx.data as Int32Array, vocab);
  const off: TensorData = { shape: [vocab + 1], dtype: "i32", data: offsets };
  const pos: TensorData = { shape: [count], dtype: "i32", data: positions };
  assert.deepEqual(values(B.embeddingBackwardCsr(off, pos, g.td, vocab)), values(B.embeddingBackward(idx, g.td, vocab)));
  assert.throws(() => B.embeddingBackwardCsr(off, pos, g.td, vocab + 1), /embeddingBackwardCsr: offsets must be i32 \[31\]/);
  const badPos: TensorData = { shape: [count], dtype: "i32", data: Int32Array.from(positions, (p, i) => (i === 5 ? count : p)) };
  assert.throws(() => B.embeddingBackwardCsr(off, badPos, g.td, vocab), /embeddingBackwardCsr: positions\[5\] = 97 is out of range \[0, 97\)/);
  const badOff: TensorData = { shape: [vocab + 1], dtype: "i32", data: Int32Array.from(offsets, (o, v) => (v === vocab ? o - 1 : o)) };
  assert.throws(() => B.embeddingBackwardCsr(badOff, pos, g.td, vocab), /embeddingBackwardCsr: offsets must run from 0 to the position count 97/);
  assert.throws(() => B.embeddingBackwardCsr(off, pos, randTensor(rng, [count + 1, dim], "f32").td, vocab), /embeddingBackwardCsr: gradOutput \[98, 11\]/);
  assert.throws(() => indexCsr("test", Int32Array.of(0, 29), vocab), /test: indices\[1\] = 29 is out of range \[0, 29\)/);
});

test("bad indices and shapes are errors naming the op, before the GPU sees them", () => {
  const w = B.randn([4, 3]);
  const bad: TensorData = { shape: [2], dtype: "i32", data: Int32Array.of(1, 4) };
  assert.throws(() => B.embedding(w, bad), /embedding: indices\[1\] = 4 is out of range \[0, 4\)/);
  assert.throws(() => B.crossEntropy(B.randn([2, 4]), { shape: [2], dtype: "i32", data: Int32Array.of(-1, 0) }), /crossEntropy: targets\[0\] = -1/);
  assert.throws(() => B.crossEntropy(B.randn([2, 4]), { shape: [3], dtype: "i32", data: Int32Array.of(0, 0, 0) }), /crossEntropy: targets \[3\] must have 2 elements for logits \[2, 4\]/);
  assert.throws(() => B.layerNorm(B.randn([2, 4]), B.ones([3]), B.zeros([3]), 1e-5), /layerNorm: weight \[3\] must be \[4\] for x \[2, 4\]/);
  assert.throws(() => B.embedding(w, B.fromArray([0.5], [1])), /embedding: indices must be i32/);
  void values;
  void ref;
});

test("device-only indices out of range are clamped on the GPU and reported in stats()", () => {
  const w = B.fromArray([1, 2, 3, 4, 5, 6, 7, 8], [4, 2]);
  void B.stats(); // clear the flag
  const idx = B.castDtype!(B.fromArray([3, 0], [2]), "i32"); // computed on the device: no host copy
  void B.embedding(w, idx).data;
  assert.equal(B.stats().clampedIndices, 0);
  const bad = B.castDtype!(B.fromArray([5, -1], [2]), "i32");
  const out = B.embedding(w, bad);
  assert.deepEqual([...(out.data as Float32Array)], [7, 8, 1, 2]);
  assert.equal(B.stats().clampedIndices, 1);
  assert.equal(B.stats().clampedIndices, 0, "flag cleared after reporting");
});
