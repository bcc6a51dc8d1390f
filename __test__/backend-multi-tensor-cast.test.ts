// castTransposeMulti (HELIOS_MULTI_TENSOR_CAST): every matrix's copy and transposed copy in another
// dtype, up to CAST_T_MULTI_MAX matrices per cast_transpose_multi dispatch, against a float64
// round-to-nearest-even reference bit for bit and against the per-matrix castDtype + transpose it
// replaces (the switch off), on odd shapes (1x1, 7x3, tiles cut at every edge, 768x2304, 5003x77;
// GPT-2's 50304x768 f32 is over lavapipe's 128 MiB binding limit), many matrices (several groups),
// f32, f64 and f16 inputs; f32 copies; refreshed by every replay of a capture; dispatch counts;
// argument errors.
import { test } from "node:test";
import assert from "node:assert/strict";
import { makeBackend, onNative } from "./backend-helpers.js";
import { Rng } from "./harness.js";
import type { Dtype, TensorData } from "../ts/types.js";
import type { HeliosBackend } from "../ts/backend.js";
import { CAST_T_MULTI_MAX, CAST_T_TILE } from "../ts/kernels/multi-tensor.js";

const multi = makeBackend({ multiTensorCast: true });
const single = makeBackend({ multiTensorCast: false });

/** floor(log2(a)) for a > 0, exact (Math.log2 may round up just below a power of two). */
function exponent(a: number): number {
  let e = Math.floor(Math.log2(a));
  if (2 ** e > a) e--;
  if (2 ** (e + 1) <= a) e++;
  return e;
}

/** f16 bits of a float64 value, round to nearest even, computed in float64 (not with ts/f16.ts). */
function f16Ref(x: number): number {
  const sign = x < 0 || Object.is(x, -0) ? 0x8000 : 0;
  const a = Math.abs(x);
  if (Number.isNaN(a)) return 0x7e00;
  if (a >= 65520) return sign | 0x7c00; // the halfway point above 65504 and beyond round to inf
  if (a === 0) return sign;
  const q = 2 ** (Math.max(exponent(a), -14) - 10); // the f16 spacing at a's binade (subnormals share 2^-24)
  const m = a / q; // exact: q is a power of two
  let r = Math.floor(m);
  const frac = m - r;
  if (frac > 0.5 || (frac === 0.5 && r % 2 === 1)) r++;
  const v = r * q; // the rounded magnitude, exact
  if (v === 0) return sign;
  if (v < 2 ** -14) return sign | (v / 2 ** -24);
  const ve = exponent(v);
  return sign | ((ve + 15) << 10) | (v / 2 ** (ve - 10) - 1024);
}

function f16ToNumber(h: number): number {
  const e = (h >> 10) & 0x1f, f = h & 0x3ff, s = h & 0x8000 ? -1 : 1;
  return e === 0 ? s * f * 2 ** -24 : e === 31 ? (f ? NaN : s * Infinity) : s * (1024 + f) * 2 ** (e - 25);
}

/**
 * Never-zero values spread over f16's whole range: normals, subnormals, exact ties between two
 * halves (to even, both directions), and a few past 65504 (to inf).
 */
function values(rng: Rng, n: number): Float32Array {
  return Float32Array.from({ length: n }, () => {
    const sign = rng.next() < 0.5 ? -1 : 1;
    const u = rng.next();
    if (u < 0.1) return sign * (rng.int(1, 2048) + 0.5) * 2 ** rng.int(-24, 5); // ties
    if (u < 0.15) return sign * rng.uniform(1, 2) * 2 ** rng.int(-23, -14); // subnormal results
    if (u < 0.16) return sign * rng.uniform(65504, 1e6); // 65504 rounds to itself, most overflow
    return sign * rng.uniform(1, 2) * 2 ** rng.int(-14, 12);
  });
}

interface Mat {
  shape: [number, number];
  dtype: Dtype;
  data: Float32Array;
}

function mats(rng: Rng, shapes: [number, number][], dtypeOf: (j: number) => Dtype = () => "f32"): Mat[] {
  return shapes.map((shape, j) => ({ shape, dtype: dtypeOf(j), data: values(rng, shape[0] * shape[1]) }));
}

