// The trainer on HeliosBackend (native runtime when the addon has it, else the CPU mock that
// interprets the same kernels) against the float64 reference: same initial weights, same
// batches, the losses of several steps agree, and pool bytes stay flat from step to step.
import { test } from "node:test";
import assert from "node:assert/strict";
import { Trainer } from "../train/trainer.js";
import { asTrainBackend } from "../train/backend.js";
import { initHostParams } from "../train/params.js";
import { RefTrainBackend } from "./train-ref-backend.js";
import { makeBackend, onNative } from "./backend-helpers.js";
import { TINY_OPT, patternBatch } from "./train-helpers.js";
import type { GPTConfig } from "../train/config.js";

// Residual dropout on, and T = 5 (not a multiple of anything), to exercise masks and edge tiles.
const MICRO: GPTConfig = { vocab: 13, blockSize: 8, layers: 1, heads: 2, dim: 8, dropout: 0.1 };

test("HeliosBackend training matches the float64 reference; pool bytes flat over steps", () => {
  const H = makeBackend();
  const init = initHostParams(MICRO, 5);
  const h = new Trainer(asTrainBackend(H), MICRO, TINY_OPT, { init, seed: 5 });
  const r = new Trainer(new RefTrainBackend(), MICRO, TINY_OPT, { init, seed: 5 });
  const leased: number[] = [];
  const steps = onNative() ? 12 : 4; // the mock interprets every kernel on the CPU: keep it short
  for (let s = 0; s < steps; s++) {
    const hb = patternBatch(MICRO.vocab, 2, 5, s);
    const lh = h.step(hb), lr = r.step(hb);
    assert.ok(Math.abs(lh.loss - lr.loss) < 2e-4 * Math.max(1, lr.loss), `step ${s + 1}: helios ${lh.loss} vs reference ${lr.loss}`);
    assert.ok(Math.abs(lh.gradNorm - lr.gradNorm) < 1e-3 * Math.max(1, lr.gradNorm), `step ${s + 1}: |g| ${lh.gradNorm} vs ${lr.gradNorm}`);
    H.syncGpu();
    leased.push(H.stats().pool.leasedBytes);
  }
  // Step 1 creates the cached position tensor; from then on every step returns what it leased.
  assert.deepEqual(leased.slice(1), leased.slice(1).map(() => leased[1]), `leased bytes per step: ${leased}`);
});

test("16-bit matmul operands with loss scaling track the f32 run", () => {
  const H = makeBackend();
  const cfg: GPTConfig = { ...MICRO, dim: 16 };
  const init = initHostParams(cfg, 6);
  const f32 = new Trainer(asTrainBackend(H), cfg, TINY_OPT, { init, seed: 6 });
  const f16 = new Trainer(asTrainBackend(H), cfg, TINY_OPT, { init, seed: 6, matmul16: true });
  for (let s = 0; s < 4; s++) {
    const hb = patternBatch(cfg.vocab, 2, 5, s);
    const a = f32.step(hb), b = f16.step(hb);
    assert.ok(b.applied && Number.isFinite(b.loss), `step ${s + 1}: matmul16 step not applied (loss ${b.loss})`);
    assert.ok(Math.abs(a.loss - b.loss) < 0.03 * a.loss, `step ${s + 1}: f32 ${a.loss} vs matmul16 ${b.loss}`);
    assert.ok(Math.abs(a.gradNorm - b.gradNorm) < 0.1 * a.gradNorm + 1e-3, `step ${s + 1}: |g| f32 ${a.gradNorm} vs matmul16 ${b.gradNorm}`);
  }
  assert.equal(f16.lossScale, 1024);
});
