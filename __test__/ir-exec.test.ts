// Execution tests of IR features on the device (lavapipe in CI), against CPU references on
// random data. Each test builds a small kernel with the TS builder, runs it once and compares.
import { after, test, type TestContext } from "node:test";
import assert from "node:assert/strict";
import {
  clamp, exp, f16, f32, fma, i32, kernel, lit, log, max, min, select, sqrt, tanh, u32, vecOf,
  type KernelDesc,
} from "../ts/ir/index.js";
import { roundF16 } from "../ts/f16.js";
import {
  deviceSkipReason, maxRelErr, native, pushBytes, randF32, randI32, randU32, runKernel, spirvVal, spirvValPath,
  type RunSpec,
} from "./ir-harness.js";

const skip = deviceSkipReason();
const tool = spirvValPath();

/** Validates the module with spirv-val, then runs it when a device exists (else skips). */
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
const WG = 64;
const groups = (n: number) => [Math.ceil(n / WG)];

test("elementwise f32 with bounds check, odd size", (tc) => {
  const n = 1001;
  const k = kernel("t_add_f32", { workgroup: [WG] });
  const a = k.buffer("a", f32, "read"), b = k.buffer("b", f32, "read"), o = k.buffer("o", f32, "write");
  const p = k.push({ n: u32, s: f32 });
  const i = k.let(k.globalId.x, "i");
  k.if(i.lt(p.n), () => o.store(i, fma(a.load(i), p.s, b.load(i))));
  const A = randF32(n, -2, 2, 11), B = randF32(n, -2, 2, 12);
  const res = run(tc, k.finish(), { buffers: [A, B, n * 4], groups: groups(n), push: pushBytes([["u32", n], ["f32", 0.75]]) });
  if (!res) return;
  const [, , out] = res;
  const want = A.map((x, j) => Math.fround(x * 0.75 + B[j]));
  assert.ok(maxRelErr(new Float32Array(out), want) < 1e-6);
});

test("vec4 views: loads and stores through f32x4", (tc) => {
  const n4 = 257;
  const k = kernel("t_vec4", { workgroup: [WG] });
  const a = k.buffer("a", f32, "read"), o = k.buffer("o", f32, "write");
  const { n } = k.push({ n: u32 });
  const i = k.let(k.globalId.x, "i");
  k.if(i.lt(n), () => {
    const v = a.loadVec(i, 4);
    o.store(i, vecOf("f32x4", v.w, v.z, v.y, v.x).mul(2).add(v));
  });
  const A = randF32(n4 * 4, -1, 1, 21);
  const res = run(tc, k.finish(), { buffers: [A, n4 * 16], groups: groups(n4), push: pushBytes([["u32", n4]]) });
  if (!res) return;
  const [, out] = res;
  const want = new Float32Array(n4 * 4);
  for (let q = 0; q < n4; q++) for (let c = 0; c < 4; c++) want[q * 4 + c] = Math.fround(2 * A[q * 4 + 3 - c] + A[q * 4 + c]);
  assert.ok(maxRelErr(new Float32Array(out), want) < 1e-6);
});

test("f16 storage with f32 compute", (tc) => {
  const n = 515;
  const k = kernel("t_f16", { workgroup: [WG] });
  const a = k.buffer("a", f16, "read"), o = k.buffer("o", f16, "write");
  const { n: len } = k.push({ n: u32 });
  const i = k.let(k.globalId.x, "i");
  k.if(i.lt(len), () => o.store(i, a.load(i).cast(f32).mul(3).add(1).cast(f16)));
  const vals = randF32(n, -4, 4, 31).map(roundF16);
  const bits = new Uint16Array(n);
  const toF16Bits = (x: number) => {
    // exact for values already on the f16 grid
    const s = x < 0 ? 1 : 0; const ax = Math.abs(x);
    if (ax === 0) return s << 15;
    let e = Math.floor(Math.log2(ax)); if (e < -14) e = -14;
    const m = Math.round(ax / 2 ** e * 1024);
    return e === -14 && m < 1024 ? (s << 15) | m : (s << 15) | ((e + 15) << 10) | (m - 1024);
  };
  vals.forEach((x, j) => (bits[j] = toF16Bits(x)));
  const res = run(tc, k.finish(), { buffers: [bits, n * 2], groups: groups(n), push: pushBytes([["u32", n]]) });
  if (!res) return;
  const [, out] = res;
  const got = new Uint16Array(out, 0, n);
  const fromBits = (h: number) => {
    const s = h & 0x8000 ? -1 : 1; const e = (h >> 10) & 31; const m = h & 1023;
    return e === 0 ? s * m * 2 ** -24 : s * (1 + m / 1024) * 2 ** (e - 15);
  };
  const want = Array.from(vals, (x) => roundF16(Math.fround(x * 3 + 1)));
  assert.ok(maxRelErr(Array.from(got, fromBits), want) < 1e-3);
});