function upload(B: HeliosBackend, ms: Mat[]): TensorData[] {
  return ms.map((m) => (m.dtype === "f16"
    ? B.castDtype(B.fromArray(m.data, m.shape, "f32"), "f16")
    : B.fromArray(m.dtype === "f64" ? Float64Array.from(m.data) : m.data, m.shape, m.dtype)));
}

/** Raw bits of a copy: f16 as stored, f32 as its word. */
function bits(t: TensorData): Uint16Array | Uint32Array {
  const d = t.data;
  return d instanceof Uint16Array ? d : new Uint32Array(Float32Array.from(d as Float32Array).buffer);
}

/** Checks c = W and t = Wᵀ against `expect` (W's expected bits, row-major), naming the first mismatch. */
function checkPair(what: string, [r, k]: [number, number], c: TensorData, t: TensorData, expect: ArrayLike<number>): void {
  assert.deepEqual(c.shape, [r, k], `${what}: copy shape`);
  assert.deepEqual(t.shape, [k, r], `${what}: transposed shape`);
  const cb = bits(c), tb = bits(t);
  for (let i = 0; i < r; i++) {
    for (let j = 0; j < k; j++) {
      const e = expect[i * k + j];
      if (cb[i * k + j] !== e) assert.fail(`${what}: copy[${i}, ${j}] = 0x${cb[i * k + j].toString(16)}, expected 0x${e.toString(16)}`);
      if (tb[j * r + i] !== e) assert.fail(`${what}: transposed[${j}, ${i}] = 0x${tb[j * r + i].toString(16)}, expected 0x${e.toString(16)}`);
    }
  }
}

/** The values a matrix holds on the device: f32 (f64 inputs are f32 values here), or f16's halves. */
function stored(m: Mat): Float32Array {
  return m.dtype === "f16" ? Float32Array.from(m.data, (x) => f16ToNumber(f16Ref(x))) : m.data;
}

/** f16 bits the float64 reference expects for a matrix's copies. */
function expectF16(m: Mat): Uint16Array {
  return Uint16Array.from(stored(m), f16Ref);
}

/** Odd shapes: one element, fewer than a tile, tiles cut at every edge, GPT-2's qkv weight, a tall thin one. */
const ODD: [number, number][] = [[1, 1], [7, 3], [65, 129], [768, 2304], [5003, 77], [CAST_T_TILE, CAST_T_TILE], [33, 31], [1, 97], [130, 1]];

test("castTransposeMulti to f16 equals the float64 reference and castDtype + transpose bit for bit, over several groups", (t) => {
  const rng = new Rng(2711);
  const shapes: [number, number][] = [...ODD];
  // more matrices than two groups, some with a block of CAST_T_TILES tiles cut short
  for (let j = 0; shapes.length < 2 * CAST_T_MULTI_MAX + 5; j++) shapes.push([3 + 17 * j, 40 + 29 * (j % 5)]);
  const ms = mats(rng, shapes);
  const pairs = multi.castTransposeMulti(upload(multi, ms), "f16");
  const per = single.castTransposeMulti(upload(single, ms), "f16");
  assert.equal(pairs.length, ms.length);
  let ties = 0, infs = 0, subnormals = 0;
  ms.forEach((m, j) => {
    const want = expectF16(m);
    checkPair(`matrix ${j} ${m.shape.join("x")}`, m.shape, pairs[j].cast, pairs[j].transposed, want);
    checkPair(`per-matrix ops, matrix ${j}`, m.shape, per[j].cast, per[j].transposed, want);
    for (let i = 0; i < m.data.length; i++) {
      const x = Math.abs(m.data[i]);
      if ((want[i] & 0x7fff) === 0x7c00) infs++;
      else if ((want[i] & 0x7c00) === 0) subnormals++;
      else if (x * 2 ** (10 - exponent(x)) % 1 === 0.5) ties++;
    }
  });
  assert.ok(ties > 100 && infs > 100 && subnormals > 100, `data reaches the rounding cases: ${ties} ties, ${infs} overflows, ${subnormals} subnormals`);
  t.diagnostic(`${ms.length} matrices, ${ms.reduce((s, m) => s + m.data.length, 0)} elements: ${ties} ties, ${infs} overflows, ${subnormals} subnormals`);
});

