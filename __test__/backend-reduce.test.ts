// Reductions over every axis (NumPy keepdims), softmax/logSoftmax, norms and finiteness.
import { test } from "node:test";
import assert from "node:assert/strict";
import { makeBackend, recordingBackend } from "./backend-helpers.js";
import { planColumns } from "../ts/kernels/colsum.js";
import { Rng, randTensor, assertClose, asF16Output, TOL, values, sampleOf } from "./harness.js";
import * as N from "./ref/nn.js";
import type { Dtype, TensorData } from "../ts/types.js";

const B = makeBackend();
const SHAPES = [[7], [3, 5], [2, 3, 9], [1, 4, 1], [300]];

test("sum and mean over every axis, keepdims both ways, and over everything", () => {
  const rng = new Rng(21);
  for (const dt of ["f32", "f16"] as Dtype[]) {
    const tol = dt === "f16" ? { atol: 1e-2, rtol: 4e-3 } : { atol: 1e-4, rtol: 1e-4 };
    for (const shape of SHAPES) {
      const a = randTensor(rng, shape, dt);
      for (const mean of [false, true]) {
        for (const keep of [false, true]) {
          const fn = (ax?: number) => (mean ? B.mean(a.td, ax, keep) : B.sum(a.td, ax, keep));
          const ref = (ax?: number) => {
            const r = N.sum(a.ref, ax, keep, mean);
            return dt === "f16" ? asF16Output(r) : r;
          };
          assertClose(fn(), ref(), tol, `${mean ? "mean" : "sum"} all ${dt} [${shape}] keep=${keep}`);
          for (let ax = -shape.length; ax < shape.length; ax++) {
            assertClose(fn(ax), ref(ax), tol, `${mean ? "mean" : "sum"} axis ${ax} ${dt} [${shape}] keep=${keep}`);
          }
        }
      }
    }
  }
});

test("whole-tensor sum of a large tensor goes through partials", () => {
  const rng = new Rng(22);
  const a = randTensor(rng, [20001], "f32");
  assertClose(B.sum(a.td), N.sum(a.ref), { atol: 1e-2, rtol: 1e-4 }, "sum 20001");
});

test("softmax and logSoftmax over every axis", () => {
  const rng = new Rng(23);
  for (const dt of ["f32", "f16"] as Dtype[]) {
    for (const shape of [[5], [3, 17], [2, 4, 3], [2, 300], [1, 4100]]) {
      const a = randTensor(rng, shape, dt, -6, 6);
      for (let ax = -shape.length; ax < shape.length; ax++) {
        const sm = N.softmax(a.ref, ax), ls = N.logSoftmax(a.ref, ax);
        const tol = dt === "f16" ? TOL.f16 : TOL.f32;
        assertClose(B.softmax(a.td, ax), dt === "f16" ? asF16Output(sm) : sm, tol, `softmax ${dt} [${shape}] ax ${ax}`);
        assertClose(B.logSoftmax(a.td, ax), dt === "f16" ? asF16Output(ls) : ls, dt === "f16" ? { atol: 1e-2, rtol: 4e-3 } : tol, `logSoftmax ${dt} [${shape}] ax ${ax}`);
      }
    }
  }
  const big = sampleOf([2, 3], [1000, 0, -1000, 88, 89, 90], "f32");
  assertClose(B.softmax(big.td), N.softmax(big.ref), TOL.f32, "softmax of large logits");
});

// Few output lines and a long reduced axis take the column sum (colsum, one or two passes):
// partial last chunks, a single line, inner > 1, f16 in and out.
test("sum and mean over a long axis with few outputs (column-sum path)", () => {
  const rng = new Rng(22);
  for (const dt of ["f32", "f16"] as Dtype[]) {
    const tol = dt === "f16" ? { atol: 2e-2, rtol: 4e-3 } : { atol: 1e-4, rtol: 1e-4 };
    for (const [shape, ax] of [[[64, 1], 0], [[300, 7], 0], [[1000, 3], 0], [[2, 129, 5], 1], [[8193, 2], 0], [[77, 1, 3], 0]] as [number[], number][]) {
      const a = randTensor(rng, shape, dt);
      for (const mean of [false, true]) {
        const r = N.sum(a.ref, ax, false, mean);
        const got = mean ? B.mean(a.td, ax) : B.sum(a.td, ax);
        assertClose(got, dt === "f16" ? asF16Output(r) : r, tol, `${mean ? "mean" : "sum"} long axis ${ax} ${dt} [${shape}]`);
      }
    }
  }
});

