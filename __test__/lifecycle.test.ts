// Device lifecycle: DeviceInfo, idempotent init, destroy and re-init, DESTROYED after
// destroy, NO_DEVICE for a device that does not exist, and a 100,000-buffer
// create/destroy loop that must hold steady (the upstream died of "Max buffers reached").
import assert from "node:assert/strict";
import { test } from "node:test";
import {
  assertArrayEqual, assertRejectsCode, assertThrowsCode, bufferWith, forgetPipelines, groupsFor, inChild, packDispatches, pipeline,
  randomU32, readU32, recordSlow, rng, rt, runBatch, slowShapeFor, useDevice,
} from "./helpers.js";
import { push } from "./kernels/index.js";

const info = useDevice();
const DESTROYED = "ERR_HELIOS_DESTROYED";

function reinit(): void {
  forgetPipelines();
  rt.initDevice({ validation: true });
}

test("DeviceInfo describes a Vulkan 1.3 device with sane limits", () => {
  assert.equal(typeof info.deviceName, "string");
  assert.ok(info.deviceName.length > 0);
  assert.equal(typeof info.vendorId, "number");
  assert.ok(["discrete", "integrated", "virtual", "cpu", "other"].some((t) => String(info.deviceType).toLowerCase().includes(t)), `deviceType ${info.deviceType}`);
  assert.ok(typeof info.driverName === "string" && info.driverName.length > 0);
  assert.ok(/^1\.(3|[4-9])/.test(String(info.apiVersion)) || Number(info.apiVersion) >= ((1 << 22) | (3 << 12)), `apiVersion ${info.apiVersion}`);
  for (const key of ["f16Supported", "bf16Supported", "coopMatSupported", "coopMat2Supported", "hasAsyncTransfer", "hasPushDescriptors", "hasBDA"] as const) {
    assert.equal(typeof info[key], "boolean", key);
  }
  assert.ok(Array.isArray(info.coopMatShapes));
  if (info.coopMatSupported) {
    assert.ok(info.coopMatShapes.length > 0 && info.coopMatM > 0 && info.coopMatN > 0 && info.coopMatK > 0);
  }
  assert.ok(info.subgroupSize > 0 && (info.subgroupSize & (info.subgroupSize - 1)) === 0, `subgroupSize ${info.subgroupSize}`);
  const maxWg = Array.isArray(info.maxWorkgroupSize) ? Math.max(...info.maxWorkgroupSize) : info.maxWorkgroupSize;
  assert.ok(maxWg >= 64, `maxWorkgroupSize ${info.maxWorkgroupSize}`);
  assert.ok(info.maxSharedMemoryBytes >= 16384, `maxSharedMemoryBytes ${info.maxSharedMemoryBytes}`);
  assert.ok(info.timestampPeriodNs > 0);
  assert.deepEqual(rt.getDeviceInfo(), info);
});

test("initDevice is idempotent: existing handles stay valid", () => {
  const u = randomU32(100, rng(701));
  const h = bufferWith(u);
  const again = rt.initDevice({ validation: true });
  assert.equal(again.deviceName, info.deviceName);
  assertArrayEqual(readU32(h), u, "buffer across a repeated initDevice");
  runBatch(() => rt.recordDispatch(pipeline("inc"), [h], [groupsFor(100)], push([["u", 100]])));
  assertArrayEqual(readU32(h), u.map((v) => v + 1), "dispatch across a repeated initDevice");
  rt.destroyBuffer(h);
});

test("100,000 create/destroy cycles hold steady (handles, memory, stale detection)", () => {
  const r = rng(702);
  const probe = randomU32(64, r);
  const sampleDead: number[] = [];
  const seen = new Set<number>();
  let lastValue = 0;
  let rssAfterWarmup = 0;
  for (let i = 0; i < 100_000; i++) {
    const bytes = 4 * (1 + (i % 1024));
    const h = rt.createBuffer(bytes);
    if (i % 1000 === 0) {
      // Now and then the buffer is in flight when destroyed: it must be freed later, safely.
      rt.uploadBuffer(h, probe.subarray(0, Math.min(64, bytes / 4)));
      rt.beginBatch();
      rt.recordDispatch(pipeline("inc"), [h], [1], push([["u", bytes / 4]]));
      lastValue = rt.submitBatch();
    }
    rt.destroyBuffer(h);
    if (i % 997 === 0) sampleDead.push(h);
    if (i % 10 === 0) {
      assert.ok(!seen.has(h), `handle ${h} handed out twice`);
      seen.add(h);
    }
    if (i === 10_000) rssAfterWarmup = process.memoryUsage().rss;
  }
  rt.waitTimeline(lastValue);
  const growth = process.memoryUsage().rss - rssAfterWarmup;
  assert.ok(growth < 64 * 1024 * 1024, `RSS grew by ${(growth / 2 ** 20).toFixed(1)} MiB over 90,000 cycles`);
  for (const h of sampleDead) {
    assert.ok(Number.isSafeInteger(h) && h > 0, `handle ${h}`);
    assertThrowsCode(() => rt.readBuffer(h), "ERR_HELIOS_INVALID_HANDLE", { call: "readBuffer" });
  }
  const u = randomU32(256, r);
  const h = bufferWith(u);
  assertArrayEqual(readU32(h), u, "a buffer after the loop");
  rt.destroyBuffer(h);
});

