// The LM head + cross-entropy in row chunks (GPTOptions.headChunkBytes) against the one-pass
// head: same loss and same gradient of every parameter, on the float64 reference and on
// HeliosBackend (f32 and 16-bit matmul operands), with a chunk that does not divide the rows.
import { test } from "node:test";
import assert from "node:assert/strict";
import { GPT } from "../train/model.js";
import { Scope, asTrainBackend, type TrainBackend } from "../train/backend.js";
import { initHostParams, type Params } from "../train/params.js";
import type { GPTConfig } from "../train/config.js";
import { Trainer } from "../train/trainer.js";
import { RefTrainBackend } from "./train-ref-backend.js";
import { makeBackend } from "./backend-helpers.js";
import { values } from "./harness.js";
import { TINY, TINY_OPT, randomBatch } from "./train-helpers.js";

const CFG: GPTConfig = { ...TINY, vocab: 37 };
const B = 2, T = 7; // 14 rows

/** `headGradScale`: the forward makes the head's gradients for that loss scale (backward uses 8). */
function run(Bk: TrainBackend, params: Params, headChunkBytes: number | undefined, matmul16 = false, headGradScale?: number) {
  const model = new GPT(Bk, CFG, { headChunkBytes, matmul16 });
  const hb = randomBatch(CFG.vocab, B, T, 4);
  const s = new Scope(Bk);
  const batch = {
    idx: Bk.fromArray([...hb.idx], [B * T], "i32"),
    targets: Bk.fromArray([...hb.targets], [B * T], "i32"),
    pos: Bk.fromArray(Array.from({ length: B * T }, (_, i) => i % T), [B * T], "i32"),
    B, T,
  };
  const fc = model.forward(params, batch, null, s, { headGradScale });
  const madeHeadGrad = fc.headGrad !== null;
  const loss = Number(fc.loss.data[0]);
  const grads = model.backward(params, fc, s, 8);
  const host = new Map<string, Float64Array>();
  for (const [k, g] of grads) host.set(k, values(g));
  return { loss, grads: host, chunked: fc.logits === null, madeHeadGrad };
}

function compare(a: ReturnType<typeof run>, b: ReturnType<typeof run>, tol: number): void {
  assert.ok(Math.abs(a.loss - b.loss) <= tol * Math.max(1, Math.abs(a.loss)), `loss ${a.loss} vs ${b.loss}`);
  assert.equal(a.grads.size, b.grads.size);
  for (const [k, ga] of a.grads) {
    const gb = b.grads.get(k)!;
    assert.equal(ga.length, gb.length, k);
    let scale = 0;
    for (const v of ga) scale = Math.max(scale, Math.abs(v));
    for (let i = 0; i < ga.length; i++) {
      assert.ok(Math.abs(ga[i] - gb[i]) <= tol * Math.max(1e-3, scale), `${k}[${i}]: one pass ${ga[i]} vs chunked ${gb[i]}`);
    }
  }
}

test("chunked LM head equals the one-pass head (float64 reference)", () => {
  const Bk = new RefTrainBackend();
  const tr = new Trainer(Bk, CFG, TINY_OPT, { init: initHostParams(CFG, 3), seed: 3 });
  const whole = run(Bk, tr.params, undefined);
  // 5 rows of f32 logits per chunk: chunks of 5, 5, 4.
  const chunked = run(Bk, tr.params, CFG.vocab * 4 * 5);
  assert.equal(whole.chunked, false);
  assert.equal(chunked.chunked, true);
  compare(whole, chunked, 1e-12);
  // the head's gradients made in the forward, and made for another loss scale (recomputed)
  const inForward = run(Bk, tr.params, CFG.vocab * 4 * 5, false, 8);
  assert.equal(inForward.madeHeadGrad, true);
  compare(whole, inForward, 1e-12);
  const otherScale = run(Bk, tr.params, CFG.vocab * 4 * 5, false, 2);
  assert.equal(otherScale.madeHeadGrad, true);
  compare(whole, otherScale, 1e-12);
  // a one-pass head keeps its logits and makes no gradients in the forward
  assert.equal(run(Bk, tr.params, undefined, false, 8).madeHeadGrad, false);
});

