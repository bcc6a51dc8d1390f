// The captured training step (train/captured.ts) against the eager one on the native
// runtime: same losses and gradient norms over several steps with new tokens each step (dropout
// on, so the device-side mask counter is exercised), flat pool bytes, and a clean refusal when
// something inside the step needs a host read. Skipped on the mock (it has no captured batches).
import { test } from "node:test";
import assert from "node:assert/strict";
import { Trainer } from "../train/trainer.js";
import { asTrainBackend } from "../train/backend.js";
import { initHostParams } from "../train/params.js";
import { makeBackend, onNative, recordingBackend } from "./backend-helpers.js";
import { TINY_OPT, patternBatch, randomBatch } from "./train-helpers.js";
import type { GPTConfig } from "../train/config.js";

const MICRO: GPTConfig = { vocab: 13, blockSize: 8, layers: 2, heads: 2, dim: 8, dropout: 0.1 };
const skip = !onNative() && "the mock runtime has no captured batches";

test("captured steps give the eager losses, with new tokens each step", { skip }, () => {
  const H = makeBackend({ capture: true });
  const init = initHostParams(MICRO, 7);
  const opt = { ...TINY_OPT, warmup: 3, clip: 0.5 };
  const cap = new Trainer(asTrainBackend(H), MICRO, opt, { init, seed: 7, capture: true });
  const eag = new Trainer(asTrainBackend(H), MICRO, opt, { init, seed: 7, capture: false });
  assert.ok(cap.capturing, "HeliosBackend on the native runtime should capture");
  assert.ok(!eag.capturing);
  for (let s = 0; s < 8; s++) {
    const hb = s % 2 ? randomBatch(MICRO.vocab, 2, 5, s) : patternBatch(MICRO.vocab, 2, 5, s);
    const a = cap.step(hb), b = eag.step(hb);
    assert.equal(a.step, b.step);
    assert.equal(a.applied, b.applied);
    assert.ok(Math.abs(a.loss - b.loss) < 1e-4 * Math.max(1, b.loss), `step ${s + 1}: captured ${a.loss} vs eager ${b.loss}`);
    assert.ok(Math.abs(a.gradNorm - b.gradNorm) < 1e-4 * Math.max(1, b.gradNorm), `step ${s + 1}: |g| ${a.gradNorm} vs ${b.gradNorm}`);
  }
  const pc = cap.params.get("transformer.wte.weight")!.data, pe = eag.params.get("transformer.wte.weight")!.data;
  for (let i = 0; i < pc.length; i++) assert.ok(Math.abs(pc[i] - pe[i]) < 1e-4, `wte[${i}]: ${pc[i]} vs ${pe[i]}`);
  cap.dropCapture();
});

test("f32 captured steps on a model whose products all take whole tiles (operand splits made ahead where f32 products split) give the eager losses", { skip }, () => {
  // on a GPU with bf16 tensor cores every split made ahead is read inside the capture, at each replay
  const ALIGNED: GPTConfig = { vocab: 128, blockSize: 64, layers: 2, heads: 2, dim: 128, dropout: 0 };
  const H = makeBackend({ capture: true });
  const init = initHostParams(ALIGNED, 11);
  const opt = { ...TINY_OPT, lr: 3e-3, clip: 0.5 };
  const cap = new Trainer(asTrainBackend(H), ALIGNED, opt, { init, seed: 11, capture: true });
  const eag = new Trainer(asTrainBackend(H), ALIGNED, opt, { init, seed: 11, capture: false });
  assert.ok(cap.capturing);
  assert.equal(cap.model.f32Fused, H.f32Splits);
  for (let s = 0; s < 5; s++) {
    const hb = s % 2 ? randomBatch(ALIGNED.vocab, 2, 64, s) : patternBatch(ALIGNED.vocab, 2, 64, s);
    const a = cap.step(hb), b = eag.step(hb);
    assert.equal(a.applied, b.applied);
    assert.ok(Math.abs(a.loss - b.loss) < 1e-4 * Math.max(1, b.loss), `step ${s + 1}: captured ${a.loss} vs eager ${b.loss}`);
    assert.ok(Math.abs(a.gradNorm - b.gradNorm) < 1e-4 * Math.max(1, b.gradNorm), `step ${s + 1}: |g| ${a.gradNorm} vs ${b.gradNorm}`);
  }
  const st = H.stats();
  // each split made ahead was read (qkv twice): none was made for a layout no product reads
  if (st.matmulSplitsAhead > 0) assert.ok(st.matmulSplitAheadReads > st.matmulSplitsAhead, `${st.matmulSplitAheadReads} reads of ${st.matmulSplitsAhead} splits`);
  cap.dropCapture();
});