test("i32/u32 arithmetic, bit ops, shifts, comparisons, select, casts", (tc) => {
  const n = 300;
  const k = kernel("t_int", { workgroup: [WG] });
  const a = k.buffer("a", i32, "read"), b = k.buffer("b", i32, "read");
  const o = k.buffer("o", i32, "write"), ou = k.buffer("ou", u32, "write");
  const i = k.let(k.globalId.x, "i");
  k.if(i.lt(n), () => {
    const x = a.load(i), y = b.load(i);
    const r = x.mul(y).sub(x.shr(2)).add(y.band(0xff).bxor(x.bor(3))).add(x.rem(y)).add(x.div(y));
    o.store(i, select(x.lt(y), r, min(r, y.shl(3)).sub(max(x, -5))));
    const ux = x.cast(u32);
    ou.store(i, ux.shr(3).add(ux.mul(2654435761)).bxor(clamp(y, -100, 100).cast(u32)));
  });
  const A = randI32(n, -100000, 100000, 41), B = randI32(n, 1, 5000, 42);
  const res = run(tc, k.finish(), { buffers: [A, B, n * 4, n * 4], groups: groups(n) });
  if (!res) return;
  const [, , out, outU] = res;
  const got = new Int32Array(out), gotU = new Uint32Array(outU);
  for (let j = 0; j < n; j++) {
    const x = A[j], y = B[j];
    const r = (Math.imul(x, y) - (x >> 2) + ((y & 0xff) ^ (x | 3)) + (x % y) + Math.trunc(x / y)) | 0;
    const want = x < y ? r : (Math.min(r, y << 3) - Math.max(x, -5)) | 0;
    assert.equal(got[j], want, `i32 lane ${j}`);
    const ux = x >>> 0;
    const wantU = (((ux >>> 3) + Math.imul(ux, 2654435761)) >>> 0 ^ (Math.min(Math.max(y, -100), 100) >>> 0)) >>> 0;
    assert.equal(gotU[j], wantU, `u32 lane ${j}`);
  }
});

test("GLSL.std.450 math within tolerance", (tc) => {
  const n = 333;
  const k = kernel("t_math", { workgroup: [WG] });
  const a = k.buffer("a", f32, "read"), o = k.buffer("o", f32, "write");
  const i = k.let(k.globalId.x, "i");
  k.if(i.lt(n), () => {
    const x = a.load(i);
    o.store(i, exp(x).add(log(x.add(3))).add(sqrt(x.add(2))).add(tanh(x)).add(max(x, 0)));
  });
  const A = randF32(n, -1.5, 1.5, 51);
  const res = run(tc, k.finish(), { buffers: [A, n * 4], groups: groups(n) });
  if (!res) return;
  const [, out] = res;
  const want = Array.from(A, (x) => Math.exp(x) + Math.log(x + 3) + Math.sqrt(x + 2) + Math.tanh(x) + Math.max(x, 0));
  assert.ok(maxRelErr(new Float32Array(out), want) < 1e-4);
});

