// Elementwise ops, broadcasting, dtypes, backward formulas and fusion on/off equality.
import { test } from "node:test";
import assert from "node:assert/strict";
import { makeBackend, recordingBackend } from "./backend-helpers.js";
import { Rng, randTensor, positiveTensor, assertClose, asF16Output, TOL, values } from "./harness.js";
import * as E from "./ref/elementwise.js";
import type { TensorData, Dtype } from "../ts/types.js";
import type { HeliosBackend } from "../ts/backend.js";

const fused = makeBackend({ fusion: true });
const unfused = makeBackend({ fusion: false });

const BCAST: [number[], number[]][] = [
  [[7], [7]], [[3, 5], [5]], [[3, 1], [1, 4]], [[2, 3, 5], [3, 1]], [[1], [2, 3]], [[2, 1, 3], [4, 1]], [[257], [1]], [[1], [1]],
];

function tolFor(d: Dtype) {
  return d === "f16" ? TOL.f16 : TOL.f32;
}

for (const B of [fused, unfused]) {
  const tag = B === fused ? "fused" : "unfused";
  test(`binary ops broadcast like NumPy (${tag})`, () => {
    const rng = new Rng(11);
    const ops: [keyof HeliosBackend & ("add" | "sub" | "mul" | "div"), (x: number, y: number) => number][] = [
      ["add", (x, y) => x + y], ["sub", (x, y) => x - y], ["mul", (x, y) => x * y], ["div", (x, y) => x / y],
    ];
    for (const dt of ["f32", "f16"] as Dtype[]) {
      for (const [sa, sb] of BCAST) {
        const a = randTensor(rng, sa, dt);
        const b = positiveTensor(rng, sb, dt);
        for (const [name, f] of ops) {
          const out = (B[name] as (x: TensorData, y: TensorData) => TensorData).call(B, a.td, b.td);
          const exp = E.binary(a.ref, b.ref, f);
          assertClose(out, dt === "f16" ? asF16Output(exp) : exp, tolFor(dt), `${name} ${dt} [${sa}] [${sb}]`);
          assert.equal(out.dtype, dt);
        }
      }
    }
  });

  test(`unary and scalar ops (${tag})`, () => {
    const rng = new Rng(12);
    for (const dt of ["f32", "f16"] as Dtype[]) {
      for (const shape of [[1], [5], [3, 7], [2, 3, 43]]) {
        const a = randTensor(rng, shape, dt, -3, 3);
        const p = positiveTensor(rng, shape, dt);
        const cases: [string, TensorData, (x: number) => number][] = [
          ["neg", B.neg(a.td), (x) => -x],
          ["exp", B.exp(a.td), Math.exp],
          ["log", B.log(p.td), Math.log],
          ["sqrt", B.sqrt(p.td), Math.sqrt],
          ["pow2", B.pow(a.td, 2), (x) => x ** 2],
          ["pow3", B.pow(a.td, 3), (x) => x ** 3],
          ["scale", B.scale(a.td, -1.75), (x) => x * -1.75],
          ["clamp", B.clamp(a.td, -0.5, 1.25), (x) => E.clamp(x, -0.5, 1.25)],
          ["gelu", B.gelu(a.td), E.gelu],
          ["relu", B.relu(a.td), E.relu],
          ["silu", B.silu(a.td), E.silu],
          ["softCap", B.softCap(a.td, 1.5), (x) => E.softCap(x, 1.5)],
        ];
        for (const [name, out, f] of cases) {
          const src = name === "log" || name === "sqrt" ? p : a;
          const exp = E.unary(src.ref, f);
          assertClose(out, dt === "f16" ? asF16Output(exp) : exp, name === "exp" && dt === "f32" ? { atol: 1e-5, rtol: 2e-4 } : tolFor(dt), `${name} ${dt} [${shape}]`);
        }
      }
    }
  });

  test(`GELU and its gradient hold from tiny to huge inputs (exp form, no tanh) (${tag})`, () => {
    const xs = [-1e4, -100, -20, -9.5, -5, -2.5, -1, -0.3, -1e-3, -1e-7, 0, 1e-7, 1e-3, 0.3, 1, 2.5, 5, 9.5, 20, 100, 1e4];
    const x = B.fromArray(xs, [xs.length]);
    const g = B.fromArray(xs.map((_, i) => 1 + i / 7), [xs.length]);
    const y = values(B.gelu(x));
    const dy = values(B.geluBackward(x, g));
    xs.forEach((v, i) => {
      const want = E.gelu(v), dwant = (1 + i / 7) * E.geluGrad(v);
      assert.ok(Math.abs(y[i] - want) <= 2e-6 * Math.abs(want) + 1e-30, `gelu(${v}) = ${y[i]}, want ${want}`);
      assert.ok(Math.abs(dy[i] - dwant) <= 1e-5 * (1 + Math.abs(dwant)), `geluBackward(${v}) = ${dy[i]}, want ${dwant}`);
    });
  });

  test(`pow with a non-integer exponent follows Math.pow (${tag})`, () => {
    const out = values(B.pow(B.fromArray([-2, 0, 4, 2.25], [4]), 0.5));
    assert.ok(Number.isNaN(out[0]));
    // GPU pow is exp2(y*log2(x)): within a few ulp, not exact
    [0, 2, 1.5].forEach((e, i) => assert.ok(Math.abs(out[i + 1] - e) <= 1e-6 * (1 + e), `pow element ${i + 1}: ${out[i + 1]}`));
  });

  test(`backward elementwise ops match the reference (${tag})`, () => {
    const rng = new Rng(13);
    for (const dt of ["f32", "f16"] as Dtype[]) {
      const x = randTensor(rng, [3, 37], dt, -3, 3);
      const g = randTensor(rng, [3, 37], dt);
      const b = randTensor(rng, [3, 37], dt);
      const z = (f: (x: number, g: number) => number) => {
        const e = E.zip(x.ref, g.ref, f);
        return dt === "f16" ? asF16Output(e) : e;
      };
      const t = tolFor(dt);
      assertClose(B.geluBackward(x.td, g.td), z((v, w) => w * E.geluGrad(v)), t, "geluBackward");
      assertClose(B.reluBackward(x.td, g.td), z((v, w) => (v > 0 ? w : 0)), t, "reluBackward");
      assertClose(B.siluBackward(x.td, g.td), z((v, w) => w * E.siluGrad(v)), t, "siluBackward");
      assertClose(B.clampBackward(x.td, g.td, -1, 0.5), z((v, w) => w * E.clampGrad(v, -1, 0.5)), t, "clampBackward");
      assertClose(B.softCapBackward(g.td, x.td, 2), z((v, w) => w * E.softCapGrad(v, 2)), t, "softCapBackward");
      assertClose(B.siluMul(x.td, b.td), E.zip(x.ref, b.ref, (v, w) => E.silu(v) * w), t, "siluMul");
      const [da, db] = B.siluMulBackward(x.td, b.td, g.td);
      const gb = E.zip(g.ref, b.ref, (p, q) => p * q);
      assertClose(da, E.zip(x.ref, gb, (v, w) => w * E.siluGrad(v)), t, "siluMulBackward da");
      assertClose(db, E.zip(g.ref, x.ref, (w, v) => w * E.silu(v)), t, "siluMulBackward db");
      const m = randTensor(rng, [3, 37], "f32", 0, 2);
      const r = B.residualDropoutAdd(b.td, x.td, m.td);
      const exp = E.zip(b.ref, E.zip(x.ref, m.ref, (p, q) => p * q), (p, q) => p + q);
      assertClose(r, exp, dt === "f16" ? TOL.f16 : t, "residualDropoutAdd");
    }
  });

  test(`empty and one-element tensors (${tag})`, () => {
    const e = B.add(B.zeros([0, 3]), B.ones([3]));
    assert.deepEqual([...e.shape], [0, 3]);
    assert.equal(e.data.length, 0);
    const one = B.mul(B.fromArray([3], [1]), B.fromArray([-2], [1]));
    assert.deepEqual([...(one.data as Float32Array)], [-6]);
  });
}

