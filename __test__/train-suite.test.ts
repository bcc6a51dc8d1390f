// The train suite's plumbing on the float64 reference: shared init/batches files, the Helios
// side, the median window and the table; the PyTorch side reported as unavailable, not failed.
import { test } from "node:test";
import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { medianWindow, parseTrainSuiteArgs, runTrainSuite } from "../bench/train/suite.js";
import { readSafetensors } from "../train/safetensors.js";
import { RefTrainBackend } from "./train-ref-backend.js";

test("medianWindow takes steps 10..50 (1-based) when there are enough", () => {
  const ms = Array.from({ length: 60 }, (_, i) => (i < 9 ? 1000 : i >= 50 ? 500 : i));
  assert.equal(medianWindow(ms), 29);
  assert.equal(medianWindow([9, 1, 2, 3]), 2.5);
  assert.equal(medianWindow([]), null);
});

test("runTrainSuite (tiny, reference backend, no PyTorch) writes shared inputs and reports", () => {
  const dir = mkdtempSync(path.join(tmpdir(), "helios-suite-"));
  try {
    const lines: string[] = [];
    const input = parseTrainSuiteArgs(["--tiny", "--steps=3", "--layers=1", "--vocab=300", "--python=/nonexistent/python3", "--helios-modes=f32", `--work-dir=${dir}`]);
    const r = runTrainSuite({ ...input, backend: new RefTrainBackend(), log: (s) => lines.push(s) });
    assert.equal(r.helios.f32.losses.length, 3);
    assert.ok(r.helios.f32.losses.every(Number.isFinite));
    assert.equal(r.parity.ok, null);
    assert.match(r.torch.unavailable.error ?? "", /did not run/);
    const init = readSafetensors(path.join(dir, "init.safetensors"));
    assert.deepEqual(init.tensors.get("transformer.wte.weight")!.shape, [300, 32]);
    assert.equal(JSON.parse(init.metadata.config).layers, 1);
    const b = readSafetensors(path.join(dir, "batches.safetensors")).tensors.get("tokens")!;
    assert.deepEqual(b.shape, [3, 2, 33]);
    assert.ok(lines.some((l) => l.includes("parity (")));
    // the first step's time is reported beside the steady figure (cold-start tracking, issue 26)
    assert.equal(r.helios.f32.firstStepMs, r.helios.f32.ms[0]);
    const row = lines.find((l) => l.startsWith("helios f32 ") && l.includes("tok/s"));
    assert.ok(row?.match(new RegExp(`first step +${(r.helios.f32.ms[0] / 1000).toFixed(2)} s`)), row);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
