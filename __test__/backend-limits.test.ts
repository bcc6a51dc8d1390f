// HeliosBackend refuses, by op and shape, a tensor larger than a storage binding may span
// (HELIOS_MAX_BINDING_BYTES lowers the limit to 4 KiB so tiny tensors reach it).
import { test } from "node:test";
import assert from "node:assert/strict";
import { makeBackend, onNative } from "./backend-helpers.js";

process.env.HELIOS_MAX_BINDING_BYTES = "4096";

test("ops over the binding limit throw naming the op and the shape; smaller ones run", (t) => {
  const B = makeBackend();
  if (!onNative()) return t.skip("the mock has no binding limit");
  const rnd = (n: number) => Array.from({ length: n }, (_, i) => Math.sin(i * 1.7));
  const a = B.fromArray(rnd(40 * 8), [40, 8]);
  const w = B.fromArray(rnd(30 * 8), [30, 8]); // logits [40, 30] f32 = 4800 bytes
  assert.throws(() => B.matmulTransposed(a, w), /matmulTransposed.*\[40, ?30\].*4800 bytes.*4096/);
  const small = B.matmulTransposed(B.fromArray(rnd(20 * 8), [20, 8]), w); // 2400 bytes: fine
  assert.equal(small.shape[1], 30);
  assert.ok(Number.isFinite(Number(small.data[0])));
  const logits = B.fromArray(rnd(40 * 30), [40, 30]);
  const tg = B.fromArray(Array.from({ length: 40 }, (_, i) => i % 30), [40], "i32");
  assert.throws(() => B.crossEntropy(logits, tg), /crossEntropy.*logits \[40, ?30\]/);
  assert.throws(() => B.crossEntropyBackward(logits, tg, B.fromArray([1], [1])), /crossEntropyBackward/);
});
