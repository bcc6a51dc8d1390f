// The distributed layer's rendezvous, failure detection and launcher, with the test transport
// over host tensors (no device): every scenario runs real processes over loopback TCP.
import { test } from "node:test";
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { Writable } from "node:stream";
import { readDistEnv } from "../ts/distributed/env.js";
import { freePort, launch, parseLaunchArgs, rankEnv } from "../ts/distributed/launch.js";

const here = path.dirname(fileURLToPath(import.meta.url));
const rankScript = path.join(here, "dist", "rank.js");

class Sink extends Writable {
  text = "";
  _write(chunk: Buffer, _enc: string, done: () => void): void {
    this.text += chunk.toString();
    done();
  }
}

async function launched(gpus: number, scenario: string, extra: string[] = [], env: Record<string, string> = {}) {
  const out = new Sink(), err = new Sink();
  const saved = { ...process.env };
  Object.assign(process.env, env);
  try {
    const status = await launch(parseLaunchArgs([`--gpus=${gpus}`, ...extra, rankScript, scenario]), { stdout: out, stderr: err });
    return { status, out: out.text, err: err.text };
  } finally {
    for (const k of Object.keys(env)) if (saved[k] === undefined) delete process.env[k]; else process.env[k] = saved[k];
  }
}

/** Starts the ranks with the variables set, as torchrun or a scheduler would (no launcher). */
async function direct(n: number, scenario: string, env: Record<string, string> = {}) {
  const port = await freePort();
  const o = parseLaunchArgs([`--gpus=${n}`, rankScript]);
  return Promise.all([...Array(n).keys()].map((local) => new Promise<{ code: number | null; signal: string | null; out: string; err: string }>((resolve) => {
    const c = spawn(process.execPath, [rankScript, scenario], { env: { ...rankEnv(o, local, port), ...env }, stdio: ["ignore", "pipe", "pipe"] });
    let out = "", err = "";
    c.stdout.on("data", (d) => (out += d));
    c.stderr.on("data", (d) => (err += d));
    c.on("close", (code, signal) => resolve({ code, signal, out, err }));
  })));
}

function rankLines(text: string): Record<number, Record<string, unknown>> {
  const out: Record<number, Record<string, unknown>> = {};
  for (const m of text.matchAll(/^\[rank (\d+)\] (\{.*\})$/gm)) out[Number(m[1])] = JSON.parse(m[2]);
  return out;
}

test("readDistEnv: torchrun variables, defaults for one process, coded errors naming the variable", () => {
  const e = readDistEnv({ RANK: "1", WORLD_SIZE: "2", LOCAL_RANK: "1", MASTER_ADDR: "10.0.0.1", MASTER_PORT: "29500" });
  assert.deepEqual({ ...e }, { rank: 1, worldSize: 2, localRank: 1, localWorldSize: 2, masterAddr: "10.0.0.1", masterPort: 29500 });
  assert.equal(readDistEnv({ WORLD_SIZE: "1", RANK: "0" }).masterPort, 29500);
  const bad = (env: Record<string, string>, re: RegExp) =>
    assert.throws(() => readDistEnv(env), (x: Error & { code?: string }) => x.code === "ERR_HELIOS_DIST_ENV" && re.test(x.message));
  bad({}, /WORLD_SIZE is not set/);
  bad({ WORLD_SIZE: "2", RANK: "2", LOCAL_RANK: "0", MASTER_ADDR: "h", MASTER_PORT: "1" }, /RANK=2 is not an integer from 0 to 1/);
  bad({ WORLD_SIZE: "2", RANK: "0", LOCAL_RANK: "0", MASTER_ADDR: "h", MASTER_PORT: "0x10" }, /MASTER_PORT=0x10/);
  bad({ WORLD_SIZE: "2", RANK: "0", LOCAL_RANK: "0", MASTER_PORT: "5" }, /MASTER_ADDR is not set/);
  bad({ WORLD_SIZE: "2", RANK: "0", MASTER_ADDR: "h", MASTER_PORT: "5" }, /LOCAL_RANK is not set/);
});

