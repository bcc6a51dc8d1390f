// `helios warmup` (train/warmup.ts): on lavapipe presented as a GPU it tunes every matmul shape
// class a training step met (the cache then holds them, and a second warmup finds nothing left to
// tune); through the CLI on the plain test device it runs both steps; bad options are usage errors.
import { test } from "node:test";
import assert from "node:assert/strict";
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { main } from "../bench/cli.js";
import { parseWarmupArgs, runWarmup } from "../train/warmup.js";
import { onNative, withGpuLikeBackend } from "./backend-helpers.js";
import { Rng } from "./harness.js";
import { inChild } from "./helpers.js";

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

test("helios warmup --export-pipeline-seed writes a seed a fresh process starts from; a bad directory exits 2", { skip: !onNative() && "needs the native runtime" }, async () => {
  const dir = mkdtempSync(join(tmpdir(), "helios-warmup-seed-"));
  try {
    const seeds = join(dir, "seeds");
    assert.equal(await main(["warmup", ...tiny, `--export-pipeline-seed=${seeds}`]), 0);
    const files = readdirSync(seeds);
    assert.equal(files.length, 1, files.join(", "));
    assert.match(files[0], /^[0-9a-f]{4,8}-[0-9a-f]{4,8}-[0-9a-f]{32}\.bin$/);
    assert.equal(readFileSync(join(seeds, files[0])).subarray(0, 8).toString("latin1"), "HELIOSPC");
    const res = inChild(`const i = native.initDevice({ pipelineSeedDir: ${JSON.stringify(seeds)} });
      if (i.pipelineCacheSource !== "seed") throw new Error("started from " + i.pipelineCacheSource);`, { HELIOS_CACHE_DIR: join(dir, "fresh-cache") });
    assert.ok(res.ok, JSON.stringify(res));
    const file = join(dir, "a-file");
    writeFileSync(file, "");
    assert.equal(await main(["warmup", ...tiny, `--export-pipeline-seed=${file}`]), 2);
    assert.equal(await main(["warmup", ...tiny, "--export-pipeline-seed="]), 2);
    assert.equal(parseWarmupArgs(["--export-pipeline-seed=out/seeds"]).exportPipelineSeed, "out/seeds");
    assert.equal(parseWarmupArgs([]).exportPipelineSeed, undefined);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
