// LayerNorm backward's fused pass (ts/kernels/layernorm-bwd.ts, issue 27): dx and the dw/db partials
// in one pass over x and g, folded by one colsum. Against the float64 reference at odd sizes (and
// the separate passes where the fused one does not apply); dx bit for bit the separate path's
// (layernorm_bwd_dx4, in the same row shape: ln4Shape) on lavapipe under every plan knob, with and
// without subgroups; dw/db repeatable bit for bit; the plan and the dispatches it saves.
import { test } from "node:test";
import assert from "node:assert/strict";
import { HeliosBackend } from "../ts/backend.js";
import { assertSameOrRounding, bitExactDevice, makeBackend, recordingBackend, testRuntime } from "./backend-helpers.js";
import { Rng, randTensor, assertClose, values, type Tol } from "./harness.js";
import * as N from "./ref/nn.js";
import type { Dtype, TensorData } from "../ts/types.js";
import { LN_BWD_FUSED_MAX_DIM, LN_BWD_TUNING, planLayerNormBwd } from "../ts/kernels/layernorm-bwd.js";
import { ln4Shape } from "../ts/kernels/rows4.js";
import { withLayerNormBwd } from "../lab/layernorm-bwd.js";

const B = makeBackend();
const EPS = 1e-5;
// dw and db are sums over up to ~4k rows in f32 (in another order than the separate path's column
// sum): both paths stay within this of the float64 sums (backend-nn.test.ts holds the separate one
// to the same).
const TOLS: Record<string, Tol> = { f32: { atol: 1e-4, rtol: 1e-3 }, f16: { atol: 5e-2, rtol: 2e-2 } };

const raw = (t: TensorData) => Buffer.from(t.data.buffer, t.data.byteOffset, t.data.byteLength).toString("hex");

function sample(rng: Rng, rows: number, dim: number, dt: Dtype) {
  return { x: randTensor(rng, [rows, dim], dt, -2, 3), w: randTensor(rng, [dim], dt, 0.5, 1.5), g: randTensor(rng, [rows, dim], dt) };
}

/** A backend whose device reports no subgroups: the row kernels take the shared-memory tree. */
function noSubgroupBackend(): HeliosBackend {
  const base = testRuntime();
  const rt = { ...base, getDeviceInfo: () => ({ ...base.getDeviceInfo(), subgroupSize: 0 }) };
  return new HeliosBackend({ runtime: rt, validation: true });
}

test("layerNormBackward against float64 at odd sizes: the fused pass where dim % 4 == 0 and dim <= 4096, else the separate passes", () => {
  const rng = new Rng(2701);
  const over = LN_BWD_FUSED_MAX_DIM + 4;
  for (const dt of ["f32", "f16"] as Dtype[]) {
    const rowsList = dt === "f32" ? [1, 63, 65, 1000, 4097] : [1, 65, 1000];
    // 64 and 768: slots of 64 threads (1 and 3 vectors each), 1028: of 128, 4096: of 256
    for (const rows of rowsList) for (const dim of [1, 7, 64, 768, 769, 1028, 4096, over]) {
      if (dim === 4096 && rows > 1000) continue;
      if (dt === "f16" && dim === over && rows > 65) continue;
      const { x, w, g } = sample(rng, rows, dim, dt);
      const r = N.layerNormBackward(x.ref, w.ref, g.ref, EPS);
      const got = B.layerNormBackward(x.td, w.td, g.td, EPS);
      const tol = TOLS[dt];
      const what = `${dt} [${rows}, ${dim}]`;
      assertClose(got.dx, r.dx, tol, `dx ${what}`);
      assertClose(got.dw, r.dw, tol, `dw ${what}`);
      assertClose(got.db, r.db, tol, `db ${what}`);
    }
  }
});

test("the fused pass runs where the plan says, the separate kernels elsewhere", () => {
  const rng = new Rng(2702);
  const kernels = (rows: number, dim: number) => {
    const rec = recordingBackend();
    const { x, w, g } = sample(rng, rows, dim, "f32");
    const out = rec.B.layerNormBackward(x.td, w.td, g.td, EPS);
    void out.dx.data;
    return [...rec.names].filter((n) => n.startsWith("layernorm") || n.startsWith("colsum")).map((n) => n.replace("_sg", "")).sort();
  };
  // GPT-2's rows: 8 slots of 64 threads × 3 vectors, 125 partial rows folded by colsum k2
  assert.deepEqual(kernels(1000, 768), ["colsum_f32_f32_v4_tx16_k2", "layernorm_bwd4_dwdb_v3_w64_s8_pf_f32_f32"]);
  assert.deepEqual(kernels(1000, 1028), ["colsum_f32_f32_v4_tx16_k2", "layernorm_bwd4_dwdb_v3_w128_s4_pf_f32_f32"]);
  // one row: one workgroup writes dw and db itself
  assert.deepEqual(kernels(1, 64), ["layernorm_bwd4_dwdb_v1_w64_s1_pf_f32_f32"]);
  // rows that keep ROW_WG threads keep their kernel's name
  assert.deepEqual(kernels(65, 4096), ["colsum_f32_f32_v4_tx16_k2", "layernorm_bwd4_dwdb_v4_s1_pf_f32_f32"]);
  // the fused pass off: dx4 in the same row shape
  assert.deepEqual(withLayerNormBwd("separate", () => kernels(1000, 768)), ["colsum_f32_f32_v4_tx16_k2", "layernorm_bwd_dwdb_cols_f32_f32_v4_tx16", "layernorm_bwd_dx4_v3_w64_f32"]);
  // not a multiple of 4, or wider than the fused pass: dx, then the column sum
  assert.deepEqual(kernels(1000, 769), ["colsum_f32_f32_v1_tx64_k2", "layernorm_bwd_dwdb_cols_f32_f32_v1_tx64", "layernorm_bwd_dx_f32"]);
  assert.deepEqual(kernels(65, LN_BWD_FUSED_MAX_DIM + 4), ["layernorm_bwd_dwdb_cols_f32_f32_v4_tx16", "layernorm_bwd_dx4_v8_f32"]);
});