test("helios launch: argument errors; each rank's variables, NCCL_NVLS_ENABLE=0 always", () => {
  assert.throws(() => parseLaunchArgs(["x.js"]), /--gpus=N is required/);
  assert.throws(() => parseLaunchArgs(["--gpus=0", "x.js"]), /--gpus=0: expected an integer from 1/);
  assert.throws(() => parseLaunchArgs(["--gpus=2"]), /no script/);
  assert.throws(() => parseLaunchArgs(["--gpus=2", "--nnodes=2", "x.js"]), /--master-port is required/);
  assert.throws(() => parseLaunchArgs(["--gpus=2", "--bogus=1", "x.js"]), /unknown option --bogus/);
  const o = parseLaunchArgs(["--gpus=4", "--nnodes=2", "--node-rank=1", "--master-addr=h0", "--master-port=1234", "train.js", "--gpus=9"]);
  assert.deepEqual(o.command, ["train.js", "--gpus=9"]);
  const env = rankEnv(o, 2, 1234, { NCCL_NVLS_ENABLE: "1" });
  assert.deepEqual([env.RANK, env.WORLD_SIZE, env.LOCAL_RANK, env.LOCAL_WORLD_SIZE, env.MASTER_ADDR, env.MASTER_PORT, env.NCCL_NVLS_ENABLE], ["6", "8", "2", "4", "h0", "1234", "0"]);
});

test("allReduce (sum, max, avg), broadcast, barrier and allGather across 3 launched ranks agree", async () => {
  const r = await launched(3, "collectives");
  assert.equal(r.status, 0, r.err);
  const lines = rankLines(r.out);
  assert.deepEqual(Object.keys(lines).sort(), ["0", "1", "2"]);
  for (const rank of [0, 1, 2]) {
    const l = lines[rank];
    assert.deepEqual(l.sum, [6, 60, -3]);
    assert.deepEqual(l.max, [2, 0]);
    assert.deepEqual(l.avg, [2]);
    assert.deepEqual(l.bcast, [7, 8]);
    assert.deepEqual(l.nums, [[0], [0.5], [1]]);
  }
});

test("a rank that dies: the others' next collective fails at once naming it, and they exit non-zero", async () => {
  const [r0, r1] = await direct(2, "die");
  assert.equal(r1.code, 3);
  assert.equal(r0.code, 1);
  const l = JSON.parse(r0.out);
  assert.equal(l.code, "ERR_HELIOS_DIST_ABORTED");
  assert.match(String(l.error), /rank 1 disconnected from the rendezvous/);
  assert.ok(Number(l.ms) < 5000);
});

test("helios launch: a rank that fails stops the others, and the launcher exits with its status naming it", async () => {
  const t0 = Date.now();
  const r = await launched(2, "busy-die", ["--grace-ms=2000"]);
  assert.equal(r.status, 3);
  assert.match(r.err, /helios launch: rank 1 exited with status 3; stopping the other ranks/);
  assert.match(r.err, /helios launch: failed \(rank 1 exited with status 3\)/);
  assert.ok(Date.now() - t0 < 20_000, "rank 0 (busy for 60 s) was stopped");
});

test("a rank that hangs before a barrier: the barrier times out on the others naming the missing rank", async () => {
  const r = await launched(2, "hang", [], { HELIOS_DIST_TIMEOUT_S: "2" });
  assert.notEqual(r.status, 0);
  const l = rankLines(r.out)[0];
  assert.equal(l.code, "ERR_HELIOS_DIST_ABORTED");
  assert.match(String(l.error), /barrier #1 timed out after 2 s waiting for rank\(s\) 1/);
});

test("without a launcher: a peer's death ends a rank whose JS thread is busy (the agent exits it, with the reason)", async () => {
  const started = Date.now();
  const [r0, r1] = await direct(2, "busy-die", { TEST_EXIT_AFTER_MS: "1000" });
  assert.equal(r1.code, 3);
  assert.ok(r0.code !== 0 || r0.signal !== null, "rank 0 exits non-zero");
  assert.match(r0.err, /helios dist: rank 0: rank 1 disconnected from the rendezvous .*; exiting/);
  assert.ok(Date.now() - started < 30_000);
});
