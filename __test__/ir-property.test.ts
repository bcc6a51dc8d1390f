// Property test: random well-typed expression trees are compiled, run on the device and
// compared with the kernel interpreter's evaluation (evalExpr, __test__/support/kernel-interp.ts).
// Without a device the modules are still validated with spirv-val.
//
// Generator rules keep both sides defined: no integer division, shift amounts masked to 0..31,
// float division by |b| + 0.5, exp of clamped values, float->int casts of clamped values.
// Comparisons, floor/ceil and float->int casts only see "exact" float subtrees (+ - * min max
// neg abs select casts), which IEEE rounds identically on both sides, so a last-ulp difference
// in div/sqrt/exp/tanh can never flip a branch.
import { after, test } from "node:test";
import assert from "node:assert/strict";
import {
  abs, ceil, clamp, exp, f32, floor, i32, kernel, lit, max, min, select, sqrt, tanh, u32,
  Expr, type ScalarType,
} from "../ts/ir/index.js";
import { closeTo, evalExpr, type ExprEnv, type ExprValue } from "./support/kernel-interp.js";
import { deviceSkipReason, native, randF32, randI32, randU32, rng, runKernel, spirvVal, spirvValPath } from "./ir-harness.js";

type T = "f32" | "i32" | "u32" | "bool";

class Gen {
  constructor(private readonly r: () => number, private readonly leaves: Record<T, Expr[]>) {}

  private pick<X>(xs: X[]): X {
    return xs[Math.floor(this.r() * xs.length)];
  }

  private leaf(t: T): Expr {
    if (t === "bool") return this.r() < 0.5 ? lit("bool", this.r() < 0.5) : this.leaves.f32[0].lt(this.leaves.f32[1]);
    if (this.r() < 0.7) return this.pick(this.leaves[t]);
    if (t === "f32") return lit(f32, Math.fround(-4 + 8 * this.r()));
    if (t === "i32") return lit(i32, Math.floor(-1000 + 2000 * this.r()));
    return lit(u32, Math.floor(5000 * this.r()));
  }

  expr(t: T, depth: number, exact = false): Expr {
    if (depth <= 0 || this.r() < 0.15) return this.leaf(t);
    const d = depth - 1;
    switch (t) {
      case "f32": return this.f32(d, exact);
      case "i32": return this.int("i32", d);
      case "u32": return this.int("u32", d);
      default: return this.bool(d);
    }
  }

  private f32(d: number, exact: boolean): Expr {
    const a = () => this.expr("f32", d, exact);
    const ops: (() => Expr)[] = [
      () => a().add(a()), () => a().sub(a()), () => a().mul(a()), () => min(a(), a()), () => max(a(), a()),
      () => a().neg(), () => abs(a()), () => select(this.expr("bool", d), a(), a()),
      () => this.expr("i32", d).cast(f32), () => this.expr("u32", d).cast(f32),
    ];
    if (!exact) {
      ops.push(
        () => a().div(abs(a()).add(0.5)), () => sqrt(abs(a())), () => tanh(a()),
        () => exp(clamp(a(), -3, 3)), () => floor(this.expr("f32", d, true)), () => ceil(this.expr("f32", d, true)),
      );
    }
    return this.pick(ops)();
  }

  private int(t: "i32" | "u32", d: number): Expr {
    const a = () => this.expr(t, d);
    const ops: (() => Expr)[] = [
      () => a().add(a()), () => a().sub(a()), () => a().mul(a()), () => a().band(a()), () => a().bor(a()),
      () => a().bxor(a()), () => a().shl(a().band(31)), () => a().shr(a().band(31)), () => min(a(), a()),
      () => max(a(), a()), () => select(this.expr("bool", d), a(), a()), () => a().bnot(),
      () => this.expr(t === "i32" ? "u32" : "i32", d).cast(t),
    ];
    if (t === "i32") {
      ops.push(() => a().neg(), () => abs(a()), () => clamp(this.expr("f32", d, true), -1e6, 1e6).cast(i32));
    } else {
      ops.push(() => clamp(this.expr("f32", d, true), 0, 1e6).cast(u32));
    }
    return this.pick(ops)();
  }