test("fusion: a 3-op chain is one dispatch and equals the unfused result", () => {
  const rng = new Rng(14);
  const a = randTensor(rng, [5, 67], "f32"), b = randTensor(rng, [5, 67], "f32"), c = randTensor(rng, [67], "f32");
  const chain = (B: HeliosBackend) => B.scale(B.add(B.mul(a.td, b.td), c.td), 0.37);
  const before = fused.stats().dispatches;
  const f = chain(fused);
  void f.data;
  assert.equal(fused.stats().dispatches - before, 1, "fused chain dispatches");
  const before2 = unfused.stats().dispatches;
  const u = chain(unfused);
  void u.data;
  assert.equal(unfused.stats().dispatches - before2, 3, "unfused chain dispatches");
  const fv = values(f), uv = values(u);
  for (let i = 0; i < fv.length; i++) assert.ok(Math.abs(fv[i] - uv[i]) <= 1e-6 * (1 + Math.abs(uv[i])), `element ${i}`);
});

test("fusion: shared subexpressions, long chains and mixed dtypes agree with unfused", () => {
  const rng = new Rng(15);
  const x = randTensor(rng, [9, 11], "f32", -1, 1);
  const h = randTensor(rng, [11], "f16", -1, 1);
  const run = (B: HeliosBackend) => {
    let t: TensorData = B.mul(x.td, h.td);
    const s = t;
    for (let i = 0; i < 40; i++) t = B.add(B.scale(t, 0.9), s);
    return B.gelu(B.sub(t, B.exp(s)));
  };
  const f = values(run(fused)), u = values(run(unfused));
  for (let i = 0; i < f.length; i++) assert.ok(Math.abs(f[i] - u[i]) <= 1e-5 * (1 + Math.abs(u[i])), `element ${i}: ${f[i]} vs ${u[i]}`);
});

