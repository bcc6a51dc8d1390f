// The f32 trainer's operand splits made ahead (GPT.f32Fused, HeliosBackend.splitOperand) on the
// cooperative-matrix mock with bf16, whose f32 products and attention run the split (x3) kernels
// in the interpreter. Every product and attention call of this model is aligned (64-wide tiles),
// so the splits made ahead are the layouts the products read:
// - with and without the splits made ahead (the backend's splitOperand hidden), the same step is
//   bit for bit the same: loss, |g| and every weight after it (a split is the same bf16
//   pair whichever kernel writes it; the interpreter computes GELU the same in both kernels);
// - the splits made ahead replace split dispatches: qkv's (read forward and backward), g's two, each
//   layer output gradient's two (dX's and dW's products), dlogits' two and the token embedding's two.
import { test } from "node:test";
import assert from "node:assert/strict";
import { CoopMockRuntime } from "./support/coop-mock-runtime.js";
import { HeliosBackend } from "../ts/backend.js";
import { Trainer } from "../train/trainer.js";
import { asTrainBackend } from "../train/backend.js";
import { initHostParams } from "../train/params.js";
import { TINY_OPT, patternBatch } from "./train-helpers.js";
import type { GPTConfig } from "../train/config.js";
import type { DeviceInfo } from "../ts/exec/runtime.js";

class Bf16CoopMock extends CoopMockRuntime {
  getDeviceInfo(): DeviceInfo {
    return { ...super.getDeviceInfo(), bf16Supported: true };
  }
}

// N = B·T = 1 · 64 rows (T 64: the split attention kernels take it), C = 64, 3C = 192, 4C = 256, vocab 64: whole 64×64 tiles everywhere
const CFG: GPTConfig = { vocab: 64, blockSize: 64, layers: 1, heads: 2, dim: 64, dropout: 0 };

function run(splitAhead: boolean) {
  const rt = new Bf16CoopMock();
  const H = new HeliosBackend({ runtime: rt });
  const B = splitAhead ? H : (Object.create(H, { splitOperand: { value: undefined } }) as HeliosBackend);
  const tr = new Trainer(asTrainBackend(B), CFG, { ...TINY_OPT, lr: 3e-3 }, { init: initHostParams(CFG, 5), seed: 5, capture: false });
  assert.equal(tr.model.f32Fused, splitAhead);
  // one step (forward, backward and the update): the interpreter runs every kernel on the CPU
  const steps = [0].map((s) => tr.step(patternBatch(CFG.vocab, 1, 64, s)));
  const presplits = rt.labels.filter((l) => l.startsWith("mm_presplit")).length;
  const weights = tr.specs.map((sp) => Array.from(tr.params.get(sp.name)!.data as Float32Array));
  return { steps, presplits, weights, stats: H.stats(), labels: rt.labels };
}

test("f32 training with operand splits made ahead is bit for bit the same, with fewer split dispatches", () => {
  const a = run(true), b = run(false);
  assert.deepEqual(a.steps.map((s) => [s.loss, s.gradNorm, s.applied]), b.steps.map((s) => [s.loss, s.gradNorm, s.applied]));
  a.weights.forEach((w, i) => assert.deepEqual(w, b.weights[i], `weight ${i}`));
  assert.equal(b.stats.matmulSplitsAhead, 0);
  // per step: qkv (1 split, 2 reads), g (2), dlogits (2), wte (2), and the layer's four output
  // gradients dy (the MLP's df and projection's, attention's projection's and dqkv: 2 each)
  assert.equal(a.stats.matmulSplitsAhead, 15);
  assert.equal(a.stats.matmulSplitAheadReads, 16);
  assert.equal(b.presplits - a.presplits, 16, `split dispatches ${b.presplits} -> ${a.presplits}`);
  // g's GELU runs only inside its split kernel: no f32 GELU pass remains
  assert.ok(a.labels.some((l) => /_split/.test(l)));
});
