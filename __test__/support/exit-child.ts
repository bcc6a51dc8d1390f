// One process of the exit storm (exit-storm.ts): puts GPU work in flight (submitted batches, an
// open batch, pending async reads and waits, a worker_thread with a device of its own in `worker`
// mode) and exits without destroy() in the way argv[2] names. The runtime's exit hooks must drain
// the queue: a crash, a hang or a lost pipeline cache is a failure.
import { Worker } from "node:worker_threads";
import { native } from "../../ts/native.js";
import { KERNELS } from "../kernels/index.js";

export type ExitMode = "normal" | "exit" | "throw" | "worker";

function inFlight(n: number): void {
  const slow = native.createPipeline(KERNELS.slow.spirv, KERNELS.slow.layout);
  const bufs = [0, 1, 2].map((b) => {
    const h = native.createBuffer(4 * n);
    native.uploadBuffer(h, new Uint32Array(n).fill(b + 1));
    native.beginBatch();
    native.recordDispatch(slow, [h], [Math.ceil(n / 64)], Uint32Array.of(n, 4000));
    native.submitBatch();
    return h;
  });
  native.readBufferAsync(bufs[1]).catch(() => {});
  native.beginBatch();
  native.recordDispatch(slow, [bufs[0]], [Math.ceil(n / 64)], Uint32Array.of(n, 4000));
  native.waitTimelineAsync(native.submitBatch()).catch(() => {});
  native.beginBatch(); // left open
  native.recordDispatch(slow, [bufs[2]], [Math.ceil(n / 64)], Uint32Array.of(n, 4000));
}

const mode = process.argv[2] as ExitMode | "worker-body";
const n = Number(process.argv[3] ?? 4096);
native.initDevice();
if (mode === "worker") {
  // The worker owns the device from here: the main thread gives it up first.
  native.destroy();
  const w = new Worker(new URL(import.meta.url), { argv: ["worker-body", String(n)] });
  w.on("message", () => process.exit(0)); // the worker has work in flight: exit under it
} else if (mode === "worker-body") {
  inFlight(n);
  const { parentPort } = await import("node:worker_threads");
  parentPort?.postMessage("busy");
} else {
  inFlight(n);
  if (mode === "exit") process.exit(0);
  if (mode === "throw") throw new Error("exit-child: an uncaught error with work in flight");
}
