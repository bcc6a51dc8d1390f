// End to end: a tiny next-token model trained with Alpha's call pattern (forward ops,
// GPU backward ops, adamwStep, releaseGpuTensor on intermediates, flush per step).
// The loss must fall and the pool must not grow after warm-up.
import { test } from "node:test";
import assert from "node:assert/strict";
import { makeBackend, onNative } from "./backend-helpers.js";
import type { TensorData } from "../ts/types.js";

test("a tiny embedding -> layerNorm -> linear model learns next-token prediction", () => {
  const B = makeBackend();
  const V = 16, Dm = 8, N = 32;
  const idxArr = Int32Array.from({ length: N }, (_, i) => (i * 7) % V);
  const tgtArr = Int32Array.from(idxArr, (t) => (t + 1) % V);
  const idx: TensorData = { shape: [N], dtype: "i32", data: idxArr };
  const tgt: TensorData = { shape: [N], dtype: "i32", data: tgtArr };
  const params = { E: B.scale(B.randn([V, Dm]), 0.5), g: B.ones([Dm]), b: B.zeros([Dm]), W: B.scale(B.randn([V, Dm]), 0.5) };
  const state = Object.fromEntries(Object.entries(params).map(([k, p]) => [k, { m: B.zeros(p.shape), v: B.zeros(p.shape) }]));
  const losses: number[] = [];
  let b1 = 1, b2 = 1;
  let peak = 0;
  // the CPU interpreter (mock runtime) is slow: fewer steps, a weaker bar
  const steps = onNative() ? 80 : 12;
  for (let step = 0; step < steps; step++) {
    const x = B.embedding(params.E, idx);
    const h = B.layerNorm(x, params.g, params.b, 1e-5);
    const logits = B.matmulTransposed!(h, params.W);
    const loss = B.crossEntropy(logits, tgt);
    losses.push((loss.data as Float32Array)[0]);
    const one = B.ones([]);
    const dlogits = B.crossEntropyBackward!(logits, tgt, one);
    const dW = B.matmulTransposedA!(dlogits, h);
    const dh = B.matmul(dlogits, params.W);
    const { dx, dw, db } = B.layerNormBackward!(x, params.g, dh, 1e-5);
    const dE = B.embeddingBackward!(idx, dx, V);
    b1 *= 0.9;
    b2 *= 0.999;
    const grads: Record<string, TensorData> = { E: dE, g: dw, b: db, W: dW };
    for (const k of Object.keys(params) as (keyof typeof params)[]) {
      B.adamwStep!(params[k], grads[k], state[k].m, state[k].v, 0.05, 0.9, 0.999, 1e-8, 0, 1 - b1, 1 - b2);
    }
    for (const t of [x, h, logits, loss, one, dlogits, dW, dh, dx, dw, db, dE]) B.releaseGpuTensor(t);
    B.flush();
    if (step === 4) peak = B.stats().pool.peakBytes;
  }
  assert.ok(losses[0] > 2, `initial loss ${losses[0]}`);
  const bar = onNative() ? 0.5 : 0.9;
  assert.ok(losses[losses.length - 1] < bar * losses[0], `loss ${losses[0]} -> ${losses[losses.length - 1]}`);
  assert.equal(B.stats().pool.peakBytes, peak, "pool peak grew during training");
});
