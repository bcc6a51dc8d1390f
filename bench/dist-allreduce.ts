// All-reduce bus bandwidth of Helios's NCCL transport, run under `helios launch --gpus=N`:
// a shared f32 buffer of --bytes (Vulkan memory imported into CUDA) reduced in place --iters
// times back to back, one host synchronize per round (as nccl-tests and bench/torch_ddp.py time
// it); bus bandwidth = 2 (N - 1) / N x bytes / time. Rank 0 writes --out.
import { writeFileSync } from "node:fs";
import { HeliosBackend } from "../ts/backend.js";
import { initDistributed } from "../ts/distributed/group.js";
import { parseArgs } from "node:util";

const { values: a } = parseArgs({
  options: { bytes: { type: "string", default: String(1 << 30) }, iters: { type: "string", default: "20" }, out: { type: "string" } },
});
const bytes = Number(a.bytes), iters = Number(a.iters);
const pg = initDistributed();
const B = new HeliosBackend();
pg.bind(B);
const t = pg.link.allocBucket!(bytes / 4)!;
for (let i = 0; i < 5; i++) pg.allReduce([t], "sum");
pg.link.synchronize();
const rounds: number[] = [];
for (let r = 0; r < 3; r++) {
  const t0 = performance.now();
  for (let i = 0; i < iters; i++) pg.allReduce([t], "sum");
  pg.link.synchronize();
  rounds.push((performance.now() - t0) / iters);
}
rounds.sort((x, y) => x - y);
const ms = rounds[1];
const world = pg.worldSize;
const result = { world, bytes, median_ms: ms, bus_gbps: world > 1 ? (2 * (world - 1) / world) * bytes / (ms / 1000) / 1e9 : null, device: B.getDeviceInfo().deviceName };
if (pg.rank === 0) {
  console.log(JSON.stringify(result));
  if (a.out) writeFileSync(a.out, JSON.stringify(result));
}
B.releaseGpuTensor(t);
pg.destroy();
