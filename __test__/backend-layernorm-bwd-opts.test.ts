// layerNormBackward's options (issue 27): opts.residual added into dx and opts.f16Copy's dx16, written
// by the same pass in each of the three dx kernels: the fused one-pass kernel layernorm_bwd4_dwdb
// (dim % 4 == 0, dim <= 4096), layernorm_bwd_dx4 (dim % 4 == 0 above 4096 up to 8192, or the fused
// pass off) and the scalar layernorm_bwd_dx (any other dim). Each against the call without options
// followed by add(residual, dx) and castDtype(·, "f16"): bit for bit on lavapipe (one f32 add of
// the values dx holds, one conversion: ts/kernels/norm.ts; to rounding on NVIDIA, whose compiler
// contracts the add differently), dw and db unchanged bit for bit; plus
// the float64 reference. Odd row counts and widths, f32 and f16 x, f32 and x-dtype residuals,
// subgroups and the shared-memory tree, several fused-plan knobs (slots, prefetch, partials).
// An f16 g with an f32 x (every kernel that reads g converts it on load: `_g_f16`): the same call
// with castDtype(g, "f32") bit for bit on lavapipe, on every path, with and without the options.
import { test } from "node:test";
import assert from "node:assert/strict";
import { HeliosBackend } from "../ts/backend.js";
import { assertSameOrRounding, bitExactDevice, makeBackend, recordingBackend, testRuntime } from "./backend-helpers.js";
import { Rng, randTensor, assertClose, values, type Tol } from "./harness.js";
import * as N from "./ref/nn.js";
import { ref } from "./ref/tensor.js";
import type { Dtype, TensorData } from "../ts/types.js";
import { withLayerNormBwd } from "../lab/layernorm-bwd.js";
import type { LnBwdTuning } from "../ts/kernels/layernorm-bwd.js";

const B = makeBackend();
const EPS = 1e-5;
const TOLS: Record<string, Tol> = { f32: { atol: 1e-4, rtol: 1e-3 }, f16: { atol: 5e-2, rtol: 2e-2 } };

const raw = (t: TensorData) => Buffer.from(t.data.buffer, t.data.byteOffset, t.data.byteLength).toString("hex");

function noSubgroupBackend(): HeliosBackend {
  const base = testRuntime();
  const rt = { ...base, getDeviceInfo: () => ({ ...base.getDeviceInfo(), subgroupSize: 0 }) };
  return new HeliosBackend({ runtime: rt, validation: true });
}

/** [rows, dim, the kernel it takes, lab knobs or "separate" (the fused pass off: dx4)] */
type Case = [number, number, string, Partial<LnBwdTuning> | "separate" | null];
const CASES: Case[] = [
  [65, 768, "layernorm_bwd4_dwdb_v3_w64_s1_pf", null],
  [1000, 768, "layernorm_bwd4_dwdb_v3_w64_s8_pf", null],
  [1000, 768, "layernorm_bwd4_dwdb_v3_w64_s16_pf", { slots: 8, partials: 50 }],
  [1000, 64, "layernorm_bwd4_dwdb_v1_w64_s8", { slots: 2, prefetch: false, partials: 7 }],
  [130, 1028, "layernorm_bwd4_dwdb_v3_w128_s2_pf", null],
  [9, 4096, "layernorm_bwd4_dwdb_v4_s1", { prefetch: false }],
  [3, 12, "layernorm_bwd4_dwdb_v1_w64_s2_pf", { partials: 1 }],
  [65, 768, "layernorm_bwd_dx4_v3_w64", "separate"],
  [33, 4100, "layernorm_bwd_dx4_v8", null],
  [65, 769, "layernorm_bwd_dx_", null],
  [5, 7, "layernorm_bwd_dx_", null],
  [2, 8196, "layernorm_bwd_dx_", null],
];

/** (x dtype, residual dtype or null, f16Copy): every combination the options allow. */
const OPTS: [Dtype, Dtype | null, boolean][] = [
  ["f32", "f32", false], ["f32", "f32", true], ["f32", null, true],
  ["f16", "f16", false], ["f16", "f32", false], ["f16", "f32", true],
];

function runCase(c: Case, body: () => void): void {
  const knobs = c[3];
  if (knobs === "separate") withLayerNormBwd("separate", body);
  else if (knobs) withLayerNormBwd("fused", body, knobs);
  else body();
}

