// Sizes past 2^31 and 2^32 bytes (issue 24, item 1): every byte and element count is plain
// 64-bit-safe arithmetic, and what the device cannot hold is refused with ERR_HELIOS_OUT_OF_RANGE
// naming the call and the size before anything is allocated. Real allocations stay small where
// the device allows it (a 2^31-byte lease touched only near its end); larger ones are refused.
import { test } from "node:test";
import assert from "node:assert/strict";
import { makeBackend, onNative, testRuntime } from "./backend-helpers.js";
import { BufferPool } from "../ts/exec/lease.js";
import type { Runtime } from "../ts/exec/runtime.js";
import { elementCount } from "../ts/shape.js";
import { tensorBytes } from "../ts/limits.js";
import { checkU32, packPush } from "../ts/kernels/common.js";
import { packPush as packMatmulPush, type PushValues } from "../ts/kernels/matmul/common.js";

const RANGE = "ERR_HELIOS_OUT_OF_RANGE";

/** A runtime that only records the sizes leased: the pool's arithmetic without the memory. */
function sizeRecorder(maxBufferSize?: number): { rt: Runtime; leased: number[] } {
  const leased: number[] = [];
  const rt = {
    getDeviceInfo: () => (maxBufferSize === undefined ? {} : { maxBufferSize }),
    leaseBuffer: (bytes: number) => leased.push(bytes),
    releaseBuffer: () => {},
  } as unknown as Runtime;
  return { rt, leased };
}

/** Round up to whole 4-byte words, computed in BigInt as the reference. */
function words(bytes: number): number {
  return Number(((BigInt(bytes) + 3n) / 4n) * 4n);
}

test("the pool leases the byte length rounded up to 4 at and past 2^31 and 2^32 bytes", () => {
  const { rt, leased } = sizeRecorder(2 ** 50);
  const pool = new BufferPool(rt);
  const sizes = [1, 5, 2 ** 31 - 1, 2 ** 31, 2 ** 31 + 1, 2 ** 32 - 1, 2 ** 32, 2 ** 32 + 1, 2 ** 32 + 6, 3 * 2 ** 40 + 3];
  for (const s of sizes) pool.lease(s);
  assert.deepEqual(leased, sizes.map((s) => Math.max(4, words(s))));
  assert.ok(leased.every((b, i) => b >= sizes[i]), "a lease is never smaller than asked");
});

test("the pool refuses sizes that are not whole bytes or that the device cannot hold, before leasing", () => {
  const max = 2 ** 32 - 1;
  const { rt, leased } = sizeRecorder(max);
  const pool = new BufferPool(rt);
  assert.equal(pool.maxBytes, 2 ** 32 - 4, "maxBufferSize rounded down to whole words, as the runtime checks");
  pool.lease(2 ** 32 - 4, "t");
  for (const bad of [2 ** 32 - 3, 2 ** 32, 2 ** 40, Number.MAX_SAFE_INTEGER]) {
    assert.throws(() => pool.lease(bad, "zeros"), (e: Error & { code?: string }) =>
      e.code === RANGE && e.message.startsWith("zeros:") && e.message.includes(String(bad)));
  }
  for (const bad of [-4, 1.5, NaN, Infinity, 2 ** 53]) {
    assert.throws(() => pool.lease(bad, "ones"), { code: RANGE });
  }
  assert.deepEqual(leased, [2 ** 32 - 4], "nothing refused reached the runtime");
});

test("element counts past 2^53 - 1 and tensors past the largest buffer are refused, naming the op", () => {
  assert.equal(elementCount("x", [2 ** 20, 2 ** 20, 2 ** 12]), 2 ** 52);
  assert.throws(() => elementCount("reshape", [2 ** 30, 2 ** 30, 2 ** 30]), { code: RANGE, message: /^reshape: .*2\^53/ });
  const max = 2 ** 32 - 4;
  assert.equal(tensorBytes("zeros", [2 ** 29], "f32", max), 2 ** 31);
  assert.equal(tensorBytes("zeros", [2 ** 31 - 2], "f16", max), 2 ** 32 - 4);
  assert.throws(() => tensorBytes("zeros", [2 ** 30], "f32", max), { code: RANGE, message: /^zeros: .*4294967296 bytes/ });
  assert.throws(() => tensorBytes("zeros", [1e6, 1e6], "f32", max), { code: RANGE, message: /^zeros: .*\[1000000, 1000000\].*4000000000000 bytes/ });
});

test("u32 push constants are refused, not wrapped, past 2^32 - 1", () => {
  assert.equal(checkU32("n", 2 ** 32 - 1), 2 ** 32 - 1);
  for (const bad of [2 ** 32, 2 ** 32 + 1, -1, 0.5]) assert.throws(() => checkU32("n", bad), { code: RANGE });
  assert.deepEqual([...packPush({ n: "u32" }, { n: 2 ** 32 - 1 })], [2 ** 32 - 1]);
  assert.throws(() => packPush({ n: "u32" }, { n: 2 ** 32 + 5 }), { code: RANGE, message: /'n' = 4294967301/ });
  const pv: PushValues = { m: 65536, n: 65536, k: 64, kChunk: 64, strideA: 65536 * 64, strideB: 0, strideC: 65536 * 65536, splits: 1, batch: 2, scale: 1 };
  assert.throws(() => packMatmulPush(pv), { code: RANGE, message: /strideC/ });
  const ok = new Uint32Array(packMatmulPush({ ...pv, strideC: 2 ** 32 - 1 }));
  assert.equal(ok[6], 2 ** 32 - 1);
});

