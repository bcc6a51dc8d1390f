// createPipeline on mutated SPIR-V (issue 24 item 3: one changed word used to segfault lavapipe,
// or abort the process when the validation layer's C++ exception crossed into Rust). Each child
// process mutates valid modules by one to three words and hands every mutant to createPipeline
// with validation on: the in-process validator must refuse it with a coded error, or the driver
// must build it without crashing and without a validation message. The Rust test
// `spirv_check::fuzz_tests` runs the validator alone over more mutants.
import { test } from "node:test";
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { fileURLToPath } from "node:url";

const child = fileURLToPath(new URL("./support/spirv-fuzz-child.js", import.meta.url));

interface Summary {
  seeds: number;
  attempts: number;
  accepted: number;
  codes: Record<string, number>;
  messages: string[];
}

test("mutated modules never crash createPipeline, and those built raise no validation message", () => {
  let accepted = 0;
  for (const seed of [11, 12, 13, 14, 15, 16]) {
    const r = spawnSync(process.execPath, [child, String(seed), "5000"], { encoding: "utf8", timeout: 120_000 });
    assert.equal(r.signal, null, `seed ${seed}: the child died of ${r.signal} (rerun it with 'trace' to find the mutant)\n${r.stderr}`);
    assert.equal(r.status, 0, `seed ${seed}: exit ${r.status}\n${r.stderr}`);
    const s = JSON.parse(r.stdout.trim().split("\n").at(-1) ?? "{}") as Summary;
    assert.deepEqual(s.messages, [], `seed ${seed}: validation messages for modules the validator accepted`);
    assert.deepEqual(Object.keys(s.codes).filter((c) => !c.startsWith("ERR_HELIOS_")), [], `seed ${seed}: uncoded errors`);
    assert.ok(s.seeds >= 10, `seed ${seed}: only ${s.seeds} seed modules`);
    accepted += s.accepted;
  }
  // Enough mutants must reach the driver for the test to mean something.
  assert.ok(accepted >= 300, `only ${accepted} mutants reached the driver`);
});
