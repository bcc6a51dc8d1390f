// The trainer on the multi-tensor optimizer path (HELIOS_MULTI_TENSOR_ADAMW, the default) against
// the per-tensor path: eager and captured steps give the same losses, gradient norms, skipped
// steps and weights, and a step records 2n - ceil(q / 7) - ceil((n - q) / 7) - ceil(n / 29) fewer
// dispatches for n parameter tensors, q of them of sizes dividing by 4 (AdamW's vec4 groups). Captured steps are skipped on the mock (it has no captured batches).
import { test } from "node:test";
import assert from "node:assert/strict";
import { Trainer } from "../train/trainer.js";
import { asTrainBackend } from "../train/backend.js";
import { initHostParams } from "../train/params.js";
import { makeBackend, onNative } from "./backend-helpers.js";
import { TINY_OPT, patternBatch, randomBatch } from "./train-helpers.js";
import type { GPTConfig } from "../train/config.js";
import type { HeliosBackend } from "../ts/backend.js";
import { ADAMW_MULTI_MAX, SUMSQ_MULTI_MAX } from "../ts/kernels/multi-tensor.js";

// 5 layers: 64 parameter tensors, several groups of each kernel; odd widths and vocab
const CFG: GPTConfig = { vocab: 19, blockSize: 8, layers: 5, heads: 3, dim: 15, dropout: 0.1 };
const multi = makeBackend({ multiTensorAdamw: true });
const single = makeBackend({ multiTensorAdamw: false });

function close(a: number, b: number, what: string): void {
  if (Number.isNaN(a) && Number.isNaN(b)) return; // a skipped step's norm
  assert.ok(Math.abs(a - b) <= 1e-6 * Math.max(1, Math.abs(b)), `${what}: multi-tensor ${a}, per-tensor ${b}`);
}

function compare(capture: boolean, extra: { matmul16?: boolean; lossScale?: number } = {}, cfg = CFG): number {
  const init = initHostParams(cfg, 11);
  const opt = { ...TINY_OPT, warmup: 2, clip: 0.3 };
  const mk = (H: HeliosBackend) => new Trainer(asTrainBackend(H), cfg, opt, { init, seed: 11, capture, ...extra });
  const a = mk(multi), b = mk(single);
  assert.equal(a.capturing, capture);
  let skipped = 0;
  for (let s = 0; s < 6; s++) {
    const hb = s % 2 ? randomBatch(cfg.vocab, 2, 5, s) : patternBatch(cfg.vocab, 2, 5, s);
    const x = a.step(hb), y = b.step(hb);
    assert.equal(x.applied, y.applied, `step ${s + 1}: applied`);
    assert.equal(x.step, y.step);
    close(x.loss, y.loss, `step ${s + 1} loss`);
    close(x.gradNorm, y.gradNorm, `step ${s + 1} |g|`);
    if (!x.applied) skipped++;
  }
  for (const sp of a.specs) {
    for (const [what, p, q] of [["params", a.params, b.params], ["m", a.opt.m, b.opt.m], ["v", a.opt.v, b.opt.v]] as const) {
      const u = p.get(sp.name)!.data, w = q.get(sp.name)!.data;
      for (let i = 0; i < u.length; i++) close(Number(u[i]), Number(w[i]), `${sp.name} ${what}[${i}]`);
    }
  }
  a.dropCapture();
  b.dropCapture();
  return skipped;
}

test("eager steps: the multi-tensor optimizer gives the per-tensor losses, norms and weights", () => {
  compare(false);
});

test("captured steps: the multi-tensor optimizer gives the per-tensor losses, norms and weights", { skip: !onNative() && "the mock runtime has no captured batches" }, () => {
  compare(true);
});

test("non-finite gradients skip the update on both paths alike, eager and captured", { skip: !onNative() && "the mock runtime has no captured batches" }, () => {
  const cfg: GPTConfig = { ...CFG, dim: 16, heads: 2, dropout: 0 };
  // 2^40 overflows the f16 matmul operands of the backward pass: the first steps must be skipped.
  for (const capture of [false, true]) assert.ok(compare(capture, { matmul16: true, lossScale: 2 ** 40 }, cfg) > 0, "expected skipped steps");
});

test("a step records 2n - (AdamW's groups) - ceil(n / 29) fewer dispatches", () => {
  const init = initHostParams(CFG, 12);
  const per = (H: HeliosBackend) => {
    const tr = new Trainer(asTrainBackend(H), CFG, TINY_OPT, { init, seed: 12, capture: false });
    tr.step(patternBatch(CFG.vocab, 2, 5, 0));
    H.syncGpu();
    const d0 = H.stats().dispatches;
    tr.step(patternBatch(CFG.vocab, 2, 5, 1));
    return { sizes: tr.specs.map((s) => s.shape.reduce((x, y) => x * y, 1)), dispatches: H.stats().dispatches - d0 };
  };
  const a = per(multi), b = per(single);
  const n = a.sizes.length;
  // AdamW groups the tensors whose sizes divide by 4 (the vec4 kernel) apart from the rest
  const quads = a.sizes.filter((x) => x % 4 === 0).length;
  const adamw = Math.ceil(quads / ADAMW_MULTI_MAX) + Math.ceil((n - quads) / ADAMW_MULTI_MAX);
  assert.ok(quads > 0 && quads < n, "the model mixes sizes that divide by 4 and sizes that do not");
  assert.equal(b.dispatches - a.dispatches, 2 * n - adamw - Math.ceil(n / SUMSQ_MULTI_MAX), `${n} tensors: ${b.dispatches} -> ${a.dispatches}`);
});
