// Device buffers allocated ahead (src/runtime/ahead.rs, HELIOS_ALLOC_AHEAD): a loop that keeps
// leasing buffers of the dedicated size (HELIOS_DEDICATED_MIB, 8 MiB) without releasing them
// gets some made by the background thread; each works like a fresh one, the pool's totals
// count them, idle spares are freed, and the device goes cleanly while spares are being made.
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { test } from "node:test";
import type { Handle, PoolStats } from "./api.js";
import { assertArrayEqual, groupsFor, pipeline, randomU32, readU32, rng, rt, sleep, useDevice } from "./helpers.js";

useDevice();

const MIB = 1 << 20;
/** At the dedicated threshold and its own bucket (a power of two). */
const BYTES = 8 * MIB;
const N = BYTES / 4;

type Stats = PoolStats & { freeBuffers?: number; allocatedAhead?: number; aheadBytes?: number };
const stats = (): Stats => rt.poolStats() as Stats;

/** Leases `count` buffers of BYTES, each filled with its own random words, inside one batch
 *  that submits ahead of allocations (as the engine's batches do) and increments every buffer. */
function leaseLoop(count: number, seed: number): Array<{ h: Handle; data: Uint32Array }> {
  const out: Array<{ h: Handle; data: Uint32Array }> = [];
  // Made first: leases a few ms apart, as a recording loop's (a spare untaken for 300 ms is freed).
  const datas = Array.from({ length: count }, (_, i) => randomU32(N, rng(seed + i)));
  rt.beginBatch({ overlapAllocations: true });
  for (const data of datas) {
    const h = rt.leaseBuffer(BYTES);
    rt.uploadBuffer(h, data);
    rt.recordDispatch(pipeline("inc"), [h], [groupsFor(N)], Uint32Array.of(N));
    out.push({ h, data });
  }
  rt.waitTimeline(rt.submitBatch());
  return out;
}

function checkAll(leases: Array<{ h: Handle; data: Uint32Array }>): void {
  for (const [i, { h, data }] of leases.entries()) assertArrayEqual(readU32(h), data.map((v) => v + 1), `lease ${i}`);
}

test("a loop keeping fresh 8 MiB leases gets buffers made ahead, each working like a fresh one", () => {
  rt.trimPool();
  const before = stats();
  const count = 16;
  const leases = leaseLoop(count, 1000);
  const after = stats();
  const ahead = (after.allocatedAhead ?? 0) - (before.allocatedAhead ?? 0);
  assert.equal(after.allocations - before.allocations, count, "every lease missed the pool (nothing was released)");
  assert.ok(ahead > 0, `no lease took a buffer made ahead: ${JSON.stringify(after)}`);
  assert.ok(ahead <= count - 2, `the first two misses of a streak allocate themselves (${ahead} ahead)`);
  checkAll(leases);
  // The pool's totals after the releases: every lease is free, none leased; spares stay apart.
  for (const { h } of leases) rt.releaseBuffer(h);
  const released = stats();
  assert.equal(released.leasedBytes, before.leasedBytes);
  assert.equal(released.freeBytes - before.freeBytes, count * BYTES);
  assert.ok((released.aheadBytes ?? 0) <= 4 * BYTES, `at most 4 spares of a bucket: ${released.aheadBytes}`);
  // The released buffers (made ahead or not) serve the next loop from the pool.
  const again = leaseLoop(count, 2000);
  const reused = stats();
  assert.equal(reused.allocations, released.allocations, "the second loop reuses the released buffers");
  checkAll(again);
  for (const { h } of again) rt.releaseBuffer(h);
  rt.trimPool();
  const trimmed = stats();
  assert.equal(trimmed.freeBytes, 0);
  assert.equal(trimmed.aheadBytes, 0, "trimPool frees the spares");
});

test("spares nobody takes are freed after a few hundred ms", async () => {
  const hs = Array.from({ length: 6 }, () => rt.leaseBuffer(BYTES));
  /** Polls poolStats until `done` holds (false after `ms`). */
  const until = async (done: (s: Stats) => boolean, ms: number) => {
    for (const end = Date.now() + ms; Date.now() < end; await sleep(5)) if (done(stats())) return true;
    return done(stats());
  };
  assert.ok(await until((s) => (s.aheadBytes ?? 0) > 0, 2000), "the streak left spares ready");
  assert.ok(await until((s) => s.aheadBytes === 0, 3000), `idle spares were freed: ${JSON.stringify(stats())}`);
  hs.forEach((h) => rt.releaseBuffer(h));
  rt.trimPool();
});

test("leases below the dedicated size never go ahead", () => {
  const before = stats();
  const hs = Array.from({ length: 8 }, () => rt.leaseBuffer(4 * MIB));
  assert.equal((stats().allocatedAhead ?? 0) - (before.allocatedAhead ?? 0), 0);
  assert.equal(stats().aheadBytes, 0);
  hs.forEach((h) => rt.releaseBuffer(h));
  rt.trimPool();
});

/** Runs `body` (sees `native`, `KERNELS`) in a fresh process with `env`; returns what it printed last as JSON. */
function child(body: string, env: Record<string, string>): Record<string, unknown> {
  const nativeUrl = new URL("../ts/native.js", import.meta.url).href;
  const kernelsUrl = new URL("./kernels/index.js", import.meta.url).href;
  const script = `
    const { native } = await import(${JSON.stringify(nativeUrl)});
    const { KERNELS } = await import(${JSON.stringify(kernelsUrl)});
    native.initDevice({ validation: true });
    const lease = (n) => Array.from({ length: n }, () => native.leaseBuffer(${BYTES}));
    ${body}`;
  const res = spawnSync(process.execPath, ["--input-type=module", "-e", script], { env: { ...process.env, ...env }, encoding: "utf8", timeout: 60_000 });
  assert.equal(res.status, 0, `child failed (${res.signal ?? res.status}): ${res.stderr}`);
  const last = res.stdout.trim().split("\n").pop() ?? "";
  return last.startsWith("{") ? JSON.parse(last) : {};
}

test("HELIOS_ALLOC_AHEAD=0 allocates every lease on the recording thread", () => {
  const got = child(`lease(12); console.log(JSON.stringify(native.poolStats())); native.destroy();`, { HELIOS_ALLOC_AHEAD: "0" });
  assert.equal(got.allocations, 12);
  assert.equal(got.allocatedAhead, 0);
  assert.equal(got.aheadBytes, 0);
});

test("destroy() while spares are being made, and exit with them in flight, are clean", () => {
  // Destroy right after a streak began (the thread is mid-allocation or has spares), then a
  // second device in the same process, then process.exit() with its thread busy: the exit
  // listener joins it (no cleanup hook runs after process.exit()).
  const got = child(
    `lease(5);
     native.destroy();
     const first = native.takeValidationMessages();
     native.initDevice({ validation: true });
     lease(5);
     const s = native.poolStats();
     console.log(JSON.stringify({ first, second: native.takeValidationMessages(), allocations: s.allocations }));
     lease(3);
     process.exit(0);`,
    {},
  );
  assert.deepEqual(got.first, []);
  assert.deepEqual(got.second, []);
  assert.equal(got.allocations, 5);
});
