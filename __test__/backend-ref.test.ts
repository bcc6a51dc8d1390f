// The CPU reference must be right before the GPU is compared with it: every reference
// backward pass is checked here against finite differences of its forward pass, and the
// f16 helpers against known bit patterns.
import { test } from "node:test";
import assert from "node:assert/strict";
import { Rng, finiteDiff, weightedSum, assertArrayClose } from "./harness.js";
import { ref, type RefTensor } from "./ref/tensor.js";
import * as E from "./ref/elementwise.js";
import * as N from "./ref/nn.js";
import { f32ToF16Bits, f16BitsToF32 } from "../ts/f16.js";

const FD = { atol: 1e-6, rtol: 1e-5 };

function randArr(rng: Rng, n: number): Float64Array {
  return Float64Array.from({ length: n }, () => rng.uniform(-1.5, 1.5));
}

test("f16 conversion: exact values, rounding, subnormals, specials", () => {
  const cases: [number, number][] = [
    [0, 0x0000], [-0, 0x8000], [1, 0x3c00], [-2, 0xc000], [65504, 0x7bff], [65520, 0x7c00],
    [2 ** -24, 0x0001], [2 ** -25, 0x0000], [3 * 2 ** -25, 0x0002], [Infinity, 0x7c00],
    [1 + 2 ** -11, 0x3c00], [1 + 3 * 2 ** -11, 0x3c02], [6.1035156e-5, 0x0400],
  ];
  for (const [v, bits] of cases) assert.equal(f32ToF16Bits(v), bits, `f32ToF16Bits(${v})`);
  assert.ok(Number.isNaN(f16BitsToF32(f32ToF16Bits(NaN))));
  for (let b = 0; b < 0x7c00; b += 7) assert.equal(f32ToF16Bits(f16BitsToF32(b)), b, `round trip ${b}`);
});

test("unary backward formulas match finite differences", () => {
  const rng = new Rng(1);
  const x = randArr(rng, 37);
  const cases: [string, (v: number) => number, (v: number) => number][] = [
    ["gelu", E.gelu, E.geluGrad],
    ["silu", E.silu, E.siluGrad],
    ["softCap", (v) => E.softCap(v, 0.7), (v) => E.softCapGrad(v, 0.7)],
  ];
  for (const [name, f, df] of cases) {
    const fd = finiteDiff(x, (y) => y.reduce((s, v) => s + f(v), 0));
    assertArrayClose(x.map(df), fd, FD, name);
  }
});

test("layerNorm backward matches finite differences", () => {
  const rng = new Rng(2);
  const shape = [3, 7];
  const x = ref(shape, randArr(rng, 21));
  const w = ref([7], randArr(rng, 7));
  const b = ref([7], randArr(rng, 7));
  const gw = randArr(rng, 21);
  const loss = (xx: RefTensor, ww: RefTensor, bb: RefTensor) => weightedSum(N.layerNorm(xx, ww, bb, 1e-5).data, gw);
  const { dx, dw, db } = N.layerNormBackward(x, w, ref(shape, gw), 1e-5);
  assertArrayClose(dx.data, finiteDiff(x.data, (y) => loss(ref(shape, y), w, b)), FD, "dx");
  assertArrayClose(dw.data, finiteDiff(w.data, (y) => loss(x, ref([7], y), b)), FD, "dw");
  assertArrayClose(db.data, finiteDiff(b.data, (y) => loss(x, w, ref([7], y))), FD, "db");
});

test("crossEntropy backward matches finite differences (mean over rows)", () => {
  const rng = new Rng(3);
  const logits = ref([5, 9], randArr(rng, 45));
  const t = [0, 8, 3, 3, 1];
  const g = 1.7;
  const fd = finiteDiff(logits.data, (y) => g * N.crossEntropy(ref([5, 9], y), t).data[0]);
  assertArrayClose(N.crossEntropyBackward(logits, t, g).data, fd, FD, "dlogits");
});

test("attention backward matches finite differences, with and without softCap", () => {
  for (const cap of [0, 1.5]) {
    const rng = new Rng(4);
    const sh = [2, 5, 3];
    const q = ref(sh, randArr(rng, 30)), k = ref(sh, randArr(rng, 30)), v = ref(sh, randArr(rng, 30));
    const w = randArr(rng, 30);
    const scale = 0.6;
    const loss = (qq: RefTensor, kk: RefTensor, vv: RefTensor) => weightedSum(N.attention(qq, kk, vv, scale, cap).output.data, w);
    const { dQ, dK, dV } = N.attentionBackward(q, k, v, ref(sh, w), scale, cap);
    assertArrayClose(dQ.data, finiteDiff(q.data, (y) => loss(ref(sh, y), k, v)), FD, `dQ cap=${cap}`);
    assertArrayClose(dK.data, finiteDiff(k.data, (y) => loss(q, ref(sh, y), v)), FD, `dK cap=${cap}`);
    assertArrayClose(dV.data, finiteDiff(v.data, (y) => loss(q, k, ref(sh, y))), FD, `dV cap=${cap}`);
  }
});

test("sum with keepdims on a non-last axis follows NumPy", () => {
  const a = ref([2, 3, 2], Array.from({ length: 12 }, (_, i) => i + 1));
  const s = N.sum(a, 1, true);
  assert.deepEqual(s.shape, [2, 1, 2]);
  assert.deepEqual([...s.data], [1 + 3 + 5, 2 + 4 + 6, 7 + 9 + 11, 8 + 10 + 12]);
});

test("dropout reference hash: keep fraction near 1-p and values 0 or 1/(1-p)", () => {
  const m = N.dropoutMask(10000, 1234, 7, 0.25);
  const keep = Math.fround(1 / 0.75);
  let kept = 0;
  for (const v of m) {
    assert.ok(v === 0 || v === keep);
    if (v) kept++;
  }
  assert.ok(Math.abs(kept / 10000 - 0.75) < 0.02, `kept ${kept}`);
});
