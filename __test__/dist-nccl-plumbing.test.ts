// The NCCL transport's TypeScript side on lavapipe, one rank, with a stand-in for the CUDA half:
// buckets are real shared buffers (exported Vulkan memory), each collective is handed the bucket
// after the backend submitted the writes it reads, later reads of the bucket wait for the
// collective's completion on the external timeline (signalled here by the stand-in, as CUDA
// would), and tensors that are not buckets go through the staging buffer and come back.
import { test, after } from "node:test";
import assert from "node:assert/strict";
import { native as n } from "../ts/native.js";
import { HeliosBackend } from "../ts/backend.js";
import { initDistributed } from "../ts/distributed/group.js";
import { registerTransport } from "../ts/distributed/transport.js";
import { NcclTransport, type NcclNative } from "../ts/distributed/nccl.js";
import { DataParallel } from "../ts/distributed/ddp.js";

const info = n.initDevice({ validation: true, shareable: true });
after(() => {
  assert.deepEqual(n.takeValidationMessages(), []);
  n.destroy();
});

/** What the stand-in saw: [call, handle, count, dtype, op or root, compute value submitted before]. */
const calls: (string | number)[][] = [];
let external = 0;
const fake: NcclNative = {
  distUniqueId: () => new Uint8Array(128),
  distInit: () => {},
  distSharedBuffer: (bytes) => n.createSharedBuffer(bytes),
  distAllReduce: (h, off, count, dt, op) => {
    calls.push(["allReduce", h, count, dt, op, n.getCompleted()]);
    n.orderAfterExternal(h, ++external);
    return external;
  },
  distBroadcast: (h, off, count, dt, root) => {
    calls.push(["broadcast", h, count, dt, root]);
    n.orderAfterExternal(h, ++external);
    return external;
  },
  distSynchronize: () => n.signalExternal(external),
  distAbort: () => {},
  distDestroy: () => {},
  destroyBuffer: (h) => n.destroyBuffer(h),
};
registerTransport("nccl-standin", (ctx) => new NcclTransport(ctx, fake));

test("buckets, ordering and staging through the NCCL transport (CUDA half stood in)", { skip: !info.shareable && "the driver lacks VK_KHR_external_memory_fd" }, () => {
  const pg = initDistributed({ transport: "nccl-standin", env: { WORLD_SIZE: "1", RANK: "0" }, exitAfterAbortMs: 0 });
  const B = new HeliosBackend();
  const specs = [{ name: "w", shape: [4, 8] }, { name: "b", shape: [8] }];
  const ddp = new DataParallel(pg, B, specs, { bucketBytes: 1 << 20 });
  const w = B.fromArray(Float32Array.from({ length: 32 }, (_, i) => i), [4, 8]);
  const b = B.fromArray(Float32Array.from({ length: 8 }, (_, i) => -i - 1), [8]);
  ddp.grad("b", b);
  ddp.grad("w", w);
  assert.equal(calls.length, 1, "the bucket went out as its last gradient arrived");
  const [call, , count, dt, op, completedBefore] = calls[0];
  assert.deepEqual([call, count, dt, op], ["allReduce", 40, "f32", "avg"]);
  assert.equal(typeof completedBefore, "number");
  n.signalExternal(external); // the collective completes
  const g = ddp.reduced();
  assert.deepEqual(Array.from(g.get("b")!.data as Float32Array), [-1, -2, -3, -4, -5, -6, -7, -8]);
  assert.equal((g.get("w")!.data as Float32Array)[31], 31);
  // a tensor that is not a bucket: through the staging buffer and back
  const loss = B.fromArray([2.5], [1]);
  pg.allReduce([loss], "sum");
  n.signalExternal(external);
  assert.deepEqual(Array.from(loss.data as Float32Array), [2.5]);
  assert.equal(calls.at(-1)![0], "allReduce");
  const params = new Map([["w", B.zeros([4, 8])], ["b", B.zeros([8])]]);
  ddp.broadcastParams(params);
  n.signalExternal(external);
  assert.equal(calls.at(-1)![0], "broadcast");
  assert.equal((params.get("b")!.data as Float32Array).length, 8);
  ddp.destroy();
  pg.destroy();
});