test("control flow: for with step, while/break/continue, loop, early return, if/else", (tc) => {
  const n = 200;
  const k = kernel("t_flow", { workgroup: [WG] });
  const a = k.buffer("a", u32, "read"), o = k.buffer("o", u32, "write");
  const i = k.let(k.globalId.x, "i");
  k.if(i.ge(n), () => k.return());
  const x = k.let(a.load(i), "x");
  const acc = k.var(u32, 0, "acc");
  k.for(0, x.rem(17), (j) => acc.set(acc.get().add(j)), { step: 2 });
  const c = k.var(u32, x, "c");
  k.while(() => c.get().gt(0), () => {
    c.set(c.get().sub(1));
    k.if(c.get().rem(3).eq(0), () => k.continue());
    acc.set(acc.get().add(1));
    k.if(acc.get().gt(100), () => k.break());
  });
  k.loop(() => { acc.set(acc.get().mul(2)); k.break(); });
  k.if(x.rem(2).eq(0), () => o.store(i, acc.get()), () => o.store(i, acc.get().add(1000)));
  const A = randU32(n, 0, 60, 61);
  const res = run(tc, k.finish(), { buffers: [A, n * 4], groups: groups(n) });
  if (!res) return;
  const [, out] = res;
  const got = new Uint32Array(out);
  for (let j = 0; j < n; j++) {
    const xv = A[j];
    let acc2 = 0;
    for (let q = 0; q < xv % 17; q += 2) acc2 += q;
    let cc = xv;
    while (cc > 0) { cc--; if (cc % 3 === 0) continue; acc2++; if (acc2 > 100) break; }
    acc2 *= 2;
    assert.equal(got[j], xv % 2 === 0 ? acc2 : acc2 + 1000, `lane ${j}`);
  }
});

test("shared memory tree reduction with barriers, spec-constant workgroup size", (tc) => {
  const rows = 37, cols = 1000;
  const k = kernel("t_rowsum", { workgroup: ["WG"] });
  const wg = k.spec("WG", u32, 64);
  const x = k.buffer("x", f32, "read"), o = k.buffer("o", f32, "write");
  const { cols: C } = k.push({ cols: u32 });
  const sh = k.shared("part", f32, 64);
  const row = k.let(k.workgroupId.x, "row"), t = k.let(k.localIndex, "t");
  const acc = k.var(f32, 0, "acc");
  k.for(t, C, (c) => acc.set(acc.get().add(x.load(row.mul(C).add(c)))), { step: wg });
  sh.store(t, acc.get());
  k.barrier();
  k.for(0, 6, (s) => {
    const half = k.let(lit(u32, 32).shr(s), "half");
    k.if(t.lt(half), () => sh.store(t, sh.load(t).add(sh.load(t.add(half)))));
    k.barrier();
  });
  k.if(t.eq(0), () => o.store(row, sh.load(0)));
  const X = randF32(rows * cols, -1, 1, 71);
  const res = run(tc, k.finish(), { buffers: [X, rows * 4], groups: [rows], push: pushBytes([["u32", cols]]) });
  if (!res) return;
  const [, out] = res;
  const want = Array.from({ length: rows }, (_, r) => X.subarray(r * cols, (r + 1) * cols).reduce((s, v) => s + v, 0));
  assert.ok(maxRelErr(new Float32Array(out), want) < 1e-4);
});

test("subgroup reduce/scan/shuffle/broadcast/elect", (tc) => {
  const n = WG * 4;
  const k = kernel("t_subgroup", { workgroup: [WG] });
  const a = k.buffer("a", u32, "read"), o = k.buffer("o", u32, "write");
  const i = k.let(k.globalId.x, "i");
  const x = a.load(i);
  const outs = [
    k.sgReduce("add", x), k.sgReduce("max", x), k.sgReduce("min", x),
    k.sgInclusive("add", x), k.sgExclusive("add", x),
    k.shuffle(x, 0), k.shuffleXor(x, 1), k.broadcast(x, 1), k.broadcastFirst(x),
    select(k.elect(), lit(u32, 1), lit(u32, 0)), k.subgroupSize, k.subgroupInvocation,
  ];
  outs.forEach((e, j) => o.store(i.mul(outs.length).add(j), e));
  const A = randU32(n, 1, 1000, 81);
  const res = run(tc, k.finish(), { buffers: [A, n * outs.length * 4], groups: [n / WG] });
  if (!res) return;
  const [, out] = res;
  const got = new Uint32Array(out);
  const W = outs.length;
  const sgs = got[10];
  assert.ok(sgs >= 1 && (sgs & (sgs - 1)) === 0, `subgroup size ${sgs}`);
  for (let j = 0; j < n; j++) {
    const lane = got[j * W + 11];
    const base = j - lane;
    const grp = Array.from(A.subarray(base, base + sgs));
    const inc = grp.slice(0, lane + 1).reduce((s, v) => s + v, 0);
    const want = [grp.reduce((s, v) => s + v, 0), Math.max(...grp), Math.min(...grp), inc, inc - A[j],
      grp[0], grp[lane ^ 1], grp[1], grp[0], lane === 0 ? 1 : 0, sgs, lane];
    assert.deepEqual(Array.from(got.subarray(j * W, j * W + W)), want, `invocation ${j}`);
  }
});

