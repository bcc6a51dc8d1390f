// Operand splits made ahead (HeliosBackend.splitOperand, ts/ops/split-ahead.ts) on the
// cooperative-matrix mock, whose f32 products run the presplit (x3) plans in the kernel
// interpreter: products in the layouts split ahead skip their split dispatches and give the same
// bits as products that split for themselves; a pending elementwise result is split straight
// from its expression and stays pending; reads run out, writes and captures end an entry.
import { test } from "node:test";
import assert from "node:assert/strict";
import { CoopMockRuntime } from "./support/coop-mock-runtime.js";
import { MockRuntime } from "./mock/runtime.js";
import { Rng, randTensor } from "./harness.js";
import { HeliosBackend } from "../ts/backend.js";
import { HeliosTensor } from "../ts/tensor.js";
import type { TensorData } from "../ts/types.js";
import type { DeviceInfo } from "../ts/exec/runtime.js";

/** With bf16 tensor cores, as the presplit (x3) plans need. */
class Bf16CoopMock extends CoopMockRuntime {
  getDeviceInfo(): DeviceInfo {
    return { ...super.getDeviceInfo(), bf16Supported: true };
  }
}

/**
 * Captured batches as far as the engine's bookkeeping goes: the mock runs each dispatch when it
 * is recorded, so a replay here only counts (the GPU-host runs check replayed values).
 */
class CaptureCoopMock extends Bf16CoopMock {
  replays = 0;
  captureBatch(): number {
    return this.submitBatch();
  }
  replayBatch(): number {
    this.replays++;
    this.beginBatch();
    return this.submitBatch();
  }
  destroyCapture(): void {}
}

// aligned for the mock's 64×64×32 tiles in every product below (the two-block split layouts)
const [M, K, N] = [64, 128, 64];

function setup(capture = false) {
  const rt = capture ? new CaptureCoopMock() : new Bf16CoopMock();
  const B = new HeliosBackend({ runtime: rt });
  const rng = new Rng(4471);
  const up = (shape: number[]) => B.fromArray(randTensor(rng, shape).td.data as Float32Array, shape);
  const splits = () => rt.labels.filter((l) => l.startsWith("mm_presplit")).length;
  const aheadKernels = () => rt.labels.filter((l) => /^fused_f32_\d+(_v4)?_split/.test(l)).length;
  return { rt, B, rng, up, splits, aheadKernels };
}

const bits = (t: TensorData) => Array.from(new Uint32Array((t.data as Float32Array).slice().buffer));

/** gelu(x + bias): a pending elementwise result [M, K]. */
function pendingAct(B: HeliosBackend, x: TensorData, bias: TensorData): TensorData {
  return B.gelu(B.add(x, bias));
}

test("a pending GELU output split ahead in both layouts feeds x·W and xᵀ·G: no split dispatch, same bits, still pending", () => {
  const { B, up, splits, aheadKernels } = setup();
  const x = up([M, K]), bias = up([K]), W = up([K, N]), G = up([M, N]);
  // reference: the products split for themselves
  const a0 = pendingAct(B, x, bias);
  const y0 = B.matmul(a0, W), dW0 = B.matmulTransposedA(a0, G);
  B.syncGpu();
  const splits0 = splits();
  assert.equal(splits0, 4, "each product splits both operands");

  const a = pendingAct(B, x, bias);
  assert.equal(B.splitOperand(a, ["rows", "whole"]), true);
  assert.equal(B.splitOperand(W, ["whole"]), true);
  const y = B.matmul(a, W), dW = B.matmulTransposedA(a, G);
  B.syncGpu();
  // a's two layouts and W's come from the ahead kernels; only G (not split ahead) is split
  assert.equal(splits() - splits0, 1);
  assert.equal(aheadKernels(), 2);
  assert.ok((a as HeliosTensor).expr !== null, "a stays pending: its f32 values were never needed");
  assert.deepEqual(bits(y), bits(y0));
  assert.deepEqual(bits(dW), bits(dW0));
  const s = B.stats();
  assert.equal(s.matmulSplitsAhead, 3);
  assert.equal(s.matmulSplitAheadReads, 3);
  // and reading a now computes it exactly as before
  assert.deepEqual(bits(a), bits(a0));
});