test("the captured step's token embedding backward runs the CSR kernel on lists built per step; a token out of range is an error", { skip }, () => {
  const R = recordingBackend({ capture: true });
  const tr = new Trainer(asTrainBackend(R.B), MICRO, TINY_OPT, { init: initHostParams(MICRO, 9), seed: 9, capture: true });
  assert.ok(tr.capturing);
  tr.step(patternBatch(MICRO.vocab, 2, 5, 1));
  const emb = [...R.names].filter((n) => n.startsWith("embedding_bwd"));
  // tokens (lists written per replay) and positions (host indices): both CSR, never the device-index walk
  assert.deepEqual(emb, ["embedding_bwd_csr_f32"], `embedding backward kernels: ${emb.join(", ")}`);
  const bad = randomBatch(MICRO.vocab, 2, 5, 2);
  (bad.idx as Int32Array)[3] = MICRO.vocab;
  assert.throws(() => tr.step(bad), /training step: indices\[3\] = 13 is out of range \[0, 13\)/);
  // the step was refused before anything ran: the next one is fine
  assert.ok(Number.isFinite(tr.step(randomBatch(MICRO.vocab, 2, 5, 3)).loss));
  tr.dropCapture();
});

test("captured steps keep pool bytes flat and record only once", { skip }, () => {
  const H = makeBackend({ capture: true });
  const tr = new Trainer(asTrainBackend(H), MICRO, TINY_OPT, { init: initHostParams(MICRO, 8), seed: 8, capture: true });
  const leased: number[] = [];
  const dispatches: number[] = [];
  for (let s = 0; s < 6; s++) {
    tr.step(patternBatch(MICRO.vocab, 2, 5, s));
    H.syncGpu();
    leased.push(H.stats().pool.leasedBytes);
    dispatches.push(H.stats().dispatches);
  }
  assert.deepEqual(leased, leased.map(() => leased[0]), `leased bytes per step: ${leased}`);
  assert.deepEqual(dispatches, dispatches.map(() => dispatches[0]), `replays must record nothing: ${dispatches}`);
  tr.dropCapture();
});

test("a host read inside the captured step is refused with ERR_HELIOS_CAPTURE; the backend stays usable", { skip }, () => {
  const H = makeBackend({ capture: true });
  const x = H.fromArray(Float32Array.from([1, 2, 3, 4]), [4]);
  H.beginCapture();
  const y = H.add(x, x);
  H.evaluate(y);
  assert.throws(() => y.data, (e: Error & { code?: string }) => e.code === "ERR_HELIOS_CAPTURE" && /host read/.test(e.message));
  assert.throws(() => H.flush(), (e: Error & { code?: string }) => e.code === "ERR_HELIOS_CAPTURE");
  assert.throws(() => H.writeTensor(x, [0, 0, 0, 0]), (e: Error & { code?: string }) => e.code === "ERR_HELIOS_CAPTURE");
  // an out-of-place update of a tensor made before the capture would bind a stale buffer
  assert.throws(() => H.scaleInplace(x, 2), (e: Error & { code?: string }) => e.code === "ERR_HELIOS_CAPTURE");
  H.abortCapture();
  assert.throws(() => y.data, (e: Error & { code?: string }) => e.code === "ERR_HELIOS_CAPTURE" && /aborted/.test(e.message));
  assert.deepEqual([...(H.mul(x, x).data as Float32Array)], [1, 4, 9, 16]);
});

test("the eager optimizer's gradient-norm read inside a capture is refused, not silently captured", { skip }, () => {
  const H = makeBackend({ capture: true });
  const tr = new Trainer(asTrainBackend(H), MICRO, TINY_OPT, { init: initHostParams(MICRO, 9), seed: 9, capture: false });
  H.beginCapture();
  assert.throws(() => tr.step(patternBatch(MICRO.vocab, 2, 5, 1)), (e: Error & { code?: string }) => e.code === "ERR_HELIOS_CAPTURE");
  H.abortCapture();
  const r = tr.step(patternBatch(MICRO.vocab, 2, 5, 2));
  assert.ok(Number.isFinite(r.loss));
});

test("non-finite gradients skip the captured update like the eager one; a new loss scale re-records", { skip }, () => {
  const H = makeBackend({ capture: true });
  const cfg: GPTConfig = { ...MICRO, dim: 16, dropout: 0 };
  const init = initHostParams(cfg, 10);
  // 2^40 overflows the f16 matmul operands of the backward pass: the first steps must be skipped.
  const o = { init, seed: 10, matmul16: true, lossScale: 2 ** 40 };
  const cap = new Trainer(asTrainBackend(H), cfg, TINY_OPT, { ...o, capture: true });
  const eag = new Trainer(asTrainBackend(H), cfg, TINY_OPT, { ...o, capture: false });
  let skipped = 0;
  for (let s = 0; s < 4; s++) {
    const hb = patternBatch(cfg.vocab, 2, 5, s);
    const a = cap.step(hb), b = eag.step(hb);
    assert.equal(a.applied, b.applied, `step ${s + 1}: applied ${a.applied} vs eager ${b.applied}`);
    assert.equal(cap.lossScale, eag.lossScale);
    if (!a.applied) skipped++;
  }
  assert.ok(skipped > 0, "expected overflowing steps");
  const pc = cap.params.get("transformer.wte.weight")!.data, pe = eag.params.get("transformer.wte.weight")!.data;
  for (let i = 0; i < pc.length; i++) assert.ok(Math.abs(pc[i] - pe[i]) < 1e-3, `wte[${i}]: ${pc[i]} vs ${pe[i]}`);
  cap.dropCapture();
});
