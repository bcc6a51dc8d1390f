// Data-parallel training on lavapipe over the test transport: two ranks, each training on half of
// the global batch with gradients averaged during backward, follow one process that trains on the
// whole batch — same losses at every step — in the demo (started by `helios launch`; 1.6 MB of
// parameters: two gradient buckets, so the captured step runs in pieces) and in the
// train suite (per-rank and total tokens/s reported); a rank killed mid-training ends the other.
import { test } from "node:test";
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { freePort, parseLaunchArgs, rankEnv } from "../ts/distributed/launch.js";

const here = path.dirname(fileURLToPath(import.meta.url));
const rank = path.join(here, "dist", "train-rank.js");
const cli = path.join(here, "..", "bench", "cli.js");

function run(cmd: string[], extra: Record<string, string> = {}): Promise<{ code: number | null; out: string; err: string }> {
  return new Promise((resolve) => {
    const env = { ...process.env, ...extra };
    for (const k of ["RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT"]) delete env[k];
    const c = spawn(process.execPath, cmd, { env, stdio: ["ignore", "pipe", "pipe"] });
    let out = "", err = "";
    c.stdout.on("data", (d) => (out += d));
    c.stderr.on("data", (d) => (err += d));
    c.on("close", (code) => resolve({ code, out, err }));
  });
}

type Result = { losses: number[]; valLoss?: number; world?: number; steps?: number; captured?: boolean; perRank?: number[] | null; tokensPerSec?: number; validation: string[] };

function result(r: { code: number | null; out: string; err: string }): Result {
  assert.equal(r.code, 0, r.err);
  const line = r.out.split("\n").map((l) => l.replace(/^\[rank 0\] /, "")).find((l) => l.startsWith("{"));
  assert.ok(line, `no result line in:\n${r.out}`);
  const j = JSON.parse(line) as Result;
  assert.deepEqual(j.validation, []);
  return j;
}

function sameLosses(a: number[], b: number[]): void {
  assert.equal(a.length, b.length);
  for (let i = 0; i < a.length; i++) {
    assert.ok(Math.abs(a[i] - b[i]) <= 1e-4 * Math.abs(b[i]), `step ${i + 1}: ${a[i]} (2 ranks) vs ${b[i]} (1 process)`);
  }
}

test("demo (captured steps, in pieces per bucket): 2 ranks (helios launch, test transport) train like 1 process with the same global batch", async () => {
  const args = ["--steps=4", "--batch=4", "--seq=16", "--layers=2", "--dim=128", "--heads=2", "--log-every=1", "--eval-every=1000", "--sample=1", "--max-seconds=600"];
  const [two, one] = (await Promise.all([run([cli, "launch", "--gpus=2", rank, ...args]), run([rank, ...args])])).map(result);
  assert.deepEqual([two.world, one.world, two.steps, two.captured, one.captured], [2, 1, 4, true, true]);
  sameLosses(two.losses, one.losses);
  assert.ok(two.losses[3] < two.losses[0], "the loss falls");
  assert.ok(Math.abs(two.valLoss! - one.valLoss!) <= 1e-4 * one.valLoss!, `val ${two.valLoss} vs ${one.valLoss}`);
});

test("train suite (eager steps): 2 ranks match 1 process step by step and report per-rank and total tokens/s", async () => {
  const dirs = [0, 1].map(() => mkdtempSync(path.join(tmpdir(), "helios-dist-suite-")));
  try {
    const args = (d: string) => ["suite", "--tiny", "--steps=3", "--batch=4", "--helios-modes=f32", "--no-torch", `--work-dir=${d}`];
    const eager = { HELIOS_CAPTURE: "0" };
    const [two, one] = (await Promise.all([run([cli, "launch", "--gpus=2", rank, ...args(dirs[0])], eager), run([rank, ...args(dirs[1])], eager)])).map(result);
    sameLosses(two.losses, one.losses);
    assert.equal(two.perRank?.length, 2);
    assert.ok(two.perRank!.every((x) => x > 0) && two.tokensPerSec! > 0);
  } finally {
    for (const d of dirs) rmSync(d, { recursive: true, force: true });
  }
});

test("a rank killed mid-training (SIGKILL, no launcher): the other exits non-zero within seconds, naming it", async () => {
  const dir = mkdtempSync(path.join(tmpdir(), "helios-dist-kill-"));
  try {
    const port = await freePort();
    const o = parseLaunchArgs(["--gpus=2", rank]);
    const started = [0, 1].map((local) => {
      const c = spawn(process.execPath, [rank, "suite", "--tiny", "--steps=100000", "--batch=4", "--helios-modes=f32", "--no-torch", `--work-dir=${dir}`], {
        env: rankEnv(o, local, port), stdio: ["ignore", "pipe", "pipe"],
      });
      let err = "";
      const joined = new Promise<void>((resolve) => c.stderr.on("data", (d) => {
        err += d;
        if (err.includes("joined")) resolve();
      }));
      const done = new Promise<{ code: number | null; err: () => string }>((resolve) => c.on("close", (code) => resolve({ code, err: () => err })));
      return { c, done, joined };
    });
    // every rank has arrived; a moment later both are training
    await Promise.race([started[0].joined, started[0].done.then((r) => assert.fail(`rank 0 ended before the job formed: ${r.err()}`))]);
    await new Promise((r) => setTimeout(r, 1000));
    const killed = Date.now();
    started[1].c.kill("SIGKILL");
    const r0 = await started[0].done;
    assert.notEqual(r0.code, 0);
    assert.match(r0.err(), /ERR_HELIOS_DIST_ABORTED|rank 1 disconnected/);
    assert.match(r0.err(), /rank 1 disconnected from the rendezvous/);
    assert.ok(Date.now() - killed < 15_000, `rank 0 took ${Date.now() - killed} ms`);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
