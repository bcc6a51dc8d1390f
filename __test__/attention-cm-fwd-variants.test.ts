// The lab forward candidates of the tensor-core flash attention (lab/flash-fwd-variants.ts: sl, w8,
// w8-s1) run by the kernel interpreter against float64 attention, and against the shipped kernel
// (acc-w4s1-x) on the same inputs: they run its products, softmax and order per query row, so O and
// lse must be its bits. T = 64 … 256 (T = 64 and 128: only the diagonal tiles; 192: not a multiple
// of 128, so 4 subgroups only), D = 16/32/64, both layouts (rows: q, k, v packed or three tensors),
// softCap, keys that keep raising the row maxima (the rescale inside the straight-line loop), the
// shared-memory P path. Also: where each candidate applies and the shared memory it declares.
import { test } from "node:test";
import assert from "node:assert/strict";
import { FWD_CANDIDATES, FWD_CURRENT, fwdApplies, fwdCandidate, fwdKernel, fwdRows, fwdSharedBytes } from "../lab/flash-fwd-variants.js";
import { flashCmAccSharedBytes } from "../ts/kernels/attention-cm-acc.js";
import type { KernelDesc } from "../ts/ir/index.js";
import { check, type Case } from "./support/attn-fwd-case.js";

const CASES: [string, Case & { pShared?: boolean }][] = [
  ["sl", { bh: 2, T: 192, D: 64, cap: 0, growing: true }],
  ["sl", { bh: 2, T: 64, D: 32, cap: 2.5, rows: { H: 2, packed: true } }],
  ["sl", { bh: 4, T: 192, D: 16, cap: 0, rows: { H: 2, packed: false } }],
  ["sl", { bh: 1, T: 192, D: 32, cap: 0, growing: true, pShared: true }],
  ["w8", { bh: 1, T: 256, D: 64, cap: 0, growing: true }],
  ["w8", { bh: 3, T: 128, D: 16, cap: 1.5, rows: { H: 3, packed: true } }],
  ["w8", { bh: 2, T: 256, D: 32, cap: 0, rows: { H: 1, packed: false } }],
  ["w8", { bh: 1, T: 256, D: 16, cap: 0, growing: true, pShared: true }],
  ["w8-s1", { bh: 2, T: 256, D: 32, cap: 2.5 }],
  ["w8-s1", { bh: 2, T: 256, D: 16, cap: 0, growing: true, rows: { H: 2, packed: true } }],
];

for (const [name, c] of CASES) {
  const cand = fwdCandidate(name);
  const opts = { D: c.D, softCap: c.cap > 0, pShared: c.pShared, ...(c.rows ? { layout: "rows" as const } : {}) };
  const desc = fwdKernel(cand, opts);
  test(`${desc.name} ${JSON.stringify(c)} matches float64 attention and the shipped kernel bit for bit (interpreter)`, () => {
    const got = check(desc.name, desc, fwdRows(cand), c);
    const cur = fwdCandidate(FWD_CURRENT);
    const want = check("current", fwdKernel(cur, opts), fwdRows(cur), c);
    const diff = got.o.findIndex((x, i) => x !== want.o[i]);
    assert.equal(diff, -1, `O differs from the shipped kernel's at ${diff}`);
    assert.ok(got.lse.every((x, i) => Object.is(x, want.lse[i])), "lse differs from the shipped kernel's");
  });
}

const ELEM_BYTES: Record<string, number> = { f32: 4, f16: 2, bf16: 2, u32x4: 16 };
const declared = (d: KernelDesc) => (d.shared ?? []).reduce((a, s) => a + s.len * ELEM_BYTES[s.elem], 0);

test("the forward candidates' shared bytes are what they declare; names are unique", () => {
  const seen = new Set<string>();
  for (const c of FWD_CANDIDATES) for (const D of [16, 32, 48, 64]) for (const pShared of [false, true]) for (const softCap of [false, true]) {
    for (const layout of ["bhtd", "rows"] as const) {
      const desc = fwdKernel(c, { D, pShared, softCap, ...(layout === "rows" ? { layout } : {}) });
      assert.equal(declared(desc), fwdSharedBytes(c, D), desc.name);
      assert.ok(!seen.has(desc.name), `${desc.name} named twice`);
      seen.add(desc.name);
    }
  }
  // D = 64: w8's two stages take exactly the 48 KiB NVIDIA's Vulkan driver allows a workgroup
  assert.deepEqual(FWD_CANDIDATES.map((c) => fwdSharedBytes(c, 64)), [24576, 24576, 49152, 30720]);
  assert.equal(fwdSharedBytes(fwdCandidate(FWD_CURRENT), 64), flashCmAccSharedBytes({ D: 64, nsg: 4 }));
});

test("where the forward candidates apply: f16, T % rows, D % 16 up to 64, coopmat, 32-wide subgroups, shared memory", () => {
  const dev = { coopMatSupported: true, subgroupSize: 32, maxSharedMemoryBytes: 49152 };
  const at = (name: string, d = dev, dtype = "f16", T = 1024, D = 64) => fwdApplies(fwdCandidate(name), d, dtype, T, D);
  for (const n of ["current", "sl", "w8", "w8-s1"]) {
    assert.ok(at(n), n);
    assert.ok(!at(n, dev, "f32"), `${n} f32`);
    assert.ok(!at(n, dev, "f16", 1024, 80), `${n} D=80`);
    assert.ok(!at(n, dev, "f16", 1024, 72), `${n} D=72`);
    assert.ok(!at(n, { ...dev, coopMatSupported: false }), `${n} no coopmat`);
    assert.ok(!at(n, { ...dev, subgroupSize: 64 }), `${n} subgroup 64`);
    assert.ok(!at(n, dev, "f16", 1000), `${n} T=1000`);
  }
  assert.deepEqual(FWD_CANDIDATES.map((c) => fwdRows(c)), [64, 64, 128, 128]);
  assert.ok(at("sl", dev, "f16", 192) && !at("w8", dev, "f16", 192) && !at("w8-s1", dev, "f16", 192), "T=192: 4 subgroups only");
  const small = { ...dev, maxSharedMemoryBytes: 32768 };
  assert.ok(at("w8-s1", small) && at("sl", small) && !at("w8", small), "32 KiB: w8's two stages do not fit at D=64");
  assert.ok(at("w8", small, "f16", 1024, 32), "32 KiB: w8 fits at D=32");
});
