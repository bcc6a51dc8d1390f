// `helios bench --suite=train` (the package bin routes it to bench/train/suite.ts): a tiny run on
// the test device without PyTorch writes its report; a bad option is a usage error (exit 2).
import { test } from "node:test";
import assert from "node:assert/strict";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { main } from "../bench/cli.js";

test("helios bench --suite=train runs the train suite (tiny, no PyTorch) and writes its report", async () => {
  const dir = mkdtempSync(path.join(tmpdir(), "helios-cli-train-"));
  try {
    const out = path.join(dir, "r.json");
    const code = await main(["bench", "--suite", "train", "--tiny", "--steps=2", "--helios-modes=f32", "--no-torch", `--work-dir=${dir}`, `--out=${out}`]);
    assert.equal(code, 0);
    const r = JSON.parse(readFileSync(out, "utf8"));
    assert.equal(r.helios.f32.losses.length, 2);
    assert.ok(r.helios.f32.losses.every(Number.isFinite));
    assert.equal(r.parity.ok, null);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test("helios bench --suite=train rejects an unknown option with exit 2; an unknown suite too", async () => {
  assert.equal(await main(["bench", "--suite=train", "--bogus=1"]), 2);
  assert.equal(await main(["bench", "--suite=nope"]), 2);
});