test("castTransposeMulti: f64 and f16 inputs mixed with f32 in a group, f32 copies, empty matrices", () => {
  const rng = new Rng(2712);
  const shapes: [number, number][] = [[7, 3], [0, 5], [65, 129], [40, 0], [33, 31], [1, 1], [96, 64]];
  const ms = mats(rng, shapes, (j) => (["f32", "f64", "f16"] as Dtype[])[j % 3]);
  for (const dtype of ["f16", "f32"] as Dtype[]) {
    const pairs = multi.castTransposeMulti(upload(multi, ms), dtype);
    const per = single.castTransposeMulti(upload(single, ms), dtype);
    ms.forEach((m, j) => {
      // f32 copies: the stored values (an f16 input's halves widened) themselves
      const want = dtype === "f16" ? expectF16(m) : new Uint32Array(Float32Array.from(stored(m)).buffer);
      checkPair(`${dtype} copy of ${m.dtype} matrix ${j}`, m.shape, pairs[j].cast, pairs[j].transposed, want);
      checkPair(`${dtype} copy of ${m.dtype} matrix ${j}, per-matrix ops`, m.shape, per[j].cast, per[j].transposed, want);
      assert.equal(pairs[j].cast.dtype, dtype);
      assert.equal(pairs[j].transposed.dtype, dtype);
    });
  }
});

test("castTransposeMulti inside a capture copies the weights' current values on every replay", { skip: !onNative() && "the mock runtime has no captured batches" }, () => {
  const rng = new Rng(2713);
  const shapes: [number, number][] = [[7, 3], [65, 129], [33, 31], [1, 1], [200, 45], [12, 300], [31, 33], [64, 64], [5, 70], [70, 5], [2, 2], [129, 65]];
  const first = mats(rng, shapes);
  const ws = upload(multi, first);
  multi.beginCapture();
  const pairs = multi.castTransposeMulti(ws, "f16");
  const c = multi.endCapture(...pairs.flatMap((p) => [p.cast, p.transposed]));
  for (let step = 0; step < 3; step++) {
    const now = mats(rng, shapes);
    now.forEach((m, j) => multi.writeTensor(ws[j], m.data));
    multi.replay(c);
    now.forEach((m, j) => checkPair(`replay ${step + 1}, matrix ${j}`, m.shape, pairs[j].cast, pairs[j].transposed, expectF16(m)));
  }
  multi.destroyCapture(c);
});

test("dispatches: ceil(n / CAST_T_MULTI_MAX) for n matrices against 2n per-matrix ops; none for empty ones", () => {
  const rng = new Rng(2714);
  const counted = (B: HeliosBackend, ws: TensorData[]) => {
    B.flush();
    const d0 = B.stats().dispatches;
    const pairs = B.castTransposeMulti(ws, "f16");
    B.evaluate(...pairs.flatMap((p) => [p.cast, p.transposed]));
    return B.stats().dispatches - d0;
  };
  // GPT-2's 49 matrices (12 layers x 4 + wte), scaled down
  const shapes: [number, number][] = [[503, 24]];
  for (let l = 0; l < 12; l++) shapes.push([72, 24], [24, 24], [96, 24], [24, 96]);
  const ms = mats(rng, shapes);
  const n = ms.length;
  assert.equal(counted(multi, upload(multi, ms)), Math.ceil(n / CAST_T_MULTI_MAX), "grouped");
  assert.equal(counted(single, upload(single, ms)), 2 * n, "per matrix");
  assert.equal(counted(multi, upload(multi, mats(rng, [[0, 3], [4, 0]]))), 0, "empty matrices");
});

test("castTransposeMulti argument errors name the op and the tensor", () => {
  const B = multi;
  assert.throws(() => B.castTransposeMulti([B.zeros([2, 2]), B.zeros([3])], "f16"), /castTransposeMulti: tensor 1: expects a 2-D tensor, got \[3\]/);
  assert.throws(() => B.castTransposeMulti([B.zeros([2, 2], "i32")], "f16"), /castTransposeMulti: tensor 0: expects a floating-point tensor, got i32/);
  assert.throws(() => B.castTransposeMulti([B.zeros([2, 2])], "i32"), /castTransposeMulti: dtype must be a floating-point dtype/);
  assert.deepEqual(B.castTransposeMulti([], "f16"), []);
});
