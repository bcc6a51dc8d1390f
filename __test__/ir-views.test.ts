// Execution tests of memory views (lavapipe in CI) against CPU references on random data:
// vector views of shared arrays, u32x4 shared arrays, 128-bit views of f16 buffers unpacked and
// packed with u32 <-> f16x2 bitcasts.
import { test, type TestContext } from "node:test";
import assert from "node:assert/strict";
import { f16, f32, kernel, packHalves, unpackHalves, vecOf, type KernelDesc } from "../ts/ir/index.js";
import { f16BitsToF32, f32ToF16Bits } from "../ts/f16.js";
import {
  deviceSkipReason, maxRelErr, native, randF32, runKernel, spirvVal, spirvValPath, type RunSpec,
} from "./ir-harness.js";

const skip = deviceSkipReason();
const tool = spirvValPath();
const WG = 64;
const GROUPS = 3;

function run(t: TestContext, desc: KernelDesc, spec: RunSpec): ArrayBuffer[] | undefined {
  if (tool) {
    const err = spirvVal(tool.path, desc.name, native.kernelSpirv(desc));
    assert.equal(err, undefined, `${desc.name}: spirv-val: ${err}`);
  }
  if (skip) {
    t.skip(skip);
    return undefined;
  }
  return runKernel(desc, spec);
}

function randHalfBits(n: number, seed: number): Uint16Array {
  const v = randF32(n, -3, 3, seed);
  return Uint16Array.from(v, (x) => f32ToF16Bits(x));
}

test("shared f32 array: f32x4 stores, scalar and f32x2 loads of the same memory", (tc) => {
  const k = kernel("t_shared_vec_f32", { workgroup: [WG] });
  const a = k.buffer("a", f32, "read"), o = k.buffer("o", f32, "write");
  const s = k.shared("s", f32, WG * 4);
  const t = k.let(k.localIndex, "t");
  const g = k.let(k.globalId.x, "g");
  s.store(t, a.loadVec(g, 4)); // a 4-wide value into a scalar array: vector view, t counts vectors
  k.barrier();
  const x = s.load(t.mul(4).add(5).rem(WG * 4));
  const y = s.loadVec(t.add(3).rem(WG * 2), 2);
  const z = s.vec(4).load(t.add(1).rem(WG));
  o.store(g, vecOf("f32x4", x, y, z.w));
  const n = GROUPS * WG * 4;
  const A = randF32(n, -2, 2, 101);
  const res = run(tc, k.finish(), { buffers: [A, n * 4], groups: [GROUPS] });
  if (!res) return;
  const got = new Float32Array(res[1]);
  const want = new Float32Array(n);
  for (let wg = 0; wg < GROUPS; wg++) {
    const sh = A.subarray(wg * WG * 4, (wg + 1) * WG * 4);
    for (let tt = 0; tt < WG; tt++) {
      const q = (wg * WG + tt) * 4;
      const yi = ((tt + 3) % (WG * 2)) * 2;
      want[q] = sh[(tt * 4 + 5) % (WG * 4)];
      want[q + 1] = sh[yi];
      want[q + 2] = sh[yi + 1];
      want[q + 3] = sh[((tt + 1) % WG) * 4 + 3];
    }
  }
  assert.equal(maxRelErr(got, want), 0);
});

test("f16 binding as u32x4 (8 halves per load) through a u32x4 shared array, unpacked and repacked", (tc) => {
  const k = kernel("t_f16_128bit", { workgroup: [WG] });
  const a = k.buffer("a", f16, "read"), o = k.buffer("o", f32, "write"), p = k.buffer("p", f16, "write");
  const q = k.shared("q", "u32x4", WG);
  const t = k.let(k.localIndex, "t");
  const g = k.let(k.globalId.x, "g");
  q.store(t, a.as("u32", 4).load(g));
  k.barrier();
  const w = q.load(t.add(1).rem(WG));
  const h = unpackHalves(w).map((c) => k.let(c, "h"));
  const f = h.map((c) => c.cast("f32x2").mul(1.5).add(vecOf("f32x2", 1)));
  o.store(g.mul(2), vecOf("f32x4", f[0], f[1]));
  o.store(g.mul(2).add(1), vecOf("f32x4", f[2], f[3]));
  // Repack with the halves of each pair swapped: f16x2 -> u32 bitcasts, one 128-bit store.
  p.as("u32", 4).store(g, packHalves(h.map((c) => c.swz("yx"))));
  const n = GROUPS * WG * 8;
  const A = randHalfBits(n, 202);
  const res = run(tc, k.finish(), { buffers: [A, n * 4, n * 2], groups: [GROUPS] });
  if (!res) return;
  const got = new Float32Array(res[1]);
  const packed = new Uint16Array(res[2]);
  const want = new Float32Array(n);
  const wantP = new Uint16Array(n);
  for (let wg = 0; wg < GROUPS; wg++) {
    for (let tt = 0; tt < WG; tt++) {
      const src = (wg * WG + ((tt + 1) % WG)) * 8;
      const dst = (wg * WG + tt) * 8;
      for (let j = 0; j < 8; j++) {
        want[dst + j] = Math.fround(Math.fround(f16BitsToF32(A[src + j]) * 1.5) + 1);
        wantP[dst + j] = A[src + (j ^ 1)];
      }
    }
  }
  assert.ok(maxRelErr(got, want) < 1e-6);
  assert.deepEqual(Array.from(packed), Array.from(wantP));
});

test("shared f16 array: f16x4 stores, f16x2 and scalar loads (4-wide elements, split 2-wide access)", (tc) => {
  const k = kernel("t_shared_vec_f16", { workgroup: [WG] });
  const a = k.buffer("a", f16, "read"), o = k.buffer("o", f16, "write");
  const s = k.shared("s", f16, WG * 4);
  const t = k.let(k.localIndex, "t");
  const g = k.let(k.globalId.x, "g");
  s.vec(4).store(t, a.loadVec(g, 4));
  k.barrier();
  const x = s.load(t.mul(4).add(7).rem(WG * 4));
  const y = s.loadVec(t.mul(2).add(5).rem(WG * 2), 2);
  k.barrier();
  s.vec(2).store(t.mul(2).add(1), y.swz("yx")); // 2-wide store into 4-wide elements
  k.barrier();
  const z = s.load(t.mul(4).add(2));
  o.store(g, vecOf("f16x4", x, y, z));
  const n = GROUPS * WG * 4;
  const A = randHalfBits(n, 303);
  const res = run(tc, k.finish(), { buffers: [A, n * 2], groups: [GROUPS] });
  if (!res) return;
  const got = new Uint16Array(res[1]);
  const want = new Uint16Array(n);
  for (let wg = 0; wg < GROUPS; wg++) {
    const sh = A.subarray(wg * WG * 4, (wg + 1) * WG * 4);
    for (let tt = 0; tt < WG; tt++) {
      const d = (wg * WG + tt) * 4;
      const yi = ((tt * 2 + 5) % (WG * 2)) * 2;
      want[d] = sh[(tt * 4 + 7) % (WG * 4)];
      want[d + 1] = sh[yi];
      want[d + 2] = sh[yi + 1];
      want[d + 3] = sh[yi + 1]; // element t*4+2 now holds y.y
    }
  }
  assert.deepEqual(Array.from(got), Array.from(want));
});
