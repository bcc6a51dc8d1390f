// The native half of the distributed layer that runs without a GPU: buffers shared through
// VK_KHR_external_memory_fd, compute work ordered after the external timeline (what CUDA signals
// after a collective; here the host signals it), coded errors where CUDA or NCCL are missing, and
// single-device use loading neither. Validation on: any message fails.
import { test, after } from "node:test";
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { native as n } from "../ts/native.js";
import { HeliosBackend } from "../ts/backend.js";
import { initDistributed } from "../ts/distributed/group.js";

const info = n.initDevice({ validation: true, shareable: true });
after(() => {
  assert.deepEqual(n.takeValidationMessages(), []);
  n.destroy();
});

const code = (c: string, re: RegExp) => (e: Error & { code?: string }) => e.code === c && re.test(e.message);

test("single-device use never loads the CUDA driver or NCCL (checked before anything here asks for them)", () => {
  const B = new HeliosBackend();
  const y = B.matmul(B.randn([8, 8]), B.randn([8, 8]));
  assert.equal(y.data.length, 64);
  const maps = readFileSync("/proc/self/maps", "utf8");
  assert.ok(!/libcuda\.so|libnccl\.so/.test(maps), "libcuda/libnccl mapped");
});

test("a shared buffer's readers wait for the external timeline; the host signal releases them", { skip: !info.shareable && "the driver lacks VK_KHR_external_memory_fd" }, () => {
  const shared = n.createSharedBuffer(1024);
  const out = n.createBuffer(1024);
  n.uploadBuffer(shared, new Float32Array(256).fill(3));
  n.orderAfterExternal(shared, 1);
  n.beginBatch();
  n.copyBuffer(shared, out, 0, 0, 1024);
  const v = n.submitBatch();
  assert.throws(() => n.waitTimeline(v, 200), code("ERR_HELIOS_TIMEOUT", /./), "the copy waits for the collective");
  n.signalExternal(1);
  n.waitTimeline(v, 10_000);
  assert.equal(new Float32Array(n.readBuffer(out))[255], 3);
  // a value already reached adds no wait; work not using the buffer never waited
  n.orderAfterExternal(shared, 1);
  n.beginBatch();
  n.copyBuffer(shared, out, 0, 512, 512);
  n.waitTimeline(n.submitBatch(), 10_000);
  n.destroyBuffer(shared);
  n.destroyBuffer(out);
  assert.deepEqual(n.takeValidationMessages(), []);
});

test("NCCL and the CUDA driver: a missing library is ERR_HELIOS_DIST_UNAVAILABLE naming what was tried", () => {
  const saved = process.env.HELIOS_NCCL_LIB;
  process.env.HELIOS_NCCL_LIB = "/nonexistent/libnccl.so.2";
  try {
    assert.throws(() => n.distUniqueId(), code("ERR_HELIOS_DIST_UNAVAILABLE", /HELIOS_NCCL_LIB=\/nonexistent\/libnccl.so.2/));
  } finally {
    if (saved === undefined) delete process.env.HELIOS_NCCL_LIB;
    else process.env.HELIOS_NCCL_LIB = saved;
  }
  let cuda = true;
  try {
    n.distDeviceUuid(0);
  } catch (e) {
    cuda = (e as { code?: string }).code !== "ERR_HELIOS_DIST_UNAVAILABLE" || !/libcuda\.so\.1/.test((e as Error).message);
  }
  if (!cuda) {
    assert.throws(() => initDistributed({ env: { WORLD_SIZE: "1", RANK: "0" }, exitAfterAbortMs: 0 }), code("ERR_HELIOS_DIST_UNAVAILABLE", /CUDA driver \(libcuda\.so\.1\)/));
  }
  assert.throws(() => n.distAllReduce(1, 0, 4, "f64" as "f32", "sum"), code("ERR_HELIOS_INVALID_ARGUMENT", /dtype "f64"/));
  assert.throws(() => n.distAllReduce(1, 0, 4, "f32", "mean" as "sum"), code("ERR_HELIOS_INVALID_ARGUMENT", /op "mean"/));
  assert.throws(() => n.distSynchronize(), code("ERR_HELIOS_INVALID_ARGUMENT", /no communicator/));
});
