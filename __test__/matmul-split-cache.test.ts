// Kept splits of reused f32 operands (ts/ops/split-cache.ts) on the cooperative-matrix mock, whose
// f32 products run the presplit (x3) plans in the kernel interpreter: from the second product of
// one operand version the split is kept and later products read it; a write to the operand, its
// release and purgeBufferPools drop the copy; every product matches float64.
import { test } from "node:test";
import assert from "node:assert/strict";
import { CoopMockRuntime } from "./support/coop-mock-runtime.js";
import { Rng, randTensor, type Sample } from "./harness.js";
import { HeliosBackend } from "../ts/backend.js";
import type { TensorData } from "../ts/types.js";
import type { DeviceInfo } from "../ts/exec/runtime.js";

/** With bf16 tensor cores, as the presplit (x3) plans need. */
class Bf16CoopMock extends CoopMockRuntime {
  getDeviceInfo(): DeviceInfo {
    return { ...super.getDeviceInfo(), bf16Supported: true };
  }
}

const [M, K, N] = [64, 96, 64];

function refProduct(a: Sample, b: Sample): Float64Array {
  const out = new Float64Array(M * N);
  const A = a.ref.data, B = b.ref.data;
  for (let i = 0; i < M; i++)
    for (let j = 0; j < N; j++) {
      let s = 0;
      for (let k = 0; k < K; k++) s += A[i * K + k] * B[k * N + j];
      out[i * N + j] = s;
    }
  return out;
}

/** The x3 gate: relative Frobenius error against float64 within 1e-4. */
function gate(what: string, got: TensorData, want: Float64Array): void {
  let num = 0, den = 0;
  const g = got.data as Float32Array;
  for (let i = 0; i < want.length; i++) {
    num += (g[i] - want[i]) ** 2;
    den += want[i] ** 2;
  }
  const e = Math.sqrt(num / den);
  assert.ok(e <= 1e-4, `${what}: relative error ${e}`);
}

function setup(config: { matmulPrepack?: "off" } = {}) {
  const rt = new Bf16CoopMock();
  const B = new HeliosBackend({ runtime: rt, config });
  const rng = new Rng(9157);
  const a = randTensor(rng, [M, K]), b = randTensor(rng, [K, N]);
  const ta = B.fromArray(a.td.data as Float32Array, [M, K]), tb = B.fromArray(b.td.data as Float32Array, [K, N]);
  const splits = () => rt.labels.filter((l) => l.startsWith("mm_presplit")).length;
  return { rt, B, rng, a, b, ta, tb, splits };
}

test("an f32 operand version is split twice, then its kept split is read: every product matches float64", () => {
  const { B, a, b, ta, tb, splits } = setup();
  const want = refProduct(a, b);
  const outs: TensorData[] = [];
  const perProduct: number[] = [];
  for (let i = 0; i < 5; i++) {
    const before = splits();
    outs.push(B.matmul(ta, tb));
    B.syncGpu(); // the mock runs a batch when it is submitted
    perProduct.push(splits() - before);
  }
  // products 1 and 2 split A and B; the second product's splits are kept; 3-5 read them
  assert.deepEqual(perProduct, [2, 2, 0, 0, 0]);
  const s = B.stats();
  assert.equal(s.matmulSplitsKept, 2);
  assert.equal(s.matmulSplitReads, 6);
  assert.ok(s.matmulSplitBytes >= 2 * (M * K + K * N) * 2, `kept bytes ${s.matmulSplitBytes}`);
  outs.forEach((o, i) => gate(`product ${i + 1}`, o, want));
  // the same kernel on the same split values: bit for bit the first product
  for (const o of outs.slice(1)) assert.deepEqual(Array.from(o.data as Float32Array), Array.from(outs[0].data as Float32Array));
});

test("a write to a split operand drops its kept split (the next products split the new values); release and purge free copies", () => {
  const { B, rng, a, b, ta, tb, splits } = setup();
  for (let i = 0; i < 3; i++) B.matmul(ta, tb);
  B.syncGpu();
  const kept = B.stats().matmulSplitBytes;
  assert.ok(kept > 0);
  // overwrite A in place with new values
  const a2 = randTensor(rng, [M, K]);
  const src = B.fromArray(a2.td.data as Float32Array, [M, K]);
  B.copyInto(ta, 0, src);
  const before = splits();
  const p = B.matmul(ta, tb);
  B.syncGpu();
  gate("after the write", p, refProduct(a2, b));
  // A is split again (its copy was of the old values); B's kept split is read
  assert.equal(splits() - before, 1);
  assert.ok(!refProduct(a, b).every((v, i) => Math.abs(v - (p.data as Float32Array)[i]) < 1e-3), "the old values are not used");
  // releasing B frees its copy; purge frees the rest
  const withB = B.stats().matmulSplitBytes;
  B.releaseGpuTensor(tb);
  B.syncGpu(); // a released tensor's storage is recycled at the next sync
  assert.ok(B.stats().matmulSplitBytes < withB, "B's copy goes with B");
  B.purgeBufferPools();
  assert.equal(B.stats().matmulSplitBytes, 0);
});

test("HELIOS_MATMUL_PREPACK=off keeps no split: every product splits both operands", () => {
  const { B, a, b, ta, tb, splits } = setup({ matmulPrepack: "off" });
  for (let i = 0; i < 3; i++) B.matmul(ta, tb);
  B.syncGpu();
  assert.equal(splits(), 6);
  assert.equal(B.stats().matmulSplitsKept, 0);
  gate("product", B.matmul(ta, tb), refProduct(a, b));
});

test("x·xᵀ (one tensor as both operands in one form) keeps one split, and later products read it for both", () => {
  const { B, a, ta, splits } = setup();
  const want = new Float64Array(M * M);
  for (let i = 0; i < M; i++)
    for (let j = 0; j < M; j++) {
      let acc = 0;
      for (let k = 0; k < K; k++) acc += a.ref.data[i * K + k] * a.ref.data[j * K + k];
      want[i * M + j] = acc;
    }
  const perProduct: number[] = [];
  for (let i = 0; i < 3; i++) {
    const before = splits();
    const g = B.matmulTransposed(ta, ta);
    B.syncGpu();
    perProduct.push(splits() - before);
    let num = 0, den = 0;
    for (let q = 0; q < want.length; q++) {
      num += ((g.data as Float32Array)[q] - want[q]) ** 2;
      den += want[q] ** 2;
    }
    assert.ok(Math.sqrt(num / den) <= 1e-4, `product ${i + 1}`);
  }
  // the first product splits x twice (as A and as B) and keeps one; the others split nothing
  assert.deepEqual(perProduct, [2, 0, 0]);
  assert.equal(B.stats().matmulSplitsKept, 1);
  const kept = B.stats().matmulSplitBytes;
  B.releaseGpuTensor(ta);
  B.syncGpu();
  assert.ok(B.stats().matmulSplitBytes < kept, "the one copy goes with x");
  assert.equal(B.stats().matmulSplitBytes, 0);
});