test("atomics: u32 add histogram, i32 min/max, cas, shared atomics", (tc) => {
  const n = 4096, bins = 16;
  const k = kernel("t_atomics", { workgroup: [WG] });
  const a = k.buffer("a", u32, "read"), h = k.buffer("h", u32, "readwrite"), mm = k.buffer("mm", i32, "readwrite");
  const sh = k.shared("local", u32, bins);
  const i = k.let(k.globalId.x, "i"), t = k.let(k.localIndex, "t");
  k.if(t.lt(bins), () => sh.store(t, 0));
  k.barrier();
  const x = a.load(i);
  sh.atomicAdd(x.rem(bins), 1);
  mm.atomicMin(0, x.cast(i32).sub(500));
  mm.atomicMax(1, x.cast(i32).sub(500));
  mm.atomic("cas", 2, x.cast(i32), 0);
  k.barrier();
  k.if(t.lt(bins), () => { h.atomicAdd(t, sh.load(t)); });
  const A = randU32(n, 0, 1000, 91);
  const init = new Int32Array([1 << 30, -(1 << 30), 0]);
  const res = run(tc, k.finish(), { buffers: [A, new Uint32Array(bins), init], groups: [n / WG] });
  if (!res) return;
  const [, hist, minmax] = res;
  const want = new Uint32Array(bins);
  A.forEach((v) => want[v % bins]++);
  assert.deepEqual(Array.from(new Uint32Array(hist)), Array.from(want));
  const mmv = new Int32Array(minmax);
  assert.equal(mmv[0], Math.min(...A) - 500);
  assert.equal(mmv[1], Math.max(...A) - 500);
  assert.ok(Array.from(A).includes(mmv[2]), "cas stored one of the inputs");
});

test("local arrays, dynamic vector index, swizzles, bool/bitcast casts", (tc) => {
  const n = 128;
  const k = kernel("t_locals", { workgroup: [WG] });
  const a = k.buffer("a", f32, "read"), o = k.buffer("o", f32, "write");
  const i = k.let(k.globalId.x, "i");
  k.if(i.lt(n), () => {
    const regs = k.array(f32, 4, "regs");
    k.for(0, 4, (j) => regs.set(j, a.load(i.add(j).rem(n)).mul(j.cast(f32))), { unroll: true });
    const v = k.let(vecOf("f32x4", regs.at(0), regs.at(1), regs.at(2), regs.at(3)), "v");
    const pick = k.var("f32x4", v, "pick");
    const dyn = pick.at(i.rem(4));
    const bits = dyn.bitcast(u32).bitcast(f32);
    const flag = dyn.gt(0).cast(f32);
    o.store(i, bits.add(flag).add(v.swz("wz").x));
  });
  const A = randF32(n, -1, 1, 101);
  const res = run(tc, k.finish(), { buffers: [A, n * 4], groups: groups(n) });
  if (!res) return;
  const [, out] = res;
  const want = Array.from({ length: n }, (_, j) => {
    const regs = [0, 1, 2, 3].map((q) => Math.fround(A[(j + q) % n] * q));
    const dyn = regs[j % 4];
    return Math.fround(Math.fround(dyn + (dyn > 0 ? 1 : 0)) + regs[3]);
  });
  assert.ok(maxRelErr(new Float32Array(out), want) < 1e-6);
});

test("compileKernel memoizes by content", { skip }, () => {
  const mk = () => {
    const k = kernel("t_memo", { workgroup: [WG] });
    const o = k.buffer("o", f32, "write");
    o.store(k.globalId.x, 1);
    return k.finish();
  };
  assert.equal(native.compileKernel(mk()), native.compileKernel(JSON.stringify(mk())));
});

