// The DDP-style reducer: bucket plans, launch order (a bucket goes out as its last gradient
// arrives, strictly in plan order), and the reduced gradients, over a recording transport and
// host tensors (no device, no peers).
import { test } from "node:test";
import assert from "node:assert/strict";
import { GradReducer, planBuckets, type ReducerBackend } from "../ts/distributed/buckets.js";
import { shardRows } from "../ts/distributed/ddp.js";
import type { ReduceOp, Transport } from "../ts/distributed/transport.js";
import type { TensorData } from "../ts/types.js";

const t = (data: number[], shape: number[]): TensorData => ({ shape, dtype: "f32", data: Float32Array.from(data) }) as TensorData;
const host: ReducerBackend = {
  reshape: (a, shape) => ({ ...a, shape }) as TensorData,
  cat: (ts) => t(ts.flatMap((x) => [...(x.data as Float32Array)]), [ts.reduce((n, x) => n + x.shape[0], 0)]),
  slice: (a, s, e) => t([...(a.data as Float32Array)].slice(s[0], e[0]), [e[0] - s[0]]),
};

/** Pretends two peers hold `peer` times the local gradient: avg = local * (1 + peer) / 2. */
class Recorder implements Transport {
  readonly name = "recorder";
  readonly events: string[];
  constructor(events: string[], private readonly peer = 3) {
    this.events = events;
  }
  allReduce(ts: TensorData[], op: ReduceOp): void {
    for (const x of ts) {
      this.events.push(`allReduce ${op} ${x.shape[0]}`);
      const d = x.data as Float32Array;
      for (let i = 0; i < d.length; i++) d[i] = op === "avg" ? (d[i] * (1 + this.peer)) / 2 : d[i] * (1 + this.peer);
    }
  }
  broadcast(): void {}
  synchronize(): void {}
  abort(): void {}
  close(): void {}
}

const specs = [
  { name: "head", shape: [4, 4] },   // 64 B
  { name: "b2", shape: [4] },        // 16 B
  { name: "w2", shape: [4, 2] },     // 32 B
  { name: "b1", shape: [2] },        // 8 B
  { name: "w1", shape: [2, 8] },     // 64 B
];

test("planBuckets: completion order, a small first bucket, caps closing buckets, tensors never split", () => {
  const b = planBuckets(specs, 48, 16);
  assert.deepEqual(b.map((x) => x.entries.map((e) => e.name)), [["head"], ["b2", "w2"], ["b1", "w1"]]);
  assert.deepEqual(b[1].entries.map((e) => e.offset), [0, 4]);
  assert.deepEqual(b.map((x) => x.numel), [16, 12, 18]);
  assert.equal(planBuckets(specs, 1 << 20).length, 1);
  assert.throws(() => planBuckets([...specs, specs[0]], 64), (e: Error & { code?: string }) => e.code === "ERR_HELIOS_DIST_ARGUMENT" && /"head" is listed twice/.test(e.message));
  assert.throws(() => planBuckets(specs, 0), /must be positive/);
});

test("GradReducer: each bucket is launched as its last gradient arrives, during backward, in plan order", () => {
  const events: string[] = [];
  const r = new GradReducer(host, new Recorder(events), planBuckets(specs, 48, 16), { onLaunch: (k) => events.push(`launch ${k}`) });
  const grads = new Map(specs.map((s, i) => [s.name, t([...Array(s.shape.reduce((a, c) => a * c, 1)).keys()].map((j) => i + j / 100), s.shape)]));
  for (const s of specs) {
    events.push(`grad ${s.name}`);
    r.add(s.name, grads.get(s.name)!);
  }
  assert.deepEqual(events, [
    "grad head", "launch 0", "allReduce avg 16",
    "grad b2", "grad w2", "launch 1", "allReduce avg 12",
    "grad b1", "grad w1", "launch 2", "allReduce avg 18",
  ]);
  const out = r.finish();
  for (const [i, s] of specs.entries()) {
    const g = out.get(s.name)!;
    assert.deepEqual(g.shape, s.shape);
    const want = [...Array(s.shape.reduce((a, c) => a * c, 1)).keys()].map((j) => 2 * (i + j / 100));
    assert.deepEqual([...(g.data as Float32Array)], Array.from(Float32Array.from(want)));
  }
});

test("GradReducer: a bucket completed early waits for the ones before it (same collective order on every rank)", () => {
  const events: string[] = [];
  const r = new GradReducer(host, new Recorder(events), planBuckets(specs, 48, 16), { op: "sum", onLaunch: (k) => events.push(`launch ${k}`) });
  const order = ["b1", "w1", "b2", "w2", "head"];
  for (const n of order) {
    events.push(`grad ${n}`);
    const s = specs.find((x) => x.name === n)!;
    r.add(n, t(new Array(s.shape.reduce((a, c) => a * c, 1)).fill(1), s.shape));
  }
  assert.deepEqual(events.filter((e) => !e.startsWith("allReduce")), ["grad b1", "grad w1", "grad b2", "grad w2", "grad head", "launch 0", "launch 1", "launch 2"]);
  assert.deepEqual([...(r.finish().get("w1")!.data as Float32Array)].slice(0, 2), [4, 4]);
  // the reducer resets: a second step launches again
  for (const s of specs) r.add(s.name, t(new Array(s.shape.reduce((a, c) => a * c, 1)).fill(0), s.shape));
  assert.equal(r.launched, 3);
});

test("GradReducer: coded errors for an unknown, repeated, mis-sized or missing gradient", () => {
  const r = new GradReducer(host, new Recorder([]), planBuckets(specs, 48, 16));
  const code = (re: RegExp) => (e: Error & { code?: string }) => e.code === "ERR_HELIOS_DIST_ARGUMENT" && re.test(e.message);
  assert.throws(() => r.add("nope", t([1], [1])), code(/"nope" is not a parameter/));
  assert.throws(() => r.add("b1", t([1, 2, 3], [3])), code(/"b1" has 3 elements, the parameter 2/));
  r.add("b1", t([1, 2], [2]));
  assert.throws(() => r.add("b1", t([1, 2], [2])), code(/added twice/));
  assert.throws(() => r.finish(), code(/no gradient for head, b2, w2, w1/));
});

test("shardRows: equal row ranges per rank, or a coded error when the batch does not split", () => {
  assert.deepEqual([0, 1, 2, 3].map((r) => shardRows(16, r, 4)), [[0, 4], [4, 8], [8, 12], [12, 16]]);
  assert.throws(() => shardRows(10, 0, 4), (e: Error & { code?: string }) => e.code === "ERR_HELIOS_DIST_ARGUMENT" && /10 rows does not split evenly over 4 ranks/.test(e.message));
});
