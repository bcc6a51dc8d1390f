// The GPU-host script end to end on the interpreter runtime (tiny shapes): every file it promises
// is written and parses, with no error rows. Guards the one-shot GPU run against harness bugs.
import assert from "node:assert/strict";
import { existsSync, mkdirSync, mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { test } from "node:test";
import { runMatmulGpu } from "../bench/matmul-gpu.js";
import { CACHE_FILE, tuneKey } from "../ts/kernels/matmul/autotune.js";
import { normalize } from "../ts/kernels/matmul/problem.js";
import { variantByName } from "../ts/kernels/matmul/variants.js";
import { InterpRuntime } from "./support/interp-runtime.js";

test("matmul-gpu run (tiny, interpreter)", { timeout: 600_000 }, async () => {
  const out = mkdtempSync(join(tmpdir(), "helios-mm-gpu-"));
  process.env.HELIOS_CACHE_DIR = join(out, "cache");
  process.env.HELIOS_AUTOTUNE = "0"; // the tuner is covered by matmul-autotune.test.ts
  const rt = new InterpRuntime();
  const code = await runMatmulGpu(rt, {
    outDir: out, tiny: true, torch: false,
    checks: {
      variants: ["cm_64x64x32_w2x2", "simt_64x64_4x4"].map(variantByName),
      modes: [{ name: "f16", dtype: "f16" }],
      cases: [{ name: "17x33x65", problem: { m: 17, n: 33, k: 65 }, full: true }],
    },
  });
  for (const f of ["device.json", "check.json", "variant-sweep.json", "fused.json", "suite-f16.json", "suite-bf16.json", "suite-f32.json", "suite-f16acc16.json", "suite-f32tc.json", "suite-f16.svg"]) {
    assert.ok(existsSync(join(out, f)), f);
  }
  const fused = JSON.parse(readFileSync(join(out, "fused.json"), "utf8"));
  assert.ok(fused.every((r: { error?: string }) => !r.error), JSON.stringify(fused));
  const sweep = JSON.parse(readFileSync(join(out, "variant-sweep.json"), "utf8"));
  assert.ok(sweep.length > 0 && sweep.every((r: { error?: string; pass?: boolean }) => !r.error && r.pass), JSON.stringify(sweep).slice(0, 500));
  const f32tc = JSON.parse(readFileSync(join(out, "suite-f32tc.json"), "utf8"));
  assert.equal(f32tc.rows[0].variant, "cm_128x128x32_w2x2");
  assert.equal(code, 0);
});

test("matmul-gpu --variants: gates the named variants, sweeps them and the baseline only", { timeout: 600_000 }, async () => {
  const out = mkdtempSync(join(tmpdir(), "helios-mm-gpu-"));
  process.env.HELIOS_CACHE_DIR = join(out, "cache");
  const rt = new InterpRuntime();
  const code = await runMatmulGpu(rt, {
    outDir: out, tiny: true, torch: false, phase: "check",
    variants: ["cm_64x64x32_w2x2"], baseline: ["simt_64x64_4x4"],
    checks: { cases: [{ name: "17x33x65", problem: { m: 17, n: 33, k: 65 }, full: true }] },
  });
  const checks = JSON.parse(readFileSync(join(out, "check.json"), "utf8"));
  assert.deepEqual([...new Set(checks.rows.map((r: { variant: string }) => r.variant))], ["cm_64x64x32_w2x2"]);
  assert.deepEqual(checks.rows.map((r: { mode: string }) => r.mode), ["f16", "f16acc16", "bf16", "f32"]);
  const sweep = JSON.parse(readFileSync(join(out, "variant-sweep.json"), "utf8"));
  assert.deepEqual(sweep.map((r: { variant: string }) => r.variant).sort(), ["cm_64x64x32_w2x2", "simt_64x64_4x4"]);
  assert.ok(sweep.every((r: { pass?: boolean }) => r.pass), JSON.stringify(sweep).slice(0, 500));
  assert.equal(code, 0);
});

test("matmul-gpu --phase=fused: only the fused-epilogue comparison", { timeout: 600_000 }, async () => {
  const out = mkdtempSync(join(tmpdir(), "helios-mm-gpu-"));
  process.env.HELIOS_CACHE_DIR = join(out, "cache");
  process.env.HELIOS_AUTOTUNE = "0";
  const code = await runMatmulGpu(new InterpRuntime(), { outDir: out, tiny: true, torch: false, phase: "fused" });
  const fused = JSON.parse(readFileSync(join(out, "fused.json"), "utf8"));
  assert.equal(fused.length, 3); // one tiny size: f16, f16 in with f32 out, f32
  assert.deepEqual(fused.map((r: { dtype: string }) => r.dtype), ["f16", "f16->f32", "f32"]);
  assert.ok(fused.every((r: { error?: string; fusedMs?: number }) => !r.error && r.fusedMs! > 0), JSON.stringify(fused));
  for (const f of ["check.json", "variant-sweep.json", "suite-f16.json"]) assert.ok(!existsSync(join(out, f)), `${f} written`);
  assert.equal(code, 0);
});

test("matmul-gpu --phase=fused: the product alone may need scratch the fused plan does not", { timeout: 600_000 }, async () => {
  // H200 session 14: the tuner gave the plain f16→f32 product a stream-K tile (a workspace) and the
  // fused one a tile without; the plain product was recorded with the fused plan's buffers, failed,
  // and left its batch open for every row after it. Here the cache says the same with split-K for
  // the plain class and a tile without scratch for the fused one (an epilogue class with no entry
  // of its own would take the plain class's winner, scratch and all).
  const out = mkdtempSync(join(tmpdir(), "helios-mm-gpu-"));
  const cacheDir = join(out, "cache");
  mkdirSync(cacheDir, { recursive: true });
  const rt = new InterpRuntime();
  const plain = normalize({ m: 32, n: 32, k: 32, dtype: "f16", outDtype: "f32" });
  const fusedP = normalize({ m: 32, n: 32, k: 32, dtype: "f16", outDtype: "f32", epilogue: { bias: true, act: "gelu" } });
  const record = (variant: string) => ({ variant, ms: 1, tunedShape: "32x32x32", at: "test", candidates: [] });
  writeFileSync(join(cacheDir, CACHE_FILE), JSON.stringify({
    [tuneKey(rt.info, plain)]: record("simt_64x64_4x4_sk2"),
    [tuneKey(rt.info, fusedP)]: record("simt_64x64_4x4"),
  }));
  process.env.HELIOS_CACHE_DIR = cacheDir;
  delete process.env.HELIOS_AUTOTUNE;
  try {
    const code = await runMatmulGpu(rt, { outDir: out, tiny: true, torch: false, phase: "fused" });
    const fused = JSON.parse(readFileSync(join(out, "fused.json"), "utf8"));
    assert.ok(fused.every((r: { error?: string; fusedMs?: number }) => !r.error && r.fusedMs! > 0), JSON.stringify(fused));
    const row = fused.find((r: { dtype: string }) => r.dtype === "f16->f32");
    assert.equal(row.plainVariant, "simt_64x64_4x4_sk2");
    assert.notEqual(row.variant, row.plainVariant);
    assert.ok(row.unfusedVsFusedErr <= 1e-2, JSON.stringify(row));
    assert.equal(code, 0);
  } finally {
    process.env.HELIOS_AUTOTUNE = "0";
  }
});