test("HELIOS_FUSION=0 turns fusion off", async () => {
  const { readConfig } = await import("../ts/config.js");
  assert.equal(readConfig({ HELIOS_FUSION: "0" }).fusion, false);
  assert.equal(readConfig({}).fusion, true);
  assert.throws(() => readConfig({ HELIOS_FUSION: "maybe" }), /HELIOS_FUSION/);
});

test("bad input: incompatible broadcast names the op and shapes", () => {
  assert.throws(() => fused.add(fused.zeros([2, 3]), fused.zeros([4])), /add: shapes \[2, 3\] and \[4\] cannot be broadcast/);
  assert.throws(() => fused.geluBackward(fused.zeros([2, 3]), fused.zeros([3, 2])), /geluBackward: input \[2, 3\] and gradOutput \[3, 2\]/);
  assert.throws(() => fused.mul({ shape: [3], dtype: "f32", data: new Float32Array(2) }, fused.zeros([3])), /mul: tensor data has 2 elements but shape \[3\] needs 3/);
});

test("vec4 path (n % 4 == 0, scalar broadcast) matches the reference for every op", () => {
  const rng = new Rng(16);
  for (const dt of ["f32", "f16"] as Dtype[]) {
    const x = randTensor(rng, [8, 12], dt, -3, 3), g = randTensor(rng, [8, 12], dt), s = randTensor(rng, [1], dt, 0.5, 2);
    const t = tolFor(dt);
    const r = (e: ReturnType<typeof E.unary>) => (dt === "f16" ? asF16Output(e) : e);
    for (const B of [fused, unfused]) {
      assertClose(B.div(B.gelu(x.td), s.td), r(E.binary(E.unary(x.ref, E.gelu), s.ref, (p, q) => p / q)), t, `gelu/s ${dt}`);
      assertClose(B.clamp(B.add(x.td, s.td), -1, 1), r(E.unary(E.binary(x.ref, s.ref, (p, q) => p + q), (v) => E.clamp(v, -1, 1))), t, `clamp ${dt}`);
      assertClose(B.pow(x.td, 3), r(E.unary(x.ref, (v) => v ** 3)), { atol: 1e-3, rtol: 4e-3 }, `pow ${dt}`);
      assertClose(B.siluBackward(x.td, g.td), r(E.zip(x.ref, g.ref, (v, w) => w * E.siluGrad(v))), t, `siluBackward ${dt}`);
      assertClose(B.softCapBackward(g.td, x.td, 1.5), r(E.zip(x.ref, g.ref, (v, w) => w * E.softCapGrad(v, 1.5))), t, `softCapBackward ${dt}`);
      assertClose(B.maskedFill(x.td, g.td, 7), r(E.zip(x.ref, g.ref, (v, m) => (m !== 0 ? 7 : v))), t, `maskedFill ${dt}`);
      assertClose(B.castDtype!(x.td, dt === "f16" ? "f32" : "f16"), asF16Output(x.ref), TOL.f16, `cast ${dt}`);
    }
  }
});