test("destroy() with work in flight waits, then every call is DESTROYED until initDevice", async () => {
  const shape = slowShapeFor(200);
  const h = bufferWith(randomU32(shape.n, rng(703)));
  rt.beginBatch();
  recordSlow(h, shape);
  const v = rt.submitBatch();
  const pending = rt.readBufferAsync(h);
  rt.beginBatch(); // an open, unsubmitted batch is discarded
  rt.recordDispatch(pipeline("inc"), [h], [1], push([["u", 64]]));
  rt.destroy();
  rt.destroy(); // idempotent
  forgetPipelines();
  try {
    await pending; // may complete before the device goes away
  } catch (err) {
    assert.equal((err as { code?: string }).code, DESTROYED, String(err));
  }
  assertThrowsCode(() => rt.getDeviceInfo(), DESTROYED, { call: "getDeviceInfo" });
  assertThrowsCode(() => rt.createBuffer(64), DESTROYED, { call: "createBuffer" });
  assertThrowsCode(() => rt.readBuffer(h), DESTROYED, { call: "readBuffer" });
  assertThrowsCode(() => rt.uploadBuffer(h, new Uint32Array(1)), DESTROYED, { call: "uploadBuffer" });
  assertThrowsCode(() => rt.leaseBuffer(64), DESTROYED, { call: "leaseBuffer" });
  assertThrowsCode(() => rt.poolStats(), DESTROYED, { call: "poolStats" });
  assertThrowsCode(() => rt.beginBatch(), DESTROYED, { call: "beginBatch" });
  assertThrowsCode(() => rt.submitBatch(), DESTROYED, { call: "submitBatch" });
  assertThrowsCode(() => rt.waitTimeline(v), DESTROYED, { call: "waitTimeline" });
  assertThrowsCode(() => rt.getCompleted(), DESTROYED, { call: "getCompleted" });
  assertThrowsCode(() => rt.createPipeline(new Uint32Array(8), { bindings: [] }), DESTROYED, { call: "createPipeline" });
  await assertRejectsCode(async () => rt.readBufferAsync(h), DESTROYED);
  await assertRejectsCode(async () => rt.waitTimelineAsync(v), DESTROYED);
  reinit();
});

test("after re-init the device works and handles from before are invalid", () => {
  const u = randomU32(100, rng(704));
  const old = bufferWith(u);
  const oldPipe = pipeline("inc");
  rt.destroy();
  reinit();
  assertThrowsCode(() => rt.readBuffer(old), "ERR_HELIOS_INVALID_HANDLE", { call: "readBuffer" });
  rt.beginBatch();
  const h = bufferWith(u);
  assertThrowsCode(() => rt.recordDispatch(oldPipe, [h], [2], push([["u", 100]])), "ERR_HELIOS_INVALID_HANDLE", { call: "recordDispatch" });
  rt.recordDispatch(pipeline("inc"), [h], [2], push([["u", 100]]));
  rt.waitTimeline(rt.submitBatch());
  assertArrayEqual(readU32(h), u.map((v) => v + 1), "dispatch after re-init");
  rt.destroyBuffer(h);
});