// dx: the fused kernel repeats dx4's expressions in dx4's row shape, and on lavapipe the two agree
// bit for bit; NVIDIA's compiler contracts the two kernels' arithmetic differently (H200: up to 2
// f32 ulps apart), so there the check is a few ulps of the separate passes' dx; plus the float64
// reference everywhere.
const ULPS: Record<string, number> = { f32: 2 ** -20, f16: 2 ** -9 };

test("fused dx is the separate passes' dx (bit for bit on lavapipe) under every plan knob (subgroups and the shared-memory tree); dx, dw, db match float64", () => {
  const rng = new Rng(2703);
  // slots: 1 → 2 slots of 64 at 768, 8 → 16 (1024 threads) where the rows allow
  const knobs = [{}, { slots: 1 }, { slots: 2, prefetch: false }, { slots: 8, partials: 50 }, { partials: 7 }, { partials: 1, slots: 4 }, { partials: 1000, slots: 1, prefetch: false }];
  const cases: [number, number, Dtype][] = [
    [65, 768, "f32"], [1000, 768, "f32"], [1000, 64, "f32"], [63, 4, "f32"], [130, 1028, "f32"], [33, 2048, "f32"], [9, 4096, "f32"], [1000, 768, "f16"], [77, 2052, "f16"],
  ];
  for (const [label, be] of [["subgroups", B], ["no subgroups", noSubgroupBackend()]] as const) {
    const exact = bitExactDevice(be);
    for (const [rows, dim, dt] of cases) {
      const { x, w, g } = sample(rng, rows, dim, dt);
      const sep = withLayerNormBwd("separate", () => be.layerNormBackward(x.td, w.td, g.td, EPS));
      const r = N.layerNormBackward(x.ref, w.ref, g.ref, EPS);
      for (const tune of knobs) {
        const what = `${label} ${dt} [${rows}, ${dim}] ${JSON.stringify(tune)}`;
        const fused = withLayerNormBwd("fused", () => be.layerNormBackward(x.td, w.td, g.td, EPS), tune);
        assertSameOrRounding(exact, values(fused.dx), values(sep.dx), ULPS[dt], `dx ${what}`);
        assertClose(fused.dx, r.dx, TOLS[dt], `dx vs float64 ${what}`);
        assertClose(fused.dw, r.dw, TOLS[dt], `dw ${what}`);
        assertClose(fused.db, r.db, TOLS[dt], `db ${what}`);
      }
    }
  }
});

test("fused dw and db are identical bit for bit across runs", () => {
  const rng = new Rng(2704);
  for (const dt of ["f32", "f16"] as Dtype[]) {
    const { x, w, g } = sample(rng, 4097, 768, dt);
    const once = B.layerNormBackward(x.td, w.td, g.td, EPS);
    for (let run = 0; run < 2; run++) {
      const again = B.layerNormBackward(x.td, w.td, g.td, EPS);
      assert.equal(raw(again.dw), raw(once.dw), `dw ${dt} run ${run + 2}`);
      assert.equal(raw(again.db), raw(once.db), `db ${dt} run ${run + 2}`);
      assert.equal(raw(again.dx), raw(once.dx), `dx ${dt} run ${run + 2}`);
    }
  }
});

