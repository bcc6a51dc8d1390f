// Training-loop behaviour on the float64 reference: loss falls on a learnable stream, the
// non-finite guard skips an update, and a checkpoint round trip resumes bit-exactly.
import { test } from "node:test";
import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { Trainer } from "../train/trainer.js";
import { learningRate } from "../train/optim.js";
import { loadCheckpoint, saveCheckpoint, checkpointConfig } from "../train/checkpoint.js";
import { readSafetensors, writeSafetensors } from "../train/safetensors.js";
import { readTrainEnv } from "../train/config.js";
import { RefTrainBackend } from "./train-ref-backend.js";
import { TINY, TINY_OPT, patternBatch } from "./train-helpers.js";

test("loss falls over a few AdamW steps on a learnable stream", () => {
  const tr = new Trainer(new RefTrainBackend(), TINY, TINY_OPT, { seed: 1 });
  const losses: number[] = [];
  for (let s = 0; s < 25; s++) losses.push(tr.step(patternBatch(TINY.vocab, 4, 8, s)).loss);
  assert.ok(losses[0] > 2.3, `first loss ${losses[0]} should be near ln(13)`);
  assert.ok(losses.at(-1)! < losses[0] - 1.0, `loss ${losses[0]} -> ${losses.at(-1)} did not fall by 1 nat`);
});

test("non-finite gradients skip the update and leave parameters unchanged", () => {
  const B = new RefTrainBackend();
  const tr = new Trainer(B, TINY, TINY_OPT, { seed: 2 });
  const w = tr.params.get("transformer.ln_f.weight")!.data as Float64Array;
  w[0] = NaN;
  const before = Float64Array.from(tr.params.get("transformer.wte.weight")!.data as Float64Array);
  const r = tr.step(patternBatch(TINY.vocab, 2, 8, 0));
  assert.equal(r.applied, false);
  assert.equal(tr.opt.step, 0);
  assert.deepEqual(tr.params.get("transformer.wte.weight")!.data, before);
});

test("learning-rate schedule: linear warmup then cosine to minLr", () => {
  const o = { ...TINY_OPT, lr: 1, minLr: 0.1, warmup: 10, decaySteps: 100 };
  assert.equal(learningRate(o, 0), 0.1);
  assert.equal(learningRate(o, 9), 1);
  assert.ok(Math.abs(learningRate(o, 60) - 0.55) < 1e-12);
  assert.ok(Math.abs(learningRate(o, 500) - 0.1) < 1e-12);
});

test("checkpoint round trip: save, reload into a fresh trainer, identical continuation", () => {
  const dir = mkdtempSync(path.join(tmpdir(), "helios-ckpt-"));
  try {
    const file = path.join(dir, "ckpt.safetensors");
    const a = new Trainer(new RefTrainBackend(), TINY, TINY_OPT, { seed: 3 });
    for (let s = 0; s < 3; s++) a.step(patternBatch(TINY.vocab, 2, 8, s));
    saveCheckpoint(file, a);
    assert.deepEqual(checkpointConfig(file), TINY);
    const b = new Trainer(new RefTrainBackend(), TINY, TINY_OPT, { seed: 99 });
    loadCheckpoint(file, b);
    assert.equal(b.opt.step, 3);
    // Checkpoints hold f32, so compare the continuation with the saved state rounded to f32.
    const a2 = new Trainer(new RefTrainBackend(), TINY, TINY_OPT, { seed: 99 });
    loadCheckpoint(file, a2);
    for (let s = 3; s < 6; s++) {
      const la = a2.step(patternBatch(TINY.vocab, 2, 8, s)).loss;
      const lb = b.step(patternBatch(TINY.vocab, 2, 8, s)).loss;
      assert.equal(la, lb);
    }
    const ra = a.step(patternBatch(TINY.vocab, 2, 8, 3)).loss;
    const rb = new Trainer(new RefTrainBackend(), TINY, TINY_OPT, { seed: 99 });
    loadCheckpoint(file, rb);
    assert.ok(Math.abs(rb.step(patternBatch(TINY.vocab, 2, 8, 3)).loss - ra) < 1e-5, "resumed step matches the uninterrupted run");
    const { tensors } = readSafetensors(file);
    assert.ok(tensors.has("optim.m.transformer.wte.weight") && tensors.has("optim.v.transformer.ln_f.bias"));
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test("safetensors: header layout, i32 and f32, bad offsets rejected", () => {
  const dir = mkdtempSync(path.join(tmpdir(), "helios-st-"));
  try {
    const f = path.join(dir, "x.safetensors");
    writeSafetensors(f, new Map([
      ["a", { shape: [2, 3], data: Float32Array.of(1, -2, 3.5, 4, 5, 6) }],
      ["b", { shape: [3], data: Int32Array.of(7, -8, 9) }],
    ]), { note: "x" });
    const { tensors, metadata } = readSafetensors(f);
    assert.deepEqual([...tensors.get("a")!.data], [1, -2, 3.5, 4, 5, 6]);
    assert.deepEqual([...tensors.get("b")!.data], [7, -8, 9]);
    assert.equal(metadata.note, "x");
    assert.throws(() => readSafetensors(path.join(dir, "missing")));
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test("HELIOS_CAPTURE parsing", () => {
  assert.equal(readTrainEnv({}).capture, true);
  assert.equal(readTrainEnv({ HELIOS_CAPTURE: "0" }).capture, false);
  assert.equal(readTrainEnv({ HELIOS_CAPTURE: "on" }).capture, true);
  assert.throws(() => readTrainEnv({ HELIOS_CAPTURE: "maybe" }), /HELIOS_CAPTURE/);
});
