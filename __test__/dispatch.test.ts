// Dispatch correctness against CPU references on random data, for odd sizes,
// 3-D grids, independent dispatches, and recordDispatch vs recordDispatchMany.
import assert from "node:assert/strict";
import { test } from "node:test";
import {
  assertArrayEqual, bufferWith, groupsFor, packDispatches, pipeline, randInt, randomF32, randomU32,
  readF32, readU32, rng, rt, runBatch, useDevice,
} from "./helpers.js";
import { push, WGID_MARKER } from "./kernels/index.js";

useDevice();

function axpbReference(x: Float32Array, a: number, b: number): Float32Array {
  return x.map((v) => Math.fround(Math.fround(v * a) + b));
}

test("axpb matches the CPU reference bit for bit for odd sizes, leaving the tail untouched", () => {
  const r = rng(101);
  for (const n of [1, 7, 63, 64, 65, 1000, 4099, 65537]) {
    const a = Math.fround(0.5 + r() * 2);
    const b = Math.fround(-1 - r());
    const x = randomF32(n, r);
    const sentinel = randomF32(n + 13, r);
    const hx = bufferWith(x);
    const hy = bufferWith(sentinel);
    runBatch(() => rt.recordDispatch(pipeline("axpb"), [hx, hy], [groupsFor(n)], push([["u", n], ["f", a], ["f", b]])));
    const y = readF32(hy);
    assertArrayEqual(y.subarray(0, n), axpbReference(x, a, b), `axpb n=${n}`);
    assertArrayEqual(y.subarray(n), sentinel.subarray(n), `axpb n=${n} tail`);
    rt.destroyBuffer(hx);
    rt.destroyBuffer(hy);
  }
});

test("copy and inc preserve every u32 bit pattern", () => {
  const r = rng(102);
  const n = 3001;
  const src = randomU32(n, r, 0xffffffff);
  const hs = bufferWith(src);
  const hd = bufferWith(randomU32(n, r));
  runBatch(() => {
    rt.recordDispatch(pipeline("copy"), [hs, hd], [groupsFor(n)], push([["u", n]]));
    rt.recordDispatch(pipeline("inc"), [hs], [groupsFor(n)], push([["u", n]]));
  });
  assertArrayEqual(readU32(hd), src, "copy");
  assertArrayEqual(readU32(hs), src.map((v) => (v + 1) >>> 0), "inc (wrapping)");
  rt.destroyBuffer(hs);
  rt.destroyBuffer(hd);
});

test("a 3-D grid runs every workgroup exactly once with the right id", () => {
  for (const [gx, gy, gz] of [[1, 1, 1], [3, 5, 7], [65, 2, 3], [1, 1, 40]]) {
    const groups = gx * gy * gz;
    const out = bufferWith(randomU32(4 * groups, rng(gx * 1000 + gy * 10 + gz)));
    runBatch(() => rt.recordDispatch(pipeline("wgid"), [out], [gx, gy, gz]));
    const got = readU32(out);
    const expected = new Uint32Array(4 * groups);
    for (let z = 0; z < gz; z++) {
      for (let y = 0; y < gy; y++) {
        for (let x = 0; x < gx; x++) {
          const w = x + gx * (y + gy * z);
          expected.set([x, y, z, (w ^ WGID_MARKER) >>> 0], 4 * w);
        }
      }
    }
    assertArrayEqual(got, expected, `wgid [${gx}, ${gy}, ${gz}]`);
    rt.destroyBuffer(out);
  }
});

test("groups may omit y and z", () => {
  const out = bufferWith(randomU32(4 * 9, rng(103)));
  runBatch(() => rt.recordDispatch(pipeline("wgid"), [out], [9]));
  const got = readU32(out);
  for (let w = 0; w < 9; w++) assert.deepEqual(Array.from(got.subarray(4 * w, 4 * w + 4)), [w, 0, 0, (w ^ WGID_MARKER) >>> 0]);
  rt.destroyBuffer(out);
});