for (const matmul16 of [false, true]) {
  test(`chunked LM head equals the one-pass head on HeliosBackend (${matmul16 ? "matmul16" : "f32"})`, () => {
    const Bk = asTrainBackend(makeBackend());
    const tr = new Trainer(Bk, CFG, TINY_OPT, { init: initHostParams(CFG, 3), seed: 3 });
    const bytes = matmul16 ? 2 : 4;
    const whole = run(Bk, tr.params, undefined, matmul16);
    const chunked = run(Bk, tr.params, CFG.vocab * bytes * 4, matmul16);
    assert.equal(chunked.chunked, true);
    compare(whole, chunked, matmul16 ? 2e-3 : 1e-5);
    const inForward = run(Bk, tr.params, CFG.vocab * bytes * 4, matmul16, 8);
    assert.equal(inForward.madeHeadGrad, true);
    compare(whole, inForward, matmul16 ? 2e-3 : 1e-5);
    // a one-pass head asked for its gradients makes them in the forward from one fused pass over
    // the logits (crossEntropyWithGrad): neither crossEntropy nor crossEntropyBackward runs
    const calls: string[] = [];
    const spied = Object.create(Bk) as TrainBackend;
    for (const op of ["crossEntropy", "crossEntropyBackward", "crossEntropyWithGrad"] as const) {
      const f = (Bk as unknown as Record<string, (...a: unknown[]) => unknown>)[op];
      Object.assign(spied, { [op]: (...a: unknown[]) => (calls.push(op), f.apply(Bk, a)) });
    }
    const fused = run(spied, tr.params, undefined, matmul16, 8);
    assert.deepEqual(calls, ["crossEntropyWithGrad"]);
    assert.equal(fused.madeHeadGrad, true);
    compare(whole, fused, matmul16 ? 2e-3 : 1e-5);
  });
}

test("training steps with a chunked head match the one-pass head (HeliosBackend, captured when available)", () => {
  const Bk = asTrainBackend(makeBackend());
  const init = initHostParams(CFG, 9);
  const whole = new Trainer(Bk, CFG, TINY_OPT, { init, seed: 9 });
  const chunked = new Trainer(Bk, CFG, TINY_OPT, { init, seed: 9, headChunkBytes: CFG.vocab * 4 * 3 });
  for (let s = 0; s < 3; s++) {
    const hb = randomBatch(CFG.vocab, B, T, 20 + s);
    const a = whole.step(hb), b = chunked.step(hb);
    assert.ok(Math.abs(a.loss - b.loss) < 1e-5 * Math.max(1, a.loss), `step ${s + 1}: ${a.loss} vs ${b.loss}`);
    assert.ok(Math.abs(a.gradNorm - b.gradNorm) < 1e-4 * Math.max(1, a.gradNorm), `step ${s + 1}: |g| ${a.gradNorm} vs ${b.gradNorm}`);
  }
});

test("headChunkBytes must be positive", () => {
  assert.throws(() => new GPT(new RefTrainBackend(), CFG, { headChunkBytes: 0 }), /headChunkBytes/);
});


test("head chunks: as few as fit, equal, whole 128-row blocks where they fit", () => {
  const gpt2: GPTConfig = { ...TINY, vocab: 50304 };
  const rows = (N: number, bytes: number | undefined, matmul16 = false) =>
    // headRows only reads sizes; matmul16 asks the backend for a cast
    new GPT(Object.assign(new RefTrainBackend(), { castDtype: <T>(a: T) => a }), gpt2, { headChunkBytes: bytes, matmul16 }).headRows(N);
  // GPT-2 124M at B=16, T=1024, f32: the logits gradient split for the x3 products takes 6 bytes
  // per logit (4.9 GB); under the 2000 MiB default that is three chunks of 5462 rows, rounded up
  // to 5504 (43 blocks); under matmul16 (2 bytes per logit, 1.6 GB) one pass
  assert.equal(rows(16384, undefined), 5504);
  assert.ok(5504 * 50304 * 6 < 2 ** 31 - 1, "each chunk's split gradient fits one storage binding");
  assert.equal(rows(16384, undefined, true), 16384);
  assert.equal(rows(16384, 16384 * 50304 * 6), 16384);
  // 10422 rows fit: three chunks of 10000 rows round up to 10112 (79 blocks)
  assert.equal(rows(30000, 10422 * 50304 * 6), 10112);
  // rounding up would not fit: the largest whole-block chunk instead
  assert.equal(rows(20001, 10050 * 50304 * 6), 9984);
  // under one block: what fits
  assert.equal(rows(16384, 100 * 50304 * 6), 100);
  assert.equal(new GPT(new RefTrainBackend(), CFG, { headChunkBytes: CFG.vocab * 6 * 3 }).headRows(14), 3);
});