// The column sum (ts/kernels/colsum.ts) against float64 sums: odd widths (the scalar form: 1, 7,
// 769, 3071), widths of whole 16-byte vectors (8 halves, 4 floats), row counts around the split
// threshold (63 takes reduce_strided, 64+ the column sum) and past chunk boundaries, outer > 1.
test("column sums: f16 and f32, odd and vector widths, every row count, against float64", () => {
  const rng = new Rng(25);
  const cases: [number[], number][] = [
    [[65, 1], 0], [[16385, 1], 0], [[1000, 7], 0], [[16385, 7], 0], [[65, 769], 0], [[4097, 769], 0], [[65, 3071], 0], [[1000, 3071], 0],
    [[63, 768], 0], [[64, 768], 0], [[4099, 768], 0], [[16385, 64], 0], [[3, 4001, 24], 1], [[2, 700, 9], 1], [[1, 768], 0],
  ];
  for (const dt of ["f16", "f32"] as Dtype[]) {
    for (const [shape, ax] of cases) {
      const a = randTensor(rng, shape, dt, -2, 3);
      const r = N.sum(a.ref, ax, false, false);
      const tol = { atol: 2e-3, rtol: 1e-4 };
      assertClose(B.sumF32(a.td, ax), r, tol, `sumF32 ${dt} [${shape}] axis ${ax}`);
      assertClose(B.sum(a.td, ax), dt === "f16" ? asF16Output(r) : r, dt === "f16" ? { atol: 2e-2, rtol: 2e-3 } : tol, `sum ${dt} [${shape}] axis ${ax}`);
    }
  }
  const ints = sampleOf([3000, 8], Array.from({ length: 24000 }, (_, i) => ((i * 7919) % 201) - 100), "i32");
  assert.deepEqual([...values(B.sum(ints.td, 0))], [...N.sum(ints.ref, 0).data], "i32 column sums are exact");
});

test("column sums: which kernels run (split, single pass, plain) and the plan for GPT-2's bias gradients", () => {
  const rng = new Rng(26);
  const kernelsOf = (shape: number[], dt: Dtype) => {
    const r = recordingBackend();
    const a = randTensor(rng, shape, dt);
    assertClose(r.B.sumF32(a.td, 0), N.sum(a.ref, 0), { atol: 2e-3, rtol: 1e-4 }, `sumF32 [${shape}]`);
    return [...r.names].sort();
  };
  assert.deepEqual(kernelsOf([4099, 768], "f16"), ["colsum_f16_f32_v8_tx16", "colsum_f32_f32_v4_tx16"]);
  assert.deepEqual(kernelsOf([300, 16], "f32"), ["colsum_f32_f32_v4_tx4"]);
  assert.deepEqual(kernelsOf([1000, 769], "f16"), ["colsum_f16_f32_v1_tx128", "colsum_f32_f32_v1_tx64"]);
  assert.deepEqual(kernelsOf([63, 768], "f16"), ["reduce_strided_f16_f32"]);
  assert.deepEqual(kernelsOf([70, 16384], "f32"), ["reduce_strided_f32"]);
  // [16384, n] f16: 8 halves per thread, 16 column threads x 16 row lanes (256-byte row segments),
  // 2-8 workgroups per SM of a 132-SM GPU, <= 64 partial rows
  for (const n of [768, 2304, 3072]) {
    const p = planColumns("f16", 1, 16384, n);
    assert.equal(p.vec, 8);
    assert.equal(p.tx, 16);
    assert.ok(p.chunks >= 2 && p.chunks <= 64, `chunks ${p.chunks}`);
    const groups = p.groups[0] * p.groups[1];
    assert.ok(groups >= 2 * 132 && groups <= 8 * 132, `[16384, ${n}]: ${groups} workgroups`);
    assert.ok(p.chunk * p.chunks >= 16384 && p.chunk * (p.chunks - 1) < 16384);
  }
});

test("column sums and LayerNorm dw/db are identical bit for bit across runs", () => {
  const rng = new Rng(27);
  const bits = (t: TensorData) => Buffer.from(Float32Array.from(values(t)).buffer).toString("hex");
  for (const dt of ["f16", "f32"] as Dtype[]) {
    const a = randTensor(rng, [16385, 72], dt, -2, 3);
    const first = bits(B.sumF32(a.td, 0));
    for (let run = 0; run < 2; run++) assert.equal(bits(B.sumF32(a.td, 0)), first, `sumF32 ${dt} run ${run + 2}`);
    const x = randTensor(rng, [4100, 64], dt), g = randTensor(rng, [4100, 64], dt), w = randTensor(rng, [64], dt);
    const once = B.layerNormBackward(x.td, w.td, g.td, 1e-5);
    const twice = B.layerNormBackward(x.td, w.td, g.td, 1e-5);
    assert.equal(bits(twice.dw), bits(once.dw), `layerNorm dw ${dt}`);
    assert.equal(bits(twice.db), bits(once.db), `layerNorm db ${dt}`);
  }
});

