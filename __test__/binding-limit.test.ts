// A storage buffer over the binding limit is refused with ERR_HELIOS_OUT_OF_RANGE, never bound
// (drivers drop over-limit bindings silently: on the H100 every access read 0). The limit is
// lowered to 4 KiB with HELIOS_MAX_BINDING_BYTES, read at initDevice, so small buffers reach it.
import assert from "node:assert/strict";
import { test } from "node:test";
import { assertThrowsCode, bufferWith, packDispatches, pipeline, randomU32, readU32, rng, rt, useDevice } from "./helpers.js";
import { push } from "./kernels/index.js";

process.env.HELIOS_MAX_BINDING_BYTES = "4096";
const info = useDevice();
const incPush = (n: number) => push([["u", n]]);

test("DeviceInfo reports the device limits and the effective binding limit", () => {
  assert.equal(info.maxBindingBytes, 4096);
  assert.ok(info.maxStorageBufferRange >= 4096, `maxStorageBufferRange ${info.maxStorageBufferRange}`);
  assert.ok(info.maxBufferSize >= info.maxBindingBytes, `maxBufferSize ${info.maxBufferSize}`);
});

test("a dispatch binding a buffer over the limit is OUT_OF_RANGE and records nothing", () => {
  const ok = bufferWith(randomU32(1024, rng(1))); // exactly 4096 bytes: allowed
  const u = randomU32(1025, rng(2));
  const big = bufferWith(u); // 4100 bytes
  const lease = rt.leaseBuffer(8192);
  rt.beginBatch();
  rt.recordDispatch(pipeline("inc"), [ok], [16], incPush(1024));
  assertThrowsCode(() => rt.recordDispatch(pipeline("inc"), [big], [1], incPush(64)), "ERR_HELIOS_OUT_OF_RANGE", { call: "recordDispatch", mentions: 4100 });
  assertThrowsCode(() => rt.recordDispatch(pipeline("inc"), [lease], [1], incPush(64)), "ERR_HELIOS_OUT_OF_RANGE", { call: "recordDispatch", mentions: "binding 0" });
  const packed = packDispatches([{ pipeline: pipeline("inc"), buffers: [ok], groups: [16], push: new Uint32Array([1024]) }, { pipeline: pipeline("inc"), buffers: [big], groups: [1], push: new Uint32Array([64]) }]);
  assertThrowsCode(() => rt.recordDispatchMany(packed, 2), "ERR_HELIOS_OUT_OF_RANGE", { call: "recordDispatchMany", mentions: 4096 });
  rt.waitTimeline(rt.submitBatch());
  // The batch survived: the one accepted dispatch ran once; the refused ones touched nothing.
  assert.deepEqual([...readU32(big)], [...u]);
  assert.equal(readU32(ok).length, 1024);
  rt.releaseBuffer(lease);
  for (const h of [ok, big]) rt.destroyBuffer(h);
});