test("compileKernels: many descriptions on several threads, the same memoized handles, errors by index", { skip }, () => {
  const mk = (c: number) => {
    const k = kernel(`t_many_${c}`, { workgroup: [WG] });
    const o = k.buffer("o", f32, "write");
    const i = k.let(k.globalId.x, "i");
    o.store(i, i.cast(f32).mul(c).add(0.5));
    return k.finish();
  };
  const consts = [3, 5, 7, 11, 13, 17, 19];
  // a repeated description and one compileKernel compiled first share handles
  const first = native.compileKernel(mk(3));
  const jsons = [...consts, 5].map((c) => JSON.stringify(mk(c)));
  const handles: number[] = native.compileKernels(jsons, 4);
  assert.equal(handles.length, jsons.length);
  assert.equal(handles[0], first);
  assert.equal(handles[7], handles[1]);
  assert.equal(new Set(handles).size, consts.length);
  assert.deepEqual(native.compileKernels(jsons), handles);
  const buf = native.createBuffer(WG * 4);
  try {
    consts.forEach((c, j) => {
      native.beginBatch();
      native.recordDispatch(handles[j], [buf], [1]);
      native.waitTimeline(native.submitBatch());
      const got = new Float32Array(native.readBuffer(buf));
      assert.deepEqual([...got.slice(0, 3)], [0.5, c + 0.5, 2 * c + 0.5], `kernel ${c}`);
    });
  } finally {
    native.destroyBuffer(buf);
  }
  const code = (c: string, msg: RegExp) => (e: Error & { code?: string }) => e.code === c && msg.test(e.message);
  assert.throws(() => native.compileKernels([jsons[0], jsons[1], "{\"name\": 1}"]), code("ERR_HELIOS_INVALID_KERNEL", /compileKernels: descs\[2\]/));
  assert.throws(() => native.compileKernels([jsons[0], 42]), code("ERR_HELIOS_INVALID_ARGUMENT", /descs\[1\] must be a string/));
  assert.throws(() => native.compileKernels("x"), code("ERR_HELIOS_INVALID_ARGUMENT", /descs must be an array/));
  assert.throws(() => native.compileKernels(jsons, 0), code("ERR_HELIOS_INVALID_ARGUMENT", /threads = 0/));
  assert.deepEqual(native.compileKernels([]), []);
});

after(() => {
  // With HELIOS_VALIDATION=1 any validation-layer message is a failure.
  if (skip || typeof native.takeValidationMessages !== "function") return;
  assert.deepEqual(native.takeValidationMessages(), []);
});

test("f32 atomic add where the device supports it", (tc) => {
  const n = 2048;
  const k = kernel("t_atomic_f32", { workgroup: [WG] });
  const a = k.buffer("a", f32, "read"), s = k.buffer("s", f32, "readwrite");
  const i = k.let(k.globalId.x, "i");
  s.atomicAdd(i.rem(4), a.load(i));
  const desc = k.finish();
  if (!skip && !native.getDeviceInfo().atomicFloatAddSupported) {
    assert.throws(() => native.compileKernel(desc), (e: Error & { code?: string }) => e.code === "ERR_HELIOS_INVALID_KERNEL");
    tc.skip("no shaderBufferFloat32AtomicAdd: rejected as InvalidKernel, as it should be");
    return;
  }
  const A = randF32(n, -1, 1, 111);
  const res = run(tc, desc, { buffers: [A, new Float32Array(4)], groups: [n / WG] });
  if (!res) return;
  const [, sums] = res;
  const want = [0, 1, 2, 3].map((q) => A.filter((_, j) => j % 4 === q).reduce((x, y) => x + y, 0));
  assert.ok(maxRelErr(new Float32Array(sums), want) < 1e-4);
});

test("reinterpreting views: f16 data copied as u32x4, f32 bits read as u32", (tc) => {
  const n4 = 40; // 40 x 128-bit = 320 f16 values
  const k = kernel("t_views", { workgroup: [WG] });
  const h = k.buffer("h", f16, "read"), o = k.buffer("o", f16, "write");
  const x = k.buffer("x", f32, "read"), bits = k.buffer("bits", f32, "write");
  const i = k.let(k.globalId.x, "i");
  k.if(i.lt(n4), () => {
    o.as("u32", 4).store(i, h.as("u32", 4).load(i));
    bits.as("u32").store(i, x.as("u32").load(i).bxor(0x80000000));
  });
  const H = Uint16Array.from({ length: n4 * 8 }, (_, j) => (j * 2654435761) & 0x7bff);
  const X = randF32(n4, -3, 3, 121);
  const res = run(tc, k.finish(), { buffers: [H, n4 * 16, X, n4 * 4], groups: groups(n4) });
  if (!res) return;
  const [, out, , flipped] = res;
  assert.deepEqual(Array.from(new Uint16Array(out)), Array.from(H));
  assert.deepEqual(Array.from(new Float32Array(flipped)), Array.from(X, (v) => -v));
});
