// bench/fma-peak end to end on this machine's device (few workgroups, few steps): every form
// compiles, runs and is timed, and the register-only forms match their host evaluation.
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { mkdtempSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { test } from "node:test";
import { fileURLToPath } from "node:url";
import { onNative } from "./backend-helpers.js";

test("bench/fma-peak (16 workgroups, 32 steps)", { skip: !onNative() && "needs the native runtime", timeout: 120_000 }, () => {
  const out = join(mkdtempSync(join(tmpdir(), "helios-fma-")), "fma.json");
  const script = fileURLToPath(new URL("../bench/fma-peak.js", import.meta.url));
  const r = spawnSync(process.execPath, [script, "--groups=16", "--steps=32", "--iters=2", `--out=${out}`], { encoding: "utf8" });
  assert.equal(r.status, 0, r.stderr + r.stdout);
  const j = JSON.parse(readFileSync(out, "utf8")) as { meta: { groups: number; steps: number }; rows: { form: string; fmasPerThread: number; ms: number; tflops: number; checked: boolean }[] };
  assert.deepEqual([j.meta.groups, j.meta.steps], [16, 32]);
  assert.deepEqual(j.rows.map((x) => x.form), ["scalar", "outer", "outer_4x16", "outer_16x4", "outer_v4", "outer_lds", "outer_lds_pf", "outer_bar"]);
  for (const row of j.rows) assert.ok(row.ms > 0 && row.tflops > 0, row.form);
  assert.deepEqual(j.rows.filter((x) => x.checked).map((x) => x.form), ["scalar", "outer", "outer_4x16", "outer_16x4", "outer_v4"]);
  assert.equal(j.rows[0].fmasPerThread, 32 * 32);
});
