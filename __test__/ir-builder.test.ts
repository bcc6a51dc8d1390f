// The TS side of the IR alone (no addon): what the builder emits and what the interpreter computes.
import { test } from "node:test";
import assert from "node:assert/strict";
import { bin, coopmat, f16, f32, i32, kernel, lit, u32, vecOf } from "../ts/ir/index.js";
import { roundF16 } from "../ts/f16.js";
import { closeTo, evalExpr, typeOfExpr } from "./support/kernel-interp.js";

test("builder emits version 1 JSON with declarations in order", () => {
  const k = kernel("b_add", { workgroup: [64, 2] });
  const a = k.buffer("a", f32, "read");
  const o = k.buffer("o", f32, "write");
  const { n } = k.push({ n: u32 });
  k.spec("TILE", u32, 16);
  k.shared("tile", f32, 64);
  const i = k.let(k.globalId.x, "i");
  k.if(i.lt(n), () => o.store(i, a.load(i).add(1)));
  const d = k.finish();
  assert.equal(d.version, 1);
  assert.deepEqual(d.workgroup, [64, 2]);
  assert.deepEqual(d.bindings.map((b) => b.name), ["a", "o"]);
  assert.deepEqual(d.push, [{ name: "n", type: "u32" }]);
  assert.deepEqual(d.spec, [{ name: "TILE", id: 0, type: "u32", value: 16 }]);
  assert.equal(d.body.length, 2);
  assert.equal(JSON.parse(JSON.stringify(d)).name, "b_add");
});

test("memory reads are eager: a load before a store reads the old value", () => {
  const k = kernel("b_eager", { workgroup: [1] });
  const s = k.shared("s", f32, 1);
  const o = k.buffer("o", f32, "write");
  const old = s.load(0);
  s.store(0, 5);
  o.store(0, old);
  const body = k.finish().body;
  assert.deepEqual(body.map((st) => st.s), ["let", "store", "store"]);
});

test("generated names never collide, even with user hints that look generated", () => {
  const k = kernel("b_names", { workgroup: [1] });
  const v = k.var(f32, 0, "va");
  k.var(f32, 0, "va_1");
  v.get();
  v.get();
  k.var(f32, 0, "va");
  const names = k.finish().body.map((st) => ("name" in st ? st.name : ""));
  assert.equal(new Set(names).size, names.length, names.join(","));
});

test("numbers lift to the other operand's type; mixed types are rejected", () => {
  const x = lit(i32, 3);
  assert.equal(x.add(2).type, "i32");
  assert.equal(vecOf("f32x4", 1).mul(2).type, "f32x4");
  assert.throws(() => bin("add", lit(f16, 1), lit(f32, 1)), /f16 vs f32/);
  const t = coopmat("acc", f32, 16, 16);
  assert.deepEqual(t, { coopmat: "acc", elem: "f32", rows: 16, cols: 16, scope: "subgroup" });
});

test("evaluator: integer wrap, shifts, conversions, f16/bf16 rounding", () => {
  const ev = (e: ReturnType<typeof lit>) => evalExpr(e.node);
  assert.equal(ev(lit(i32, 2147483647).add(1)), -2147483648);
  assert.equal(ev(lit(u32, 0).sub(1)), 4294967295);
  assert.equal(ev(lit(u32, 0x80000000).shr(31)), 1);
  assert.equal(ev(lit(i32, -8).shr(1)), -4);
  assert.equal(ev(lit(i32, -7).div(2)), -3);
  assert.equal(ev(lit(i32, -7).rem(2)), -1);
  assert.equal(ev(lit(f32, -2.7).cast(i32)), -2);
  assert.equal(ev(lit(i32, -1).cast(u32)), 4294967295);
  assert.equal(ev(lit(f32, 0.1)), Math.fround(0.1));
  assert.equal(roundF16(1 + 2 ** -11), 1); // tie to even
  assert.equal(roundF16(1 + 3 * 2 ** -11), 1 + 2 ** -9);
  assert.equal(roundF16(70000), Infinity);
  assert.equal(ev(lit(f32, 1.00390625).cast("bf16")), 1); // 1 + 2^-8 ties to even in bf16
  assert.equal(typeOfExpr(lit(f32, 1).lt(2).node), "bool");
  assert.ok(closeTo([1, 2], [1, 2 + 1e-9], 1e-6));
});