test("the plan: GPT-2's [16384, 768] in 128 partial rows of 8 slots of 64 threads; other row shapes; device limits; where it does not apply", () => {
  const big = { maxWorkgroupSize: 1024, maxSharedMemoryBytes: 49152 };
  const plan = (rows: number, dim: number, limits: { maxWorkgroupSize?: number; maxSharedMemoryBytes: number } = big, tune = LN_BWD_TUNING) => planLayerNormBwd(rows, dim, limits, tune);
  // 512 threads at 3 vectors each (64 K registers an SM: ~128 a thread)
  assert.deepEqual(plan(16384, 768), { v4: 3, wg: 64, slots: 8, rowsPerGroup: 128, groups: 128, prefetch: true });
  // 1024 threads at 1 vector, 512 at 2 or 3, 256 at 4; in slots of ln4Shape's width
  assert.deepEqual(plan(16384, 64), { v4: 1, wg: 64, slots: 16, rowsPerGroup: 128, groups: 128, prefetch: true });
  assert.deepEqual(plan(16384, 1028), { v4: 3, wg: 128, slots: 4, rowsPerGroup: 128, groups: 128, prefetch: true });
  assert.deepEqual(plan(16384, 2048), { v4: 4, wg: 128, slots: 2, rowsPerGroup: 128, groups: 128, prefetch: true });
  assert.deepEqual(plan(16384, 3072), { v4: 4, wg: 256, slots: 1, rowsPerGroup: 128, groups: 128, prefetch: true });
  // the knob: twice the threads, twice the slots
  assert.deepEqual(plan(16384, 768, big, { ...LN_BWD_TUNING, slots: 8 }), { v4: 3, wg: 64, slots: 16, rowsPerGroup: 128, groups: 128, prefetch: true });
  // few rows: one slot, one row per workgroup
  assert.deepEqual(plan(100, 768), { v4: 3, wg: 64, slots: 1, rowsPerGroup: 1, groups: 100, prefetch: true });
  assert.deepEqual(plan(4097, 768), { v4: 3, wg: 64, slots: 8, rowsPerGroup: 40, groups: 103, prefetch: true });
  // small workgroups: as many slots of 64 as fit; none where a row's shape does not fit
  assert.deepEqual(plan(16384, 768, { maxWorkgroupSize: 256, maxSharedMemoryBytes: 49152 }), { v4: 3, wg: 64, slots: 4, rowsPerGroup: 128, groups: 128, prefetch: true });
  assert.equal(plan(16384, 768, { maxWorkgroupSize: 128, maxSharedMemoryBytes: 49152 })?.slots, 2);
  assert.equal(plan(16384, 768, { maxWorkgroupSize: 64, maxSharedMemoryBytes: 49152 })?.slots, 1);
  assert.equal(plan(16384, 768, { maxSharedMemoryBytes: 49152 })?.slots, 4, "no workgroup limit given: ROW_WG");
  assert.equal(plan(16384, 3072, { maxWorkgroupSize: 128, maxSharedMemoryBytes: 49152 }), null);
  // small shared memory: 8 slots of 64 need 7 KiB (7 slots' partial handoff), 4 need 3 KiB, 2 and 1 need 1 and 0.5 KiB
  assert.equal(plan(16384, 768, { maxWorkgroupSize: 1024, maxSharedMemoryBytes: 7168 })?.slots, 8);
  assert.equal(plan(16384, 768, { maxWorkgroupSize: 1024, maxSharedMemoryBytes: 7164 })?.slots, 4);
  assert.equal(plan(16384, 768, { maxWorkgroupSize: 1024, maxSharedMemoryBytes: 2048 })?.slots, 2);
  assert.deepEqual(plan(16384, 768, { maxWorkgroupSize: 1024, maxSharedMemoryBytes: 512 }), { v4: 3, wg: 64, slots: 1, rowsPerGroup: 128, groups: 128, prefetch: true });
  assert.equal(plan(16384, 768, { maxWorkgroupSize: 1024, maxSharedMemoryBytes: 256 }), null);
  for (const dim of [1, 7, 769, LN_BWD_FUSED_MAX_DIM + 4, 8192]) assert.equal(plan(1000, dim), null, `dim ${dim}`);
  assert.equal(plan(1000, 768, big, { ...LN_BWD_TUNING, fused: false }), null);
  // every plan covers its rows exactly, with at most `partials` groups, in slots of ln4Shape's shape
  for (const rows of [1, 2, 63, 65, 127, 128, 129, 1000, 4097, 16384, 100003]) for (const dim of [4, 64, 768, 1028, 2048, 4096]) {
    const p = plan(rows, dim)!;
    const what = `[${rows}, ${dim}]`;
    assert.deepEqual({ v4: p.v4, wg: p.wg }, ln4Shape(dim), what);
    assert.ok(p.slots * p.wg <= big.maxWorkgroupSize && p.slots * p.wg * 2 ** Math.floor(Math.log2(p.v4)) <= LN_BWD_TUNING.slots * 256, `${what} threads`);
    assert.ok(p.groups <= LN_BWD_TUNING.partials && p.rowsPerGroup % p.slots === 0, what);
    assert.ok(p.groups * p.rowsPerGroup >= rows && (p.groups - 1) * p.rowsPerGroup < rows, `${what} covers its rows`);
  }
});

test("dispatches per layerNormBackward: fused 2 (1 for one workgroup), separate 3", () => {
  const rng = new Rng(2705);
  const count = (rows: number, dim: number, mode: "fused" | "separate") => {
    const { x, w, g } = sample(rng, rows, dim, "f32");
    const before = B.stats().dispatches;
    const out = withLayerNormBwd(mode, () => B.layerNormBackward(x.td, w.td, g.td, EPS));
    const n = B.stats().dispatches - before;
    void out.dw.data;
    return n;
  };
  assert.equal(count(1000, 768, "fused"), 2);
  assert.equal(count(1000, 768, "separate"), 3);
  assert.equal(count(1, 768, "fused"), 1);
  assert.equal(count(1, 768, "separate"), 2);
});
