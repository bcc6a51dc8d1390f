// bench/flash --fwd-variants (bench/flash-fwd-race.ts) end to end on the kernel interpreter at a tiny
// size, so the GPU run cannot fail on what the CPU can find: the rows layout (packed qkv, the gate's
// values taken back to heads), the shipped kernel and w8 (8 subgroups, two stages) gated against
// float64, compared bit for bit with each other, timed in turns, the table and the JSON written.
import { test } from "node:test";
import assert from "node:assert/strict";
import { mkdtempSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { raceForward } from "../bench/flash-fwd-race.js";
import { InterpRuntime } from "./support/interp-runtime.js";

test("the forward race gates, compares and times the shipped kernel and w8 in the rows layout (interpreter)", () => {
  const out = join(mkdtempSync(join(tmpdir(), "helios-fwd-race-")), "race.json");
  const r = raceForward({
    variants: ["w8"], layouts: ["rows"], bh: 2, t: 128, d: 16, heads: 2, iters: 1, warmMs: 0, out,
    torchFwd: () => "no PyTorch in tests", runtime: new InterpRuntime(),
  });
  assert.equal(r.code, 0);
  assert.deepEqual(r.rows.map((x) => [x.layout, x.variant, x.status]), [["rows", "current", "ok"], ["rows", "w8", "ok"]]);
  for (const x of r.rows) {
    assert.ok(x.vsCurrent?.identical, `${x.variant}: O and lse are the shipped kernel's bits`);
    assert.ok(x.gate?.length === 2 && x.gate.every((e) => e.out < 2e-2 && e.lse < 2e-3), `${x.variant} gate ${JSON.stringify(x.gate)}`);
    assert.ok(x.ms! > 0 && x.reps?.length === 3, `${x.variant} timed`);
  }
  assert.equal(r.rows[0].speedup, 1);
  const json = JSON.parse(readFileSync(out, "utf8"));
  assert.equal(json.rows.length, 2);
  assert.equal(json.torchNote, "no PyTorch in tests");
});