test("residual and f16Copy: dx = add(residual, dx), dx16 = castDtype(dx, f16), bit for bit in every dx kernel; dw, db unchanged", () => {
  const rng = new Rng(2711);
  for (const [label, be] of [["subgroups", B], ["no subgroups", noSubgroupBackend()]] as const) {
    for (const c of CASES) {
      const [rows, dim] = c;
      for (const [dt, resDt, copy] of OPTS) {
        if (dt === "f16" && dim > 4096 && !copy) continue; // the wide rows once per path are enough
        const what = `${label} [${rows}, ${dim}] x ${dt} residual ${resDt} f16Copy ${copy}`;
        const x = randTensor(rng, [rows, dim], dt, -2, 3), w = randTensor(rng, [dim], dt, 0.5, 1.5), g = randTensor(rng, [rows, dim], dt);
        const res = resDt ? randTensor(rng, [rows, dim], resDt, -1, 1) : null;
        runCase(c, () => {
          const plain = be.layerNormBackward(x.td, w.td, g.td, EPS);
          const want = res ? be.add(res.td, plain.dx) : plain.dx;
          const want16 = copy ? be.castDtype(want, "f16") : null;
          const got = be.layerNormBackward(x.td, w.td, g.td, EPS, { residual: res?.td ?? null, f16Copy: copy });
          assert.equal(got.dx.dtype, want.dtype, `dx dtype ${what}`);
          // bit for bit where the device computes both forms alike (lavapipe); NVIDIA contracts the
          // add into the last multiply, so dx may differ in its last bits and dx16 by one f16 ulp
          const exact = bitExactDevice(be);
          assertSameOrRounding(exact, values(got.dx), values(want), dt === "f16" ? 2 ** -10 : 2 ** -20, `dx ${what}`);
          assert.equal(got.dx16 === undefined, !copy, `dx16 present ${what}`);
          if (want16) {
            assert.equal(got.dx16!.dtype, "f16");
            assertSameOrRounding(exact, values(got.dx16!), values(want16), 2 ** -10, `dx16 ${what}`);
          }
          assertSameOrRounding(exact, values(got.dw), values(plain.dw), 2 ** -18, `dw ${what}`);
          assertSameOrRounding(exact, values(got.db), values(plain.db), 2 ** -18, `db ${what}`);
          // and the float64 reference: residual + dx
          const r = N.layerNormBackward(x.ref, w.ref, g.ref, EPS);
          const sum = res ? ref(r.dx.shape, r.dx.data.map((v, i) => v + res.ref.data[i])) : r.dx;
          assertClose(got.dx, sum, TOLS[dt], `dx vs float64 ${what}`);
          if (got.dx16) assertClose(got.dx16, sum, TOLS.f16, `dx16 vs float64 ${what}`);
        });
      }
    }
  }
});

test("each path runs its kernel with the options' name tags; calls without options keep the plain kernels", () => {
  const rng = new Rng(2712);
  for (const c of CASES) {
    const [rows, dim, kernel] = c;
    const names = (withOpts: boolean) => {
      const rec = recordingBackend();
      const x = randTensor(rng, [rows, dim]), w = randTensor(rng, [dim]), g = randTensor(rng, [rows, dim]);
      const opts = withOpts ? { residual: randTensor(rng, [rows, dim]).td, f16Copy: true } : undefined;
      runCase(c, () => {
        const out = rec.B.layerNormBackward(x.td, w.td, g.td, EPS, opts);
        void out.dx.data;
      });
      return [...rec.names].filter((n) => n.startsWith("layernorm_bwd_dx") || n.startsWith("layernorm_bwd4")).map((n) => n.replace("_sg", ""));
    };
    const what = `[${rows}, ${dim}]`;
    const plain = names(false);
    assert.equal(plain.length, 1, `${what}: ${plain}`);
    assert.ok(plain[0].startsWith(kernel) && !/_res_|_h16/.test(plain[0]), `${what}: ${plain}`);
    const fused = names(true);
    assert.deepEqual(fused, [`${plain[0]}_res_f32_h16`], what);
  }
});