test("64 independent dispatches in one batch all produce their own result", () => {
  const r = rng(104);
  const jobs = Array.from({ length: 64 }, () => {
    const n = randInt(r, 1, 3000);
    const x = randomF32(n, r);
    const a = Math.fround(r() * 4 - 2) || 1;
    const b = Math.fround(r() * 4 - 2) || 1;
    return { n, x, a, b, hx: bufferWith(x), hy: bufferWith(randomF32(n, r)) };
  });
  runBatch(() => {
    for (const j of jobs) {
      rt.recordDispatch(pipeline("axpb"), [j.hx, j.hy], [groupsFor(j.n)], push([["u", j.n], ["f", j.a], ["f", j.b]]));
    }
  });
  for (const [i, j] of jobs.entries()) {
    assertArrayEqual(readF32(j.hy), axpbReference(j.x, j.a, j.b), `job ${i}`);
    rt.destroyBuffer(j.hx);
    rt.destroyBuffer(j.hy);
  }
});

test("recordDispatchMany gives the same results as recordDispatch for mixed kernels", () => {
  const r = rng(105);
  const n = 777;
  const x = randomF32(n, r);
  const u = randomU32(n, r);
  const make = () => ({ hx: bufferWith(x), hy: bufferWith(randomF32(n, r)), hu: bufferWith(u), hv: bufferWith(randomU32(n, r)), hw: bufferWith(randomU32(4 * 6, r)) });
  const one = make();
  const many = make();
  const pc = (a: number, b: number) => new Uint32Array(push([["u", n], ["f", a], ["f", b]]).buffer);
  const entries = (h: ReturnType<typeof make>) => [
    { pipeline: pipeline("axpb"), buffers: [h.hx, h.hy], groups: [groupsFor(n)] as [number], push: pc(1.5, -0.25) },
    { pipeline: pipeline("inc"), buffers: [h.hu], groups: [groupsFor(n)] as [number], push: Uint32Array.of(n) },
    { pipeline: pipeline("copy"), buffers: [h.hu, h.hv], groups: [groupsFor(n)] as [number], push: Uint32Array.of(n) },
    { pipeline: pipeline("wgid"), buffers: [h.hw], groups: [2, 3, 1] as [number, number, number] },
    { pipeline: pipeline("inc"), buffers: [h.hu], groups: [groupsFor(n)] as [number], push: Uint32Array.of(n) },
  ];
  runBatch(() => {
    for (const e of entries(one)) rt.recordDispatch(e.pipeline, e.buffers, e.groups, e.push);
  });
  runBatch(() => {
    const list = entries(many);
    rt.recordDispatchMany(packDispatches(list), list.length);
  });
  for (const key of ["hy", "hu", "hv", "hw"] as const) {
    assertArrayEqual(readU32(many[key]), readU32(one[key]), `buffer ${key}`);
  }
  assertArrayEqual(readF32(many.hy), axpbReference(x, 1.5, -0.25), "axpb via recordDispatchMany");
  assertArrayEqual(readU32(many.hu), u.map((v) => (v + 2) >>> 0), "inc twice via recordDispatchMany");
  assertArrayEqual(readU32(many.hv), u.map((v) => (v + 1) >>> 0), "copy between the incs");
});

test("recordDispatchMany may be called several times in one batch and mixed with recordDispatch", () => {
  const r = rng(106);
  const n = 129;
  const u = randomU32(n, r);
  const h = bufferWith(u);
  const incOnce = { pipeline: pipeline("inc"), buffers: [h], groups: [groupsFor(n)] as [number], push: Uint32Array.of(n) };
  runBatch(() => {
    rt.recordDispatchMany(packDispatches([incOnce, incOnce, incOnce]), 3);
    rt.recordDispatch(pipeline("inc"), [h], [groupsFor(n)], push([["u", n]]));
    rt.recordDispatchMany(packDispatches([incOnce]), 1);
  });
  assertArrayEqual(readU32(h), u.map((v) => (v + 5) >>> 0), "5 incs");
  rt.destroyBuffer(h);
});