test("issue 24 reproducers: zeros([1e6, 1e6]) and a broadcast to it are refused before allocating", (t) => {
  if (!onNative()) return t.skip("the mock has no device limits (it would allocate the host memory)");
  const B = makeBackend();
  const before = testRuntime().poolStats().allocations;
  assert.throws(() => B.zeros([1e6, 1e6]), { code: RANGE, message: /^zeros: .*4000000000000 bytes/ });
  assert.throws(() => B.ones([2 ** 30, 2 ** 30, 2 ** 30]), { code: RANGE, message: /^ones: / });
  const col = B.zeros([1e6, 1]);
  const row = B.zeros([1, 1e6]);
  assert.throws(() => B.add(col, row), { code: RANGE, message: /^add: .*\[1000000, 1000000\]/ });
  assert.equal(testRuntime().poolStats().allocations - before, 2, "only the two 4 MB operands were allocated");
  B.releaseGpuTensor(col);
  B.releaseGpuTensor(row);
});

test("issue 24 reproducer: sum(full([2^29], 1)) is 2^29 or a coded refusal, never a tiny buffer", (t) => {
  if (!onNative()) return t.skip("needs a real device's limits");
  const B = makeBackend();
  const info = testRuntime().getDeviceInfo() as unknown as { maxBufferSize: number; maxBindingBytes: number };
  const rt = testRuntime();
  for (const n of [2 ** 29, 2 ** 30 + 1]) {
    const bytes = n * 4;
    const leasedBefore = rt.poolStats().leasedBytes;
    if (bytes > info.maxBufferSize) {
      const allocations = rt.poolStats().allocations;
      assert.throws(() => B.full([n], 1), { code: RANGE, message: new RegExp(`^full: .*${bytes} bytes`) });
      assert.equal(rt.poolStats().allocations, allocations, `full([${n}]) allocated before refusing`);
      continue;
    }
    let x;
    try {
      x = B.full([n], 1);
    } catch (e) {
      // Creatable by the limits but not by this device's memory (lavapipe: 2 GiB per allocation).
      assert.equal((e as { code?: string }).code, "ERR_HELIOS_OUT_OF_MEMORY", String(e));
      continue;
    }
    assert.ok(rt.poolStats().leasedBytes - leasedBefore >= bytes, `a ${bytes}-byte tensor got a smaller buffer`);
    if (bytes > info.maxBindingBytes) {
      assert.throws(() => B.sum(x), { code: RANGE, message: new RegExp(`binding 0 is a ${bytes}-byte buffer.*${info.maxBindingBytes}`) });
    } else {
      assert.equal(Number(B.sum(x).data[0]), n);
    }
    B.releaseGpuTensor(x);
  }
  assert.equal(Number(B.sum(B.full([1000], 1)).data[0]), 1000, "the backend still works after the refusals");
  B.purgeBufferPools();
});

test("byte offsets past 2^31 reach the right bytes; buffers past maxBufferSize are refused", (t) => {
  if (!onNative()) return t.skip("native runtime only");
  const rt = testRuntime() as Runtime & { createBuffer(n: number): number; destroyBuffer(h: number): void; trimPool(): void };
  const max = (rt.getDeviceInfo() as unknown as { maxBufferSize: number }).maxBufferSize;
  const allocations = rt.poolStats().allocations;
  for (const call of ["leaseBuffer", "createBuffer"] as const) {
    const over = Math.floor(max / 4) * 4 + 4;
    assert.throws(() => (rt[call] as (n: number) => number)(over), { code: RANGE, message: new RegExp(`^${call}: .*${over}`) });
  }
  assert.equal(rt.poolStats().allocations, allocations, "a refused size allocated nothing");
  // Memory is touched only near the end, so the 2 GiB (and larger) leases cost no more than a page.
  for (const bytes of [2 ** 31, 2 ** 31 + 64, 2 ** 32 + 64]) {
    if (bytes > max) continue;
    let h: number;
    try {
      h = rt.leaseBuffer(bytes);
    } catch (e) {
      assert.equal((e as { code?: string }).code, "ERR_HELIOS_OUT_OF_MEMORY", String(e)); // lavapipe past 2 GiB
      continue;
    }
    const at = bytes - 32;
    const data = Uint32Array.from({ length: 8 }, (_, i) => (at + i * 2654435761) >>> 0);
    rt.uploadBuffer(h, data, at);
    rt.fillBuffer(h, 0xa5a5a5a5, at + 8, 8);
    const expect = data.slice();
    expect.fill(0xa5a5a5a5, 2, 4);
    assert.deepEqual(new Uint32Array(rt.readBuffer(h, at, 32)), expect, `bytes ${at}.. of a ${bytes}-byte buffer`);
    assert.throws(() => rt.readBuffer(h, bytes - 4, 8), { code: RANGE });
    rt.releaseBuffer(h);
  }
  rt.trimPool();
});