test("vec4 path with broadcast inputs (bias [C], column [N, 1], [3, 1, 8] over [3, 5, 8]) matches the reference; other strides take the scalar path", () => {
  const rng = new Rng(17);
  const rec = recordingBackend();
  const fusedNames = () => [...rec.names].filter((n) => n.startsWith("fused_"));
  for (const dt of ["f32", "f16"] as Dtype[]) {
    const t = tolFor(dt);
    const r = (e: ReturnType<typeof E.unary>) => (dt === "f16" ? asF16Output(e) : e);
    const x = randTensor(rng, [6, 8], dt, -3, 3), bias = randTensor(rng, [8], "f32"), col = randTensor(rng, [6, 1], dt);
    const y = randTensor(rng, [3, 5, 8], dt), z = randTensor(rng, [3, 1, 8], dt);
    for (const B of [rec.B, unfused]) {
      // gelu(x + bias): x f16 or f32, bias f32 (mixed dtypes: the result takes x's dtype)
      const xb = E.binary(x.ref, bias.ref, (p, q) => p + q);
      assertClose(B.gelu(B.castDtype!(B.add(B.castDtype!(x.td, "f32"), bias.td), dt)), r(E.unary(dt === "f16" ? asF16Output(xb) : xb, E.gelu)), { atol: 2e-3, rtol: 2e-3 }, `gelu(x + bias) ${dt}`);
      assertClose(B.mul(B.exp(x.td), col.td), r(E.binary(E.unary(x.ref, Math.exp), col.ref, (p, q) => p * q)), { atol: 5e-3, rtol: 3e-3 }, `exp(x) * col ${dt}`);
      assertClose(B.sub(B.scale(y.td, 2), z.td), r(E.binary(E.unary(y.ref, (v) => 2 * v), z.ref, (p, q) => p - q)), t, `2y - z ${dt}`);
    }
  }
  assert.ok(fusedNames().length > 0 && fusedNames().every((n) => n.endsWith("_v4")), `4-wide only: ${fusedNames()}`);
  // an innermost dim of 6 cannot be split into vectors
  const a = randTensor(rng, [3, 6], "f32"), b = randTensor(rng, [6], "f32");
  assertClose(rec.B.mul(rec.B.add(a.td, b.td), a.td), E.binary(E.binary(a.ref, b.ref, (p, q) => p + q), a.ref, (p, q) => p * q), TOL.f32, "(a + b) * a, C = 6");
  assert.ok(fusedNames().some((n) => !n.endsWith("_v4")), `a scalar kernel for C = 6: ${fusedNames()}`);
});