test("layerNormBackward's options are checked: errors name the call and the value", () => {
  const rng = new Rng(2713);
  const x = randTensor(rng, [5, 8]), w = randTensor(rng, [8]), g = randTensor(rng, [5, 8]);
  const x16 = randTensor(rng, [5, 8], "f16"), w16 = randTensor(rng, [8], "f16"), g16 = randTensor(rng, [5, 8], "f16");
  const bad = (what: RegExp, fn: () => unknown) =>
    assert.throws(fn, (e: Error & { code?: string }) => e.code === "ERR_HELIOS_SHAPE" && /^layerNormBackward: /.test(e.message) && what.test(e.message), String(what));
  const ln = (opts: unknown, xs = x, ws = w, gs = g) => B.layerNormBackward(xs.td, ws.td, gs.td, EPS, opts as never);
  bad(/residual \[5, 4\] must match x \[5, 8\]/, () => ln({ residual: randTensor(rng, [5, 4]).td }));
  bad(/residual dtype f16 must be x's \(f32\) or f32/, () => ln({ residual: randTensor(rng, [5, 8], "f16").td }));
  bad(/residual must be a floating-point tensor, got i32/, () => ln({ residual: B.fromArray(new Array(40).fill(1), [5, 8], "i32") }));
  bad(/f16Copy must be a boolean, got yes/, () => ln({ f16Copy: "yes" }));
  bad(/opts must be an object, got number/, () => ln(3));
  bad(/f16Copy: dx is f16 already \(x f16\)/, () => ln({ f16Copy: true }, x16, w16, g16));
  bad(/f16Copy: dx is f16 already \(x f16, residual f16\)/, () => ln({ f16Copy: true, residual: randTensor(rng, [5, 8], "f16").td }, x16, w16, g16));
  // empty options are the plain call; an empty tensor gets empty outputs
  assert.equal(raw(ln({}).dx), raw(ln(undefined).dx));
  const e = B.layerNormBackward(B.zeros([0, 8]), w.td, B.zeros([0, 8]), EPS, { residual: B.zeros([0, 8]), f16Copy: true });
  assert.deepEqual([e.dx.shape, e.dx16?.shape, e.dx16?.dtype], [[0, 8], [0, 8], "f16"]);
});

/** [rows, dim, the dx kernel it takes, knobs as in Case]: the fused pass, dx4 and the scalar dx, dw/db by one workgroup, dwdb or the column sum. */
const G16_CASES: Case[] = [
  [1, 64, "layernorm_bwd4_dwdb_v1_w64_s1_pf", null],
  [7, 768, "layernorm_bwd4_dwdb_v3_w64_s1_pf", null],
  [300, 768, "layernorm_bwd4_dwdb_v3_w64_s2_pf", null],
  [1000, 768, "layernorm_bwd4_dwdb_v3_w64_s8_pf", null],
  [300, 64, "layernorm_bwd4_dwdb_v1_w64_s8", { slots: 2, prefetch: false, partials: 7 }],
  [33, 2052, "layernorm_bwd4_dwdb_v4_s1_pf", null],
  [7, 768, "layernorm_bwd_dx4_v3_w64", "separate"],
  [300, 768, "layernorm_bwd_dx4_v3_w64", "separate"],
  [33, 4100, "layernorm_bwd_dx4_v8", null],
  [1, 3, "layernorm_bwd_dx_", null],
  [7, 17, "layernorm_bwd_dx_", null],
  [33, 770, "layernorm_bwd_dx_", null],
  [300, 770, "layernorm_bwd_dx_", null],
  [300, 17, "layernorm_bwd_dx_", null],
];

/** (residual, f16Copy) for an f32 x: every combination the options allow. */
const G16_OPTS: [boolean, boolean][] = [[false, false], [true, false], [true, true], [false, true]];

test("an f16 g with an f32 x: dx, dw, db (and the options' dx, dx16) are the call with castDtype(g, f32)'s, bit for bit, on every path", () => {
  const rng = new Rng(2714);
  for (const [label, be] of [["subgroups", B], ["no subgroups", noSubgroupBackend()]] as const) {
    const exact = bitExactDevice(be);
    for (const c of G16_CASES) {
      const [rows, dim] = c;
      for (const [withRes, copy] of G16_OPTS) {
        if (be !== B && withRes !== copy) continue; // the shared-memory tree: no options and both are enough
        const what = `${label} [${rows}, ${dim}] residual ${withRes} f16Copy ${copy}`;
        const x = randTensor(rng, [rows, dim], "f32", -2, 3), w = randTensor(rng, [dim], "f32", 0.5, 1.5);
        const g16 = randTensor(rng, [rows, dim], "f16");
        const opts = { residual: withRes ? randTensor(rng, [rows, dim], "f32", -1, 1).td : null, f16Copy: copy };
        runCase(c, () => {
          const want = be.layerNormBackward(x.td, w.td, be.castDtype(g16.td, "f32"), EPS, opts);
          const got = be.layerNormBackward(x.td, w.td, g16.td, EPS, opts);
          assert.equal(got.dx.dtype, "f32", `dx dtype ${what}`);
          // NVIDIA may contract the f16 and f32 kernels' arithmetic differently (as the options' test)
          assertSameOrRounding(exact, values(got.dx), values(want.dx), 2 ** -20, `dx ${what}`);
          assertSameOrRounding(exact, values(got.dw), values(want.dw), 2 ** -18, `dw ${what}`);
          assertSameOrRounding(exact, values(got.db), values(want.db), 2 ** -18, `db ${what}`);
          assert.equal(got.dx16 === undefined, !copy, `dx16 present ${what}`);
          if (copy) assertSameOrRounding(exact, values(got.dx16!), values(want.dx16!), 2 ** -10, `dx16 ${what}`);
          if (!withRes) assertClose(got.dx, N.layerNormBackward(x.ref, w.ref, g16.ref, EPS).dx, TOLS.f32, `dx vs float64 ${what}`);
        });
      }
    }
  }
});

test("an f16 g runs each path's kernels tagged _g_f16 in the f32 g's dispatches (no cast pass); an f32 g keeps the untagged kernels", () => {
  const rng = new Rng(2715);
  for (const c of G16_CASES) {
    const [rows, dim, kernel] = c;
    const x = randTensor(rng, [rows, dim]), w = randTensor(rng, [dim]), g16 = randTensor(rng, [rows, dim], "f16");
    const run = (gDtype: Dtype) => {
      const rec = recordingBackend();
      const g = gDtype === "f16" ? g16.td : rec.B.castDtype(g16.td, "f32");
      void g.data;
      let dispatches = 0;
      runCase(c, () => {
        const before = rec.B.stats().dispatches;
        const out = rec.B.layerNormBackward(x.td, w.td, g, EPS);
        dispatches = rec.B.stats().dispatches - before;
        void out.dw.data;
      });
      return { dispatches, names: [...rec.names].filter((n) => n.startsWith("layernorm_bwd")).sort() };
    };
    const what = `[${rows}, ${dim}]`;
    const f32 = run("f32"), f16 = run("f16");
    assert.ok(f32.names.some((n) => n.replace("_sg", "").startsWith(kernel)), `${what} takes ${kernel}: ${f32.names}`);
    assert.ok(f32.names.every((n) => !n.includes("_g_")), `${what}: ${f32.names}`);
    assert.deepEqual(f16.names.map((n) => n.replace("_g_f16", "")), f32.names, what);
    assert.ok(f16.names.every((n) => n.includes("_g_f16")), `${what}: ${f16.names}`);
    assert.equal(f16.dispatches, f32.dispatches, `dispatches ${what}`);
  }
});

test("layerNormBackward's gradOutput dtype: x's, or f16 with an f32 x; anything else is a coded error naming the call", () => {
  const rng = new Rng(2716);
  const bad = (what: RegExp, fn: () => unknown) =>
    assert.throws(fn, (e: Error & { code?: string }) => e.code === "ERR_HELIOS_SHAPE" && /^layerNormBackward: /.test(e.message) && what.test(e.message), String(what));
  const x16 = randTensor(rng, [5, 8], "f16"), w16 = randTensor(rng, [8], "f16");
  const x = randTensor(rng, [5, 8]), w = randTensor(rng, [8]);
  bad(/gradOutput dtype f32 must match x dtype f16$/, () => B.layerNormBackward(x16.td, w16.td, randTensor(rng, [5, 8]).td, EPS));
  bad(/gradOutput dtype i32 must match x dtype f32 or be f16/, () => B.layerNormBackward(x.td, w.td, B.fromArray(new Array(40).fill(3), [5, 8], "i32"), EPS));
  bad(/gradOutput \[5, 4\] must match x \[5, 8\]/, () => B.layerNormBackward(x.td, w.td, randTensor(rng, [5, 4], "f16").td, EPS));
});
