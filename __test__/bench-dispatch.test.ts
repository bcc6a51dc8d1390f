// bench/dispatch end to end on the CI device, small: every row measured, the alternating
// write/read chain clean under synchronization validation, and a CUDA reference that cannot
// start reported as a note rather than a crash.
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { mkdtempSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { test } from "node:test";
import { fileURLToPath } from "node:url";

const script = fileURLToPath(new URL("../bench/dispatch.js", import.meta.url));

test("bench/dispatch: small run with validation and an unavailable CUDA reference", { timeout: 300_000 }, () => {
  const out = join(mkdtempSync(join(tmpdir(), "helios-dispatch-")), "dispatch.json");
  const args = [script, "--dispatches=16", "--iters=1", "--reps=1", "--transfer-mib=1", "--warm-ms=0", "--validation", "--cuda=/nonexistent/python3", `--out=${out}`];
  const r = spawnSync(process.execPath, args, { encoding: "utf8", timeout: 240_000 });
  assert.equal(r.status, 0, r.stderr);
  assert.match(r.stdout, /no CUDA reference: \/nonexistent\/python3 failed to start/);
  assert.doesNotMatch(r.stdout, /validation messages/);
  const j = JSON.parse(readFileSync(out, "utf8"));
  const names = j.results.map((x: { name: string }) => x.name);
  assert.ok(names.includes("replay, 16 alternating write/read (memory and execution-only barriers)"), names.join("; "));
  for (const x of j.results.slice(1)) assert.ok(Number.isFinite(x.value) && x.value > 0, `${x.name}: ${x.value}`);
  assert.equal(j.cuda.ok, false);
});
