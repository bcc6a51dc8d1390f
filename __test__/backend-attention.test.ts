// flashAttention against naive causal attention (with and without softCap), and its
// backward against the reference (which finite differences validate in backend-ref).
import { test } from "node:test";
import assert from "node:assert/strict";
import { makeBackend } from "./backend-helpers.js";
import { Rng, randTensor, assertClose, values } from "./harness.js";
import type { RefTensor } from "./ref/tensor.js";
import * as N from "./ref/nn.js";

const B = makeBackend();

for (const [cap, D] of [[0, 8], [2.5, 8], [0, 6], [1.5, 6]]) {
  test(`flashAttention forward and backward, T not a multiple of the tile, softCap=${cap}, D=${D}${D % 4 ? " (scalar path)" : " (vec4 path)"}`, () => {
    const rng = new Rng(61);
    const [bh, T] = [2, 37];
    const q = randTensor(rng, [bh, T, D], "f32"), k = randTensor(rng, [bh, T, D], "f32"), v = randTensor(rng, [bh, T, D], "f32");
    const scale = 1 / Math.sqrt(D);
    const { output, lse } = B.flashAttention!(q.td, k.td, v.td, T, scale, cap);
    const ref = N.attention(q.ref, k.ref, v.ref, scale, cap);
    assertClose(output, ref.output, { atol: 2e-5, rtol: 2e-4 }, "output");
    assertClose(lse, ref.lse, { atol: 2e-5, rtol: 2e-5 }, "lse");
    const dO = randTensor(rng, [bh, T, D], "f32");
    const g = B.flashAttentionBackward!(q.td, k.td, v.td, output, dO.td, lse, T, scale, cap);
    const r = N.attentionBackward(q.ref, k.ref, v.ref, dO.ref, scale, cap);
    assertClose(g.dQ, r.dQ, { atol: 1e-4, rtol: 1e-3 }, "dQ");
    assertClose(g.dK, r.dK, { atol: 1e-4, rtol: 1e-3 }, "dK");
    assertClose(g.dV, r.dV, { atol: 1e-4, rtol: 1e-3 }, "dV");
  });
}

// Forward across several query workgroups and key tiles, head sizes whose tile is not a power
// of two (D=44), the chunked inner loop's partial chunks, and T = 1.
for (const [bh, T, D, cap] of [[2, 130, 64, 0], [1, 77, 44, 0], [1, 77, 44, 3], [3, 1, 16, 0], [1, 9, 256, 0]]) {
  test(`flashAttention forward bh=${bh} T=${T} D=${D} softCap=${cap}`, () => {
    const rng = new Rng(63 + T + D);
    const q = randTensor(rng, [bh, T, D], "f32"), k = randTensor(rng, [bh, T, D], "f32"), v = randTensor(rng, [bh, T, D], "f32");
    const scale = 1 / Math.sqrt(D);
    const { output, lse } = B.flashAttention!(q.td, k.td, v.td, T, scale, cap);
    const ref = N.attention(q.ref, k.ref, v.ref, scale, cap);
    assertClose(output, ref.output, { atol: 2e-5, rtol: 2e-4 }, "output");
    assertClose(lse, ref.lse, { atol: 2e-5, rtol: 2e-5 }, "lse");
  });
}

test("flashAttention rejects mismatched shapes", () => {
  assert.throws(() => B.flashAttention!(B.zeros([2, 4, 8]), B.zeros([2, 4, 8]), B.zeros([2, 5, 8]), 4, 1, 0), /flashAttention: shapes differ: \[2, 4, 8\] vs \[2, 5, 8\]/);
  assert.throws(() => B.flashAttention!(B.zeros([2, 4, 8]), B.zeros([2, 4, 8]), B.zeros([2, 4, 8]), 5, 1, 0), /flashAttention: T=5 does not match Q \[2, 4, 8\]/);
});

test("flashAttention with f16 storage", () => {
  const rng = new Rng(62);
  const [bh, T, D] = [1, 19, 8];
  const q = randTensor(rng, [bh, T, D], "f16"), k = randTensor(rng, [bh, T, D], "f16"), v = randTensor(rng, [bh, T, D], "f16");
  const { output, lse } = B.flashAttention!(q.td, k.td, v.td, T, 0.35, 0);
  const ref = N.attention(q.ref, k.ref, v.ref, 0.35, 0);
  assertClose(output, ref.output, { atol: 2e-3, rtol: 2e-3 }, "output f16");
  assertClose(lse, ref.lse, { atol: 1e-4, rtol: 1e-4 }, "lse f16");
  const dO = randTensor(rng, [bh, T, D], "f16");
  const g = B.flashAttentionBackward!(q.td, k.td, v.td, output, dO.td, lse, T, 0.35, 0);
  const r = N.attentionBackward(q.ref, k.ref, v.ref, dO.ref, 0.35, 0);
  for (const [name, got, exp] of [["dQ", g.dQ, r.dQ], ["dK", g.dK, r.dK], ["dV", g.dV, r.dV]] as const) {
    assertClose(got, exp, { atol: 1e-2, rtol: 1e-2 }, `${name} f16`);
  }
});

// The dense backward (batched matmuls over [BH, T, T] scores + one elementwise pass; what
// coopmat devices run for f16) against the float64 reference: several heads, T a multiple of 4
// but not of any tile, D not a multiple of 16, and the flash kernels' result on the same data.
for (const [bh, T, D] of [[3, 36, 8], [2, 68, 24]]) {
  test(`flashAttentionBackward dense path (HELIOS_ATTN_BWD=dense) f16 bh=${bh} T=${T} D=${D}`, () => {
    const dense = makeBackend({ attnBackward: "dense" });
    const flash = makeBackend({ attnBackward: "flash" });
    const rng = new Rng(64 + T);
    const q = randTensor(rng, [bh, T, D], "f16"), k = randTensor(rng, [bh, T, D], "f16"), v = randTensor(rng, [bh, T, D], "f16");
    const dO = randTensor(rng, [bh, T, D], "f16");
    const scale = 1 / Math.sqrt(D);
    const { output, lse } = dense.flashAttention!(q.td, k.td, v.td, T, scale, 0);
    const g = dense.flashAttentionBackward!(q.td, k.td, v.td, output, dO.td, lse, T, scale, 0);
    const f = flash.flashAttentionBackward!(q.td, k.td, v.td, output, dO.td, lse, T, scale, 0);
    const r = N.attentionBackward(q.ref, k.ref, v.ref, dO.ref, scale, 0);
    for (const [name, got, alt, exp] of [["dQ", g.dQ, f.dQ, r.dQ], ["dK", g.dK, f.dK, r.dK], ["dV", g.dV, f.dV, r.dV]] as const) {
      assert.equal(got.dtype, "f16", `${name} dtype`);
      assertClose(got, exp, { atol: 1e-2, rtol: 1e-2 }, `${name} dense vs reference`);
      assertClose(got, { shape: [...alt.shape], data: values(alt) } as RefTensor, { atol: 1e-2, rtol: 1e-2 }, `${name} dense vs flash`);
    }
  });
}

test("HELIOS_ATTN_BWD rejects unknown values", async () => {
  const { readConfig } = await import("../ts/config.js");
  assert.throws(() => readConfig({ HELIOS_ATTN_BWD: "fast" }), /HELIOS_ATTN_BWD=fast: expected one of auto, cm, dense, flash/);
  assert.equal(readConfig({ HELIOS_ATTN_BWD: "cm" }).attnBackward, "cm");
  assert.equal(readConfig({}).attnBackward, "auto");
});