test("evaluate: a pending source is written into its own buffer by the same pass that splits it", () => {
  const { rt, B, up, splits } = setup();
  const x = up([M, K]), bias = up([K]), W = up([K, N]);
  const a0 = pendingAct(B, x, bias);
  const ref = B.matmul(a0, W);
  B.syncGpu();
  const a = pendingAct(B, x, bias);
  const before = rt.labels.length;
  assert.equal(B.splitOperand(a, ["rows", "whole"], 1, { evaluate: true }), true);
  B.syncGpu();
  assert.deepEqual(rt.labels.slice(before), ["fused_f32_4_v4_splitfrw"], "one dispatch writes a and its splits");
  assert.equal((a as HeliosTensor).expr, null, "a has its own buffer now");
  assert.deepEqual(bits(a), bits(a0));
  const s0 = splits();
  const y = B.matmul(a, W);
  B.syncGpu();
  assert.equal(splits() - s0, 1, "only W is split: a's split is still its version's");
  assert.deepEqual(bits(y), bits(ref));
  // on a device without splits, evaluate still evaluates
  const plain = new HeliosBackend({ runtime: new MockRuntime() });
  const p = plain.gelu(plain.fromArray(new Float32Array(16).fill(0.5), [4, 4]));
  assert.equal(plain.splitOperand(p, ["rows"], 1, { evaluate: true }), false);
  assert.equal((p as HeliosTensor).expr, null);
});

test("rows of a width that is not a multiple of 4 (scalar split kernel) and a materialized source", () => {
  const { B, up, splits } = setup();
  const K2 = 66; // not a multiple of 4 or of the tile: the three-block plan, which the splits do not serve
  const x = up([M, K2]), W = up([N, K2]);
  B.syncGpu();
  const ref = B.matmulTransposed(x, W);
  B.syncGpu();
  const before = splits();
  B.splitOperand(x, ["rows"]);
  B.splitOperand(W, ["rows"]);
  const got = B.matmulTransposed(x, W);
  B.syncGpu();
  assert.deepEqual(bits(got), bits(ref));
  assert.equal(splits() - before, 2, "the product splits for itself");
  assert.equal(B.stats().matmulSplitAheadReads, 0);
});

test("reads: a split made for two products is read twice, then the third product splits again", () => {
  const { B, up, splits } = setup();
  const a = up([M, K]), W = up([K, N]);
  B.syncGpu();
  const ref = B.matmul(a, W);
  B.syncGpu();
  B.splitOperand(a, ["rows"], 2);
  const per: number[] = [];
  const outs: TensorData[] = [];
  for (let i = 0; i < 3; i++) {
    const before = splits();
    outs.push(B.matmul(a, W));
    B.syncGpu();
    per.push(splits() - before);
  }
  // W is split by each product (two products in: the split cache keeps it from the second)
  assert.deepEqual(per.map((p, i) => p - (i === 0 ? 1 : 0)), [0, 0, 1]);
  for (const o of outs) assert.deepEqual(bits(o), bits(ref));
});

test("a write to the source ends its split made ahead: the product splits the new values", () => {
  const { B, rng, up } = setup();
  const a = up([M, K]), W = up([K, N]);
  B.splitOperand(a, ["rows"]);
  const a2 = randTensor(rng, [M, K]);
  B.copyInto(a, 0, B.fromArray(a2.td.data as Float32Array, [M, K]));
  const got = B.matmul(a, W);
  const fresh = B.matmul(B.fromArray(a2.td.data as Float32Array, [M, K]), W);
  B.syncGpu();
  assert.deepEqual(bits(got), bits(fresh));
  assert.equal(B.stats().matmulSplitAheadReads, 0);
});

test("a pending source read back keeps its splits (same values, now its buffer)", () => {
  const { B, up, splits } = setup();
  const x = up([M, K]), bias = up([K]), W = up([K, N]);
  const a0 = pendingAct(B, x, bias);
  const ref = B.matmul(a0, W);
  B.syncGpu();
  const a = pendingAct(B, x, bias);
  B.splitOperand(a, ["rows"]);
  void a.data; // materializes a
  const before = splits();
  const got = B.matmul(a, W);
  B.syncGpu();
  assert.equal(splits() - before, 1, "only W is split");
  assert.deepEqual(bits(got), bits(ref));
});

test("inside a capture: a split made before it is not read; one made inside is", () => {
  const { B, up, splits } = setup(true);
  const x = up([M, K]), bias = up([K]), W = up([K, N]);
  B.syncGpu();
  const ref = B.matmul(pendingAct(B, x, bias), W);
  B.syncGpu();
  B.splitOperand(W, ["whole"]);
  B.beginCapture();
  const a = pendingAct(B, x, bias);
  B.splitOperand(a, ["rows"]);
  const before = splits();
  const y = B.matmul(a, W);
  const c = B.endCapture(y);
  // W's split made outside the capture was not read (W is split inside); a's (inside) was
  assert.equal(splits() - before, 1);
  assert.equal(B.stats().matmulSplitAheadReads, 1);
  B.replay(c);
  assert.deepEqual(bits(y), bits(ref));
  // after the capture, W's entry is still that of its version outside: a product reads it
  const after = splits();
  B.matmul(x, W);
  B.syncGpu();
  assert.equal(splits() - after, 1, "only x is split");
  assert.equal(B.stats().matmulSplitAheadReads, 2);
  c.destroy();
});