  private bool(d: number): Expr {
    const cmp = this.pick(["lt", "le", "gt", "ge", "eq", "ne"] as const);
    const ops: (() => Expr)[] = [
      () => this.expr("f32", d, true)[cmp](this.expr("f32", d, true)),
      () => this.expr("i32", d)[cmp](this.expr("i32", d)),
      () => this.expr("u32", d)[cmp](this.expr("u32", d)),
      () => this.expr("bool", d).and(this.expr("bool", d)),
      () => this.expr("bool", d).or(this.expr("bool", d)),
      () => this.expr("bool", d).xor(this.expr("bool", d)),
      () => this.expr("bool", d).not(),
    ];
    return this.pick(ops)();
  }
}

const N = 64;
const TREES = 24;
const skip = deviceSkipReason();
const tool = spirvValPath();

for (let seed = 1; seed <= 16; seed++) {
  test(`random expression trees match the evaluator (seed ${seed})`, (t) => {
    const r = rng(seed * 7919);
    const k = kernel(`prop_${seed}`, { workgroup: [N] });
    const inF = k.buffer("in_f", f32, "read"), inI = k.buffer("in_i", i32, "read"), inU = k.buffer("in_u", u32, "read");
    const oF = k.buffer("o_f", f32, "write"), oI = k.buffer("o_i", i32, "write"), oU = k.buffer("o_u", u32, "write");
    const i = k.let(k.globalId.x, "i");
    const leaves: Record<T, Expr[]> = {
      f32: [inF.load(i.mul(2)), inF.load(i.mul(2).add(1))],
      i32: [inI.load(i.mul(2)), inI.load(i.mul(2).add(1))],
      u32: [inU.load(i.mul(2)), inU.load(i.mul(2).add(1))],
      bool: [],
    };
    const gen = new Gen(r, leaves);
    const trees: { e: Expr; t: T }[] = [];
    for (let j = 0; j < TREES; j++) {
      const ty = (["f32", "i32", "u32", "bool"] as const)[j % 4];
      const e = gen.expr(ty, 5);
      trees.push({ e, t: ty });
      const at = i.mul(TREES).add(j);
      if (ty === "f32") oF.store(at, e);
      else if (ty === "i32") oI.store(at, e);
      else oU.store(at, ty === "bool" ? e.cast(u32) : e);
    }
    const desc = k.finish();
    if (tool) assert.equal(spirvVal(tool.path, desc.name, native.kernelSpirv(desc)), undefined);
    const F = randF32(2 * N, -4, 4, seed), I = randI32(2 * N, -100000, 100000, seed + 1), U = randU32(2 * N, 0, 1 << 30, seed + 2);
    const name = (e: Expr) => (e.node as { name: string }).name;
    // References first: the evaluator runs (and must not throw) even without a device.
    const wants: ExprValue[][] = [];
    for (let inv = 0; inv < N; inv++) {
      const env: ExprEnv = new Map();
      const bind = (e: Expr, v: number, ty: ScalarType) => env.set(name(e), { value: v, type: ty });
      bind(leaves.f32[0], F[2 * inv], "f32"); bind(leaves.f32[1], F[2 * inv + 1], "f32");
      bind(leaves.i32[0], I[2 * inv], "i32"); bind(leaves.i32[1], I[2 * inv + 1], "i32");
      bind(leaves.u32[0], U[2 * inv], "u32"); bind(leaves.u32[1], U[2 * inv + 1], "u32");
      bind(i, inv, "u32");
      wants.push(trees.map(({ e }) => evalExpr(e.node, env)));
    }
    if (skip) {
      t.skip(skip);
      return;
    }
    const [, , , outF, outI, outU] = runKernel(desc, { buffers: [F, I, U, N * TREES * 4, N * TREES * 4, N * TREES * 4], groups: [1] });
    const gotF = new Float32Array(outF), gotI = new Int32Array(outI), gotU = new Uint32Array(outU);
    for (let inv = 0; inv < N; inv++) {
      trees.forEach(({ e, t: ty }, j) => {
        const want = wants[inv][j];
        const at = inv * TREES + j;
        const got = ty === "f32" ? gotF[at] : ty === "i32" ? gotI[at] : ty === "bool" ? gotU[at] === 1 : gotU[at];
        assert.ok(closeTo(got, want, ty === "f32" ? 1e-3 : 0), `seed ${seed} tree ${j} (${ty}) invocation ${inv}: got ${got}, want ${want}\n${JSON.stringify(e.node)}`);
      });
    }
  });
}

after(() => {
  // With HELIOS_VALIDATION=1 any validation-layer message is a failure.
  if (skip || typeof native.takeValidationMessages !== "function") return;
  assert.deepEqual(native.takeValidationMessages(), []);
});
