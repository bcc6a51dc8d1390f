// `helios warmup` (train/warmup.ts): on lavapipe presented as a GPU it tunes every matmul shape
// class a training step met (the cache then holds them, and a second warmup finds nothing left to
// tune); through the CLI on the plain test device it runs both steps; bad options are usage errors.
import { test } from "node:test";
import assert from "node:assert/strict";
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { main } from "../bench/cli.js";
import { parseWarmupArgs, runWarmup } from "../train/warmup.js";
import { onNative, withGpuLikeBackend } from "./backend-helpers.js";
import { Rng } from "./harness.js";

const rng = new Rng(2800 + Math.floor(Math.random() * 1000));
const heads = rng.int(1, 3);
const tiny = [`--layers=1`, `--dim=${16 * heads}`, `--heads=${heads}`, `--vocab=${rng.int(40, 90)}`, `--batch=2`, `--seq=${8 * rng.int(1, 3)}`];

test("warmup tunes the classes a step met and persists them; a second warmup has nothing left that can be tuned", { skip: !onNative() && "needs the native runtime" }, async () => {
  await withGpuLikeBackend({}, (G, dir) => {
    const log: string[] = [];
    const o = { ...parseWarmupArgs(tiny), log: (s: string) => log.push(s) };
    const r = runWarmup(o, G);
    assert.ok(r.classes >= 2 && r.tuned >= 1, JSON.stringify(r));
    const file = join(dir, "matmul-tune-v1.json");
    assert.ok(existsSync(file));
    assert.equal(Object.keys(JSON.parse(readFileSync(file, "utf8"))).length, r.tuned);
    assert.ok(log.some((l) => l.includes(`${r.tuned} tuned`)), log.join("\n"));
    const again = runWarmup(o, G);
    assert.equal(again.classes, r.classes - r.tuned, "only classes without a winner (one candidate) come back");
    assert.equal(again.tuned, 0);
  });
});

test("helios warmup runs from the CLI; bad options exit 2", async () => {
  assert.equal(await main(["warmup", ...tiny]), 0);
  assert.equal(await main(["warmup", "--bogus=1"]), 2);
  assert.equal(await main(["warmup", "--layers=0"]), 2);
  assert.equal(await main(["warmup", "--dim=33", "--heads=2"]), 2);
  assert.throws(() => parseWarmupArgs(["--seq=1e3"]), /--seq=1e3: expected a positive integer/);
  assert.equal(parseWarmupArgs(["--matmul16", "--seq=2048"]).model.blockSize, 2048);
  // Alpha's trainer flags for the same shape
  const alpha = parseWarmupArgs(["--layers=8", "--dim=512", "--heads=8", "--block=512", "--batch=32", "--vocabSize=96"]);
  assert.deepEqual([alpha.seq, alpha.batch, alpha.model.vocab, alpha.model.layers], [512, 32, 96, 8]);
});