test("split attention reads q, k, v and dO split ahead in the whole layout: same bits", () => {
  const { rt, B, up } = setup();
  const [bh, T, D] = [1, 64, 32];
  const q = up([bh, T, D]), k = up([bh, T, D]), v = up([bh, T, D]), dO = up([bh, T, D]);
  const scale = 1 / Math.sqrt(D);
  const ref = B.flashAttention(q, k, v, T, scale, 0);
  const refG = B.flashAttentionBackward(q, k, v, ref.output, dO, ref.lse, T, scale, 0);
  B.syncGpu();
  const presplits = () => rt.labels.filter((l) => l.startsWith("mm_presplit")).length;
  const before = presplits();
  for (const t of [q, k, v]) B.splitOperand(t, ["whole"], 2);
  B.splitOperand(dO, ["whole"]);
  const got = B.flashAttention(q, k, v, T, scale, 0);
  const g = B.flashAttentionBackward(q, k, v, got.output, dO, got.lse, T, scale, 0);
  B.syncGpu();
  assert.equal(presplits() - before, 0);
  assert.equal(B.stats().matmulSplitAheadReads, 7);
  assert.deepEqual(bits(got.output), bits(ref.output));
  for (const n of ["dQ", "dK", "dV"] as const) assert.deepEqual(bits(g[n]), bits(refG[n]), n);
});

test("crossEntropyWithGrad's splitGrad: dlogits comes split from the same pass; dhf's and dW's products read it, same bits", () => {
  const { rt, B, rng, up, splits } = setup();
  const [rows, V, C] = [64, 128, 64];
  const logits = up([rows, V]), W = up([V, C]), H = up([rows, C]);
  const targets = B.fromArray(Int32Array.from({ length: rows }, () => Math.floor(rng.next() * V)), [rows], "i32");
  const g = B.fromArray([0.5], [1], "f32");
  const ref = B.crossEntropyWithGrad(logits, targets, g);
  const dhf0 = B.matmul(ref.dlogits, W), dW0 = B.matmulTransposedA(ref.dlogits, H);
  B.syncGpu();
  const before = splits();
  const got = B.crossEntropyWithGrad(logits, targets, g, { splitGrad: ["rows", "whole"] });
  // already split for this version: splitOperand keeps it
  assert.equal(B.splitOperand(got.dlogits, ["rows", "whole"]), true);
  const dhf = B.matmul(got.dlogits, W), dW = B.matmulTransposedA(got.dlogits, H);
  B.syncGpu();
  assert.ok(rt.labels.some((l) => l.startsWith("xent_fused") && l.endsWith("_splitrw")));
  assert.equal(splits() - before, 2, "only W and H are split");
  assert.equal(B.stats().matmulSplitsAhead, 2);
  assert.deepEqual(bits(got.dlogits), bits(ref.dlogits));
  assert.deepEqual(bits(got.loss), bits(ref.loss));
  assert.deepEqual(bits(dhf), bits(dhf0));
  assert.deepEqual(bits(dW), bits(dW0));
  assert.throws(() => B.crossEntropyWithGrad(logits, targets, g, { splitGrad: ["cols" as "rows"] }), /crossEntropyWithGrad.*splitGrad/);
});

test("a device whose f32 products do not split: splitOperand does nothing and returns false", () => {
  const B = new HeliosBackend({ runtime: new MockRuntime() });
  const t = B.fromArray(new Float32Array(64).fill(1.5), [8, 8]);
  assert.equal(B.splitOperand(t, ["rows", "whole"]), false);
  assert.equal(B.stats().matmulSplitsAhead, 0);
});

test("bad arguments are clear errors naming splitOperand", () => {
  const { B, up } = setup();
  const t = up([8, 8]);
  const h = B.fromArray(new Float32Array(4), [4]).dtype;
  void h;
  assert.throws(() => B.splitOperand(t, []), /splitOperand.*layouts/);
  assert.throws(() => B.splitOperand(t, ["cols" as "rows"]), /splitOperand.*layouts/);
  assert.throws(() => B.splitOperand(t, ["rows"], 0), /splitOperand.*reads/);
  assert.throws(() => B.splitOperand(t, ["rows"], 1.5), /splitOperand.*reads/);
  assert.throws(() => B.splitOperand(B.fromArray(new Int32Array([1, 2]), [2], "i32"), ["rows"]), /splitOperand.*f32/);
  assert.throws(() => B.splitOperand(null as unknown as TensorData, ["rows"]), /splitOperand/);
});