test("a handle from before destroy() never aliases an object of the next device (issue 24 item 2)", () => {
  // Before handles carried a device epoch, every one of these reached the new device's first
  // buffer / pipeline / capture: reads returned its data, writes overwrote it.
  const u = randomU32(64, rng(705));
  const old = bufferWith(u);
  const oldLease = rt.leaseBuffer(256);
  const oldInc = pipeline("inc");
  rt.beginBatch();
  rt.recordDispatch(oldInc, [old], [1], push([["u", 64]]));
  const oldCapture = rt.captureBatch();
  rt.destroy();
  reinit();
  const v = randomU32(64, rng(706));
  const fresh = bufferWith(v);
  const freshLease = rt.leaseBuffer(256);
  const freshInc = pipeline("inc"); // the new device's first pipeline: the slot oldInc had
  rt.beginBatch();
  rt.recordDispatch(freshInc, [fresh], [1], push([["u", 0]])); // n = 0: leaves fresh as it is
  const freshCapture = rt.captureBatch();
  const stale = { code: "ERR_HELIOS_INVALID_HANDLE", mentions: "device instance" } as const;
  assertThrowsCode(() => rt.readBuffer(old), stale.code, { call: "readBuffer", mentions: stale.mentions, handle: old });
  assertThrowsCode(() => rt.uploadBuffer(old, new Uint32Array(64)), stale.code, { call: "uploadBuffer", mentions: stale.mentions });
  assertThrowsCode(() => rt.fillBuffer(old, 0), stale.code, { call: "fillBuffer" });
  assertThrowsCode(() => rt.copyBuffer(fresh, old, 0, 0, 4), stale.code, { call: "copyBuffer" });
  assertThrowsCode(() => rt.releaseBuffer(oldLease), stale.code, { call: "releaseBuffer", mentions: stale.mentions });
  assertThrowsCode(() => rt.destroyBuffer(old), stale.code, { call: "destroyBuffer" });
  assertThrowsCode(() => rt.destroyPipeline(oldInc), stale.code, { call: "destroyPipeline", mentions: stale.mentions });
  assertThrowsCode(() => rt.replayBatch(oldCapture), stale.code, { call: "replayBatch", mentions: stale.mentions });
  assertThrowsCode(() => rt.destroyCapture(oldCapture), stale.code, { call: "destroyCapture" });
  rt.beginBatch();
  assertThrowsCode(() => rt.recordDispatch(oldInc, [fresh], [1], push([["u", 64]])), stale.code, { call: "recordDispatch", mentions: "pipeline" });
  assertThrowsCode(() => rt.recordDispatch(pipeline("inc"), [old], [1], push([["u", 64]])), stale.code, { call: "recordDispatch", mentions: "buffer" });
  const packed = packDispatches([{ pipeline: pipeline("inc"), buffers: [old], groups: [1], push: new Uint32Array([64]) }]);
  assertThrowsCode(() => rt.recordDispatchMany(packed, 1), stale.code, { call: "recordDispatchMany", mentions: stale.mentions });
  rt.waitTimeline(rt.submitBatch());
  // the new device's objects are untouched and still work
  assertArrayEqual(readU32(fresh), v, "the new buffer after the stale calls");
  assert.equal(rt.poolStats().leasedBytes, 256, "the stale release must not release the new lease");
  rt.waitTimeline(rt.replayBatch(freshCapture));
  rt.destroyCapture(freshCapture);
  rt.releaseBuffer(freshLease);
  rt.destroyBuffer(fresh);
});

test("initDevice picks a device by index or name substring and refuses an unknown one", () => {
  rt.destroy();
  forgetPipelines();
  assertThrowsCode(() => rt.initDevice({ device: "no-such-gpu-xyz", validation: true }), "ERR_HELIOS_NO_DEVICE", {
    call: "initDevice",
    mentions: "no-such-gpu-xyz",
  });
  assertThrowsCode(() => rt.getDeviceInfo(), [DESTROYED, "ERR_HELIOS_NO_DEVICE"]);
  const byName = rt.initDevice({ device: info.deviceName.slice(0, 6), validation: true });
  assert.equal(byName.deviceName, info.deviceName);
  rt.destroy();
  const byIndex = rt.initDevice({ device: 0, validation: true });
  assert.equal(typeof byIndex.deviceName, "string");
  rt.destroy();
  assertThrowsCode(() => rt.initDevice({ device: 999, validation: true }), "ERR_HELIOS_NO_DEVICE", { call: "initDevice", mentions: 999 });
  reinit();
  assert.equal(rt.getDeviceInfo().deviceName, info.deviceName);
});

test("HELIOS_DEVICE naming no device gives NO_DEVICE, saying what was tried", () => {
  const byName = inChild("native.initDevice()", { HELIOS_DEVICE: "no-such-gpu-xyz" });
  assert.equal(byName.code, "ERR_HELIOS_NO_DEVICE", JSON.stringify(byName));
  assert.ok(byName.message?.includes("no-such-gpu-xyz"), byName.message);
  assert.ok(byName.message?.includes(info.deviceName), `the message should list the devices tried: ${byName.message}`);
  const byIndex = inChild("native.initDevice()", { HELIOS_DEVICE: "42" });
  assert.equal(byIndex.code, "ERR_HELIOS_NO_DEVICE", JSON.stringify(byIndex));
});

test("calls before initDevice are refused with a code, not a crash", () => {
  const res = inChild("native.createBuffer(64)", {});
  assert.ok(res.code === DESTROYED || res.code === "ERR_HELIOS_NO_DEVICE", JSON.stringify(res));
});

// A host without a validation layer (HELIOS_TEST_NO_LAYER=1, see helpers.ts) has nothing to turn on.
const noLayer = process.env.HELIOS_TEST_NO_LAYER === "1" ? "HELIOS_TEST_NO_LAYER=1: this host has no validation layer" : false;
test("HELIOS_VALIDATION=1 turns validation on; it is off by default", { skip: noLayer }, () => {
  const check = (want: boolean) => `
    const info = native.initDevice();
    if (info.validation !== ${want}) throw Object.assign(new Error("validation is " + info.validation), { code: "WRONG" });`;
  const on = inChild(check(true), { HELIOS_VALIDATION: "1" });
  assert.ok(on.ok, JSON.stringify(on));
  const off = inChild(check(false), { HELIOS_VALIDATION: "" });
  assert.ok(off.ok, JSON.stringify(off));
});
