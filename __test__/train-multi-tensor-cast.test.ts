// The trainer's matmul16 weight copies through castTransposeMulti (HELIOS_MULTI_TENSOR_CAST, the
// default) against castDtype + transpose per matrix (=0): eager and captured steps give the same
// losses, gradient norms and weights bit for bit (the copies are the same bits, so nothing
// downstream moves), captured replays refresh the copies after each AdamW update, and an eager
// step records 2n - ceil(n / CAST_T_MULTI_MAX) fewer dispatches for n matrices.
import { test } from "node:test";
import assert from "node:assert/strict";
import { Trainer } from "../train/trainer.js";
import { asTrainBackend } from "../train/backend.js";
import { initHostParams } from "../train/params.js";
import { makeBackend, onNative } from "./backend-helpers.js";
import { TINY_OPT, patternBatch, randomBatch } from "./train-helpers.js";
import type { GPTConfig } from "../train/config.js";
import type { HeliosBackend } from "../ts/backend.js";
import { CAST_T_MULTI_MAX } from "../ts/kernels/multi-tensor.js";

// 5 layers: 21 matrices (3 groups); odd widths and vocab (edge tiles everywhere), dropout
const CFG: GPTConfig = { vocab: 19, blockSize: 8, layers: 5, heads: 3, dim: 15, dropout: 0.1 };
const on = makeBackend({ multiTensorCast: true });
const off = makeBackend({ multiTensorCast: false });

function trainers(capture: boolean, cfg = CFG) {
  const init = initHostParams(cfg, 13);
  const opt = { ...TINY_OPT, lr: 3e-3, warmup: 2 };
  const mk = (H: HeliosBackend) => new Trainer(asTrainBackend(H), cfg, opt, { init, seed: 13, capture, matmul16: true });
  return { a: mk(on), b: mk(off) };
}

function compare(capture: boolean): void {
  const { a, b } = trainers(capture);
  assert.equal(a.capturing, capture);
  assert.equal(b.capturing, capture);
  for (let s = 0; s < 5; s++) {
    const hb = s % 2 ? randomBatch(CFG.vocab, 2, 5, s) : patternBatch(CFG.vocab, 2, 5, s);
    const x = a.step(hb), y = b.step(hb);
    assert.deepEqual([x.loss, x.gradNorm, x.applied, x.step], [y.loss, y.gradNorm, y.applied, y.step], `step ${s + 1}`);
  }
  for (const sp of a.specs) {
    for (const [what, p, q] of [["params", a.params, b.params], ["m", a.opt.m, b.opt.m], ["v", a.opt.v, b.opt.v]] as const) {
      assert.deepEqual(Array.from(p.get(sp.name)!.data), Array.from(q.get(sp.name)!.data), `${sp.name} ${what}`);
    }
  }
  a.dropCapture();
  b.dropCapture();
}

test("eager matmul16 steps: grouped weight copies give the per-matrix losses, norms and weights bit for bit", () => {
  compare(false);
});

test("captured matmul16 steps: grouped weight copies give the per-matrix losses, norms and weights bit for bit", { skip: !onNative() && "the mock runtime has no captured batches" }, () => {
  compare(true);
});

test("a matmul16 step records 2n - ceil(n / CAST_T_MULTI_MAX) fewer dispatches for n matrices; f32 steps none fewer", (t) => {
  const init = initHostParams(CFG, 14);
  const per = (H: HeliosBackend, matmul16: boolean) => {
    const tr = new Trainer(asTrainBackend(H), CFG, TINY_OPT, { init, seed: 14, capture: false, matmul16 });
    tr.step(patternBatch(CFG.vocab, 2, 5, 0));
    H.syncGpu();
    const d0 = H.stats().dispatches;
    tr.step(patternBatch(CFG.vocab, 2, 5, 1));
    return H.stats().dispatches - d0;
  };
  const n = 4 * CFG.layers + 1; // each layer's qkv, projection and two MLP matrices, and wte
  const a = per(on, true), b = per(off, true);
  assert.equal(b - a, 2 * n - Math.ceil(n / CAST_T_MULTI_MAX), `${n} matrices: ${b} -> ${a} dispatches a step`);
  assert.equal(per(on, false), per(off, false), "f32 steps make no copies");
  t.diagnostic(`matmul16 step, ${CFG.layers} layers (${n} matrices): ${b} dispatches with HELIOS_MULTI_TENSOR_CAST=0, ${a} with it on`);
});
