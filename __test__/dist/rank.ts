// One rank of the multi-process tests (started by `helios launch` or with the variables set by
// the test): joins the job over the test transport and runs a scenario named by argv[2], printing
// one JSON line of results. Host tensors (no device) keep it fast; the training test uses
// HeliosBackend (train-rank.ts).
import { initDistributed } from "../../ts/distributed/group.js";
import type { TensorData } from "../../ts/types.js";
import "./host-transport.js";

/** A host tensor backend with just what collectives need. */
const hostBackend = {
  name: "host",
  zeros: (shape: number[]) => tensor(new Float32Array(shape.reduce((a, b) => a * b, 1)), shape),
  writeTensor(t: TensorData, d: ArrayLike<number>) {
    (t.data as Float32Array).set(d);
  },
};

function tensor(data: Float32Array, shape: number[]): TensorData {
  return { shape, dtype: "f32", data } as TensorData;
}

const scenario = process.argv[2] ?? "collectives";
const pg = initDistributed({ transport: "host", backend: hostBackend, exitAfterAbortMs: Number(process.env.TEST_EXIT_AFTER_MS ?? 3000) });
const r = pg.rank;

if (scenario === "collectives") {
  const a = tensor(Float32Array.from([r + 1, 10 * (r + 1), -r]), [3]);
  pg.allReduce([a], "sum");
  const m = tensor(Float32Array.from([r, -r]), [2]);
  pg.allReduce([m], "max");
  const v = tensor(Float32Array.from([2 * r]), [1]);
  pg.allReduce([v], "avg");
  const b = tensor(Float32Array.from([r === 1 ? 7 : 0, r === 1 ? 8 : 0]), [2]);
  pg.broadcast([b], 1);
  pg.barrier();
  const nums = pg.allGatherNumbers("loss", [r * 0.5]);
  console.log(JSON.stringify({ rank: r, world: pg.worldSize, sum: [...(a.data as Float32Array)], max: [...(m.data as Float32Array)], avg: [...(v.data as Float32Array)], bcast: [...(b.data as Float32Array)], nums }));
  pg.destroy();
} else if (scenario === "die") {
  // rank 1 dies between two collectives; the others must fail their next call with a clear error
  pg.barrier();
  if (r === 1) process.exit(3);
  const t0 = Date.now();
  try {
    pg.allReduce([tensor(new Float32Array(4), [4])], "sum");
    console.log(JSON.stringify({ rank: r, error: null }));
  } catch (e) {
    console.log(JSON.stringify({ rank: r, code: (e as { code?: string }).code, error: (e as Error).message, ms: Date.now() - t0 }));
    process.exit(1);
  }
} else if (scenario === "busy-die") {
  // rank 1 dies while rank 0's JS thread is busy (not in a collective): the agent exits rank 0
  pg.barrier();
  if (r === 1) process.exit(3);
  const until = Date.now() + 60_000;
  while (Date.now() < until) { /* a long GPU wait stands here */ }
  console.log(JSON.stringify({ rank: r, error: "not stopped" }));
} else if (scenario === "hang") {
  // rank 1 never reaches the barrier (alive, heartbeating): the gather times out on every rank
  if (r === 1) {
    setTimeout(() => {}, 60_000);
  } else {
    try {
      pg.barrier();
    } catch (e) {
      console.log(JSON.stringify({ rank: r, code: (e as { code?: string }).code, error: (e as Error).message }));
      process.exit(1);
    }
  }
}
