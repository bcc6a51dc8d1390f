// bench/prepack end to end on this machine's device (small M, packing forced with --mode=on, so a
// CPU device runs the packed path too): the fp64 gate passes on both backends, every row is packed,
// and the JSON carries what RESULTS.md quotes. Guards the GPU-host run against harness bugs.
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { mkdtempSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { test } from "node:test";
import { fileURLToPath } from "node:url";
import { onNative } from "./backend-helpers.js";

test("bench/prepack --mode=on (M=64, proj)", { skip: !onNative() && "needs the native runtime", timeout: 300_000 }, () => {
  const out = join(mkdtempSync(join(tmpdir(), "helios-prepack-")), "prepack.json");
  const script = fileURLToPath(new URL("../bench/prepack.js", import.meta.url));
  const r = spawnSync(process.execPath, [script, "--m=64", "--iters=2", "--mode=on", "--cases=proj", "--dtypes=f32,f16", `--out=${out}`], {
    encoding: "utf8", env: { ...process.env, HELIOS_CACHE_DIR: join(tmpdir(), "helios-prepack-cache") },
  });
  assert.equal(r.status, 0, r.stderr + r.stdout);
  const j = JSON.parse(readFileSync(out, "utf8")) as { meta: { mode: string }; rows: { case: string; packed: boolean; errOff: number; errAuto: number; offMs: number; autoMs: number }[] };
  assert.equal(j.meta.mode, "on");
  assert.deepEqual(j.rows.map((x) => x.case), ["proj f32", "proj f16"]);
  for (const row of j.rows) {
    assert.equal(row.packed, true, row.case);
    assert.ok(row.errOff <= 1e-2 && row.errAuto <= 1e-2, `${row.case}: ${row.errOff}, ${row.errAuto}`);
    assert.ok(row.offMs > 0 && row.autoMs > 0, row.case);
  }
});