test("sumF32: f32 sums of f16 and f32 data over every axis and path, unrounded (no f16 overflow)", () => {
  const rng = new Rng(24);
  for (const dt of ["f16", "f32"] as Dtype[]) {
    for (const [shape, ax] of [[[3, 5], 0], [[3, 5], 1], [[2, 3, 9], 1], [[1000, 3], 0], [[8193, 2], 0], [[7], undefined]] as [number[], number | undefined][]) {
      const a = randTensor(rng, shape, dt, 0, 40);
      const got = B.sumF32(a.td, ax);
      assert.equal(got.dtype, "f32");
      // 8193 values up to 40 sum past f16's 65504: an f32 result holds it
      assertClose(got, N.sum(a.ref, ax, false, false), { atol: 1e-2, rtol: 1e-4 }, `sumF32 ${dt} [${shape}] axis ${ax}`);
    }
  }
  assert.throws(() => B.sumF32(B.fromArray([1, 2], [2], "i32")), /sumF32: expects a floating-point tensor/);
});

// Rows whose length is a multiple of 4 take the 4-wide register kernels (rows4): one vector
// per thread up to 8, partial last chunks, rows shorter than a workgroup, the 4096-wide row.
test("softmax and logSoftmax on 4-wide rows (dims multiple of 4, every vectors-per-thread)", () => {
  const rng = new Rng(24);
  for (const dt of ["f32", "f16"] as Dtype[]) {
    for (const shape of [[1, 4], [3, 8], [5, 12], [2, 1020], [3, 1028], [2, 4096], [1, 8192], [2, 3, 36]]) {
      const a = randTensor(rng, shape, dt, -6, 6);
      const sm = N.softmax(a.ref, -1), ls = N.logSoftmax(a.ref, -1);
      const tol = dt === "f16" ? TOL.f16 : TOL.f32;
      assertClose(B.softmax(a.td), dt === "f16" ? asF16Output(sm) : sm, tol, `softmax rows4 ${dt} [${shape}]`);
      assertClose(B.logSoftmax(a.td), dt === "f16" ? asF16Output(ls) : ls, dt === "f16" ? { atol: 1e-2, rtol: 4e-3 } : tol, `logSoftmax rows4 ${dt} [${shape}]`);
    }
  }
  const big = sampleOf([2, 4], [1000, 0, -1000, 88, 89, 90, -3, 2], "f32");
  assertClose(B.softmax(big.td), N.softmax(big.ref), TOL.f32, "softmax rows4 of large logits");
});

test("sumOfSquares, totalSumOfSquares, checkFinite", () => {
  const rng = new Rng(24);
  const ts = [randTensor(rng, [3, 7], "f32"), randTensor(rng, [9000], "f32"), randTensor(rng, [5], "f16")];
  const sq = (r: { data: Float64Array }) => r.data.reduce((p, v) => p + v * v, 0);
  for (const t of ts) assertClose(B.sumOfSquares(t.td), { shape: [], data: Float64Array.of(sq(t.ref)) }, { atol: 1e-3, rtol: 1e-4 }, "sumOfSquares");
  const total = ts.reduce((p, t) => p + sq(t.ref), 0);
  assertClose(B.totalSumOfSquares(ts.map((t) => t.td)), { shape: [], data: Float64Array.of(total) }, { atol: 1e-3, rtol: 1e-4 }, "totalSumOfSquares");
  assert.deepEqual([...values(B.totalSumOfSquares([]))], [0]);
  assert.deepEqual([...values(B.checkFinite(ts[1].td))], [0]);
  for (const bad of [NaN, Infinity, -Infinity]) {
    const d = new Float32Array(9001).fill(1);
    d[8999] = bad;
    assert.deepEqual([...values(B.checkFinite({ shape: [9001], dtype: "f32", data: d }))], [1], `checkFinite(${bad})`);
  }
});

test("bad axis is an error naming the op", () => {
  assert.throws(() => B.sum(B.zeros([2, 3]), 2), /sum: axis 2 is out of range for a tensor of rank 2/);
  assert.throws(() => B.softmax(B.zeros([2, 3]), -3), /softmax: axis -3 is out of range/);
});
