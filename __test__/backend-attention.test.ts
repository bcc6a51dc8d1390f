// flashAttention against naive causal attention (with and without softCap), and its
// backward against the reference (which finite differences validate in backend-ref), in both
// tensor layouts ([B*H, T, D] and the rows layout of AttentionLayout).
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

// The rows head layout (AttentionLayout: heads side by side in [B*T, ...] rows, as the trainer's
// qkv projection writes them), on the SIMT kernels' _rows forms: Q, K, V packed in one
// [B*T, 3*H*D] tensor or three [B*T, H*D] ones, T not a multiple of the tile, several H and D
// (vec4 and scalar), softCap, f32 and f16, against float64 attention on the same heads.
interface RowsCase { B: number; T: number; H: number; D: number; cap: number; packed: boolean; dtype: "f32" | "f16" }

function checkRows(c: RowsCase, be = B, tol = c.dtype === "f16" ? { atol: 1e-2, rtol: 1e-2 } : { atol: 1e-4, rtol: 1e-3 }): void {
  const { T, H, D, cap, packed } = c;
  const rng = new Rng(91 + T + 7 * H + D);
  const C = H * D, NT = c.B * T;
  const layout = { heads: H, packed };
  const ins = packed ? [randTensor(rng, [NT, 3 * C], c.dtype)] : [0, 1, 2].map(() => randTensor(rng, [NT, C], c.dtype));
  const [q, k, v] = [0, 1, 2].map((p) => (packed ? N.rowsToHeads(ins[0].ref, T, H, D, p) : N.rowsToHeads(ins[p].ref, T, H, D, 0)));
  const [Q, K, V] = packed ? [ins[0].td, ins[0].td, ins[0].td] : ins.map((x) => x.td);
  const scale = 1 / Math.sqrt(D);
  const fwd = be.flashAttention!(Q, K, V, T, scale, cap, layout);
  const ref = N.attention(q, k, v, scale, cap);
  assert.deepEqual(fwd.output.shape, [NT, C]);
  const fwdTol = c.dtype === "f16" ? { atol: 2e-3, rtol: 2e-3 } : { atol: 2e-5, rtol: 2e-4 };
  assertClose(fwd.output, N.headsToRows([ref.output], T, H), fwdTol, "rows output");
  assertClose(fwd.lse, ref.lse, { atol: 1e-4, rtol: 1e-4 }, "rows lse");
  const dO = randTensor(rng, [NT, C], c.dtype);
  const g = be.flashAttentionBackward!(Q, K, V, fwd.output, dO.td, fwd.lse, T, scale, cap, layout);
  const r = N.attentionBackward(q, k, v, N.rowsToHeads(dO.ref, T, H, D, 0), scale, cap);
  if (packed) {
    assert.ok(g.dQ === g.dK && g.dK === g.dV, "packed: one gradient tensor");
    assert.deepEqual(g.dQ.shape, [NT, 3 * C]);
    assertClose(g.dQ, N.headsToRows([r.dQ, r.dK, r.dV], T, H), tol, "rows dQKV");
  } else {
    for (const [name, got, want] of [["dQ", g.dQ, r.dQ], ["dK", g.dK, r.dK], ["dV", g.dV, r.dV]] as const) {
      assertClose(got, N.headsToRows([want], T, H), tol, `rows ${name}`);
    }
  }
}

for (const c of <RowsCase[]>[
  { B: 2, T: 37, H: 3, D: 8, cap: 0, packed: true, dtype: "f32" },
  { B: 1, T: 37, H: 2, D: 8, cap: 2.5, packed: true, dtype: "f32" },
  { B: 2, T: 21, H: 2, D: 6, cap: 0, packed: true, dtype: "f32" },
  { B: 1, T: 77, H: 3, D: 6, cap: 1.5, packed: false, dtype: "f32" },
  { B: 3, T: 19, H: 1, D: 16, cap: 0, packed: false, dtype: "f32" },
  { B: 2, T: 19, H: 2, D: 8, cap: 0, packed: true, dtype: "f16" },
  { B: 1, T: 70, H: 4, D: 4, cap: 0, packed: false, dtype: "f16" },
]) {
  test(`flashAttention rows layout ${JSON.stringify(c)} matches float64 attention forward and backward`, () => checkRows(c));
}

test("flashAttentionBackward rows layout on the dense path (HELIOS_ATTN_BWD=dense: head copies around it) matches float64", () => {
  checkRows({ B: 2, T: 36, H: 3, D: 8, cap: 0, packed: true, dtype: "f16" }, makeBackend({ attnBackward: "dense" }));
  checkRows({ B: 1, T: 68, H: 2, D: 24, cap: 0, packed: false, dtype: "f16" }, makeBackend({ attnBackward: "dense" }));
});

test("flashAttention rows layout rejects what it cannot take", () => {
  const t = B.zeros([8, 24]);
  assert.throws(() => B.flashAttention!(t, B.zeros([8, 24]), t, 4, 1, 0, { heads: 2, packed: true }), /packed layout takes the one \[B\*T, 3\*H\*D\] tensor as Q, K and V/);
  assert.throws(() => B.flashAttention!(t, t, t, 4, 1, 0, { heads: 5, packed: true }), /24 columns are not 3\*H\*D for H=5/);
  assert.throws(() => B.flashAttention!(t, t, t, 3, 1, 0, { heads: 2 }), /T=3 does not divide the 8 rows/);
  assert.throws(() => B.flashAttention!(B.zeros([2, 4, 8]), B.zeros([2, 4, 8]), B.zeros([2, 4, 8]), 4, 1, 0, { heads: 2 }), /Q must be \[B\*T, H\*D\] in a layout with heads/);
  assert.throws(() => B.flashAttention!(t, t, t, 4, 1, 0, { heads: 0 }), /layout.heads = 0/);
  const o = B.zeros([8, 8]), lse = B.zeros([4, 4]);
  assert.throws(() => B.flashAttentionBackward!(t, t, t, B.zeros([8, 24]), o, lse, 4, 1, 0, { heads: 2, packed: true }), /O and dO must be \[B\*T, H\*D\] = \[8, 8\]/);
});
