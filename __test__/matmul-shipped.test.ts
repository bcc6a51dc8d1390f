// Shipped matmul tuning data (ts/kernels/matmul/shipped.ts): chooseMatmul takes a shipped winner
// when the cache has none, for the same device and driver family only; a stale variant is passed
// over; the cache wins over it. bench/tuning-export.ts merges cache files into the data file.
import { test } from "node:test";
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { chooseMatmul, capsOf, CACHE_FILE, tuneKey, type TuneRecord } from "../ts/kernels/matmul/autotune.js";
import { readMatmulConfig } from "../ts/kernels/matmul/config.js";
import { candidateVariants, defaultVariant } from "../ts/kernels/matmul/plan.js";
import { normalize, type MatmulProblem } from "../ts/kernels/matmul/problem.js";
import { driverFamily, loadShipped, mergeShipped, shippedKey, SHIPPED_VERSION } from "../ts/kernels/matmul/shipped.js";
import { VARIANTS } from "../ts/kernels/matmul/variants.js";
import { exportTuning } from "../bench/tuning-export.js";
import { InterpRuntime } from "./support/interp-runtime.js";
import { Rng } from "./harness.js";

const rng = new Rng(2600 + Math.floor(Math.random() * 1000));

/** A SIMT-only interpreter device on driver `major.minor.patch` (random release of one branch). */
function device(major: number) {
  const rt = new InterpRuntime({ ...new InterpRuntime().info, coopMatSupported: false });
  rt.info.driverVersion = `${major}.${rng.int(0, 200)}.${rng.int(0, 20)}.0`;
  return rt;
}

/** A random problem (f32 unless said) and a candidate variant that is not its default. */
function problemWithAlternative(rt: InterpRuntime, dtype: MatmulProblem["dtype"] = "f32"): { problem: MatmulProblem; variant: string } {
  for (;;) {
    const problem: MatmulProblem = { m: rng.int(8, 90), n: rng.int(8, 90), k: rng.int(8, 90), dtype };
    const p = normalize(problem), caps = capsOf(rt.info);
    const dflt = defaultVariant(p, caps).name;
    const alt = candidateVariants(p, caps).find((v) => v.name !== dflt);
    if (alt) return { problem, variant: alt.name };
  }
}

function record(variant: string, at: string): TuneRecord {
  return { variant, ms: rng.next() + 0.01, tunedShape: "1x64x64x64", at, candidates: [] };
}

/** A shipped data file holding `entries` (cache key → record) as tuning-export would write them. */
function shippedFile(entries: Record<string, TuneRecord>): string {
  const file = join(mkdtempSync(join(tmpdir(), "helios-shipped-")), "matmul-tuning.json");
  writeFileSync(file, JSON.stringify(mergeShipped({ version: SHIPPED_VERSION, entries: {} }, entries).data));
  return file;
}

const config = (shipped: string, cacheDir = mkdtempSync(join(tmpdir(), "helios-tune-"))) => ({ ...readMatmulConfig({ HELIOS_CACHE_DIR: cacheDir }), shippedFile: shipped });

test("driver family and shipped keys", () => {
  const major = rng.int(400, 700);
  assert.equal(driverFamily(`${major}.${rng.int(0, 99)}.1.0`), String(major));
  assert.equal(driverFamily("Mesa"), "Mesa");
  const key = `NVIDIA H|100 ${major}|${major}.12.3.0|f16->f16|m20n20k20/single/NN/plain`;
  assert.equal(shippedKey(key), `NVIDIA H|100 ${major}|${major}|f16->f16|m20n20k20/single/NN/plain`, "a | inside the device name survives");
  assert.equal(shippedKey("not a key"), null);
});

test("a shipped winner serves a class the cache lacks, on the same driver family only, without timing", () => {
  const major = rng.int(400, 700);
  const rt = device(major);
  const { problem, variant } = problemWithAlternative(rt);
  const elsewhere = { ...rt.info, driverVersion: `${major}.${rng.int(201, 300)}.0.0` };
  const file = shippedFile({ [tuneKey(elsewhere, normalize(problem))]: record(variant, new Date().toISOString()) });
  const r = chooseMatmul(rt, problem, { config: config(file), tune: false });
  assert.deepEqual([r.source, r.plan.variant, rt.dispatches], ["shipped", variant, 0]);
  const other = device(major + 1);
  assert.equal(chooseMatmul(other, problem, { config: config(file), tune: false }).source, "default", "another driver family");
});

test("a stale shipped variant is passed over; the cache wins over shipped data", () => {
  const rt = device(rng.int(400, 700));
  const { problem, variant } = problemWithAlternative(rt);
  const key = tuneKey(rt.info, normalize(problem));
  const stale = shippedFile({ [key]: record("simt_no_such_tile", new Date().toISOString()) });
  assert.equal(chooseMatmul(rt, problem, { config: config(stale), tune: false }).source, "default");
  const tuned = chooseMatmul(rt, problem, { config: config(stale), iters: 2, warmup: 0 });
  assert.equal(tuned.source, "tuned", "a stale shipped entry does not stop tuning");
  const dir = mkdtempSync(join(tmpdir(), "helios-tune-"));
  const dflt = defaultVariant(normalize(problem), capsOf(rt.info)).name;
  writeFileSync(join(dir, CACHE_FILE), JSON.stringify({ [key]: record(dflt, "2000-01-01T00:00:00Z") }));
  const file = shippedFile({ [key]: record(variant, new Date().toISOString()) });
  const r = chooseMatmul(rt, problem, { config: config(file, dir), tune: false });
  assert.deepEqual([r.source, r.plan.variant], ["cache", dflt]);
});

test("an epilogue class without an entry takes its plain class's winner (same output dtype, else the inputs'); its own entry wins", () => {
  const rt = device(rng.int(400, 700));
  const { problem, variant } = problemWithAlternative(rt, "f16");
  const epi: MatmulProblem = { ...problem, epilogue: { bias: true, biasDtype: "f32", residual: true } };
  const plainKey = tuneKey(rt.info, normalize(problem));
  const file = shippedFile({ [plainKey]: record(variant, new Date().toISOString()) });
  const r = chooseMatmul(rt, epi, { config: config(file), tune: false });
  assert.deepEqual([r.source, r.plan.variant, rt.dispatches], ["plain", variant, 0]);
  assert.ok(r.plan.problem.epilogue.bias && r.plan.problem.epilogue.residual, "planned with the epilogue");
  // an f32 output (the trainer's projections) falls back to the f16 product's class
  const wide = chooseMatmul(rt, { ...epi, outDtype: "f32" }, { config: config(file), tune: false });
  assert.deepEqual([wide.source, wide.plan.variant, wide.plan.problem.outDtype], ["plain", variant, "f32"]);
  // from the cache too; an entry of the epilogue class itself comes first
  const dir = mkdtempSync(join(tmpdir(), "helios-tune-"));
  const dflt = defaultVariant(normalize(epi), capsOf(rt.info)).name;
  writeFileSync(join(dir, CACHE_FILE), JSON.stringify({ [plainKey]: record(variant, "2000-01-01T00:00:00Z") }));
  assert.deepEqual(chooseMatmul(rt, epi, { config: config(shippedFile({}), dir), tune: false }).source, "plain");
  const own = shippedFile({ [tuneKey(rt.info, normalize(epi))]: record(dflt, new Date().toISOString()), [plainKey]: record(variant, new Date().toISOString()) });
  const r2 = chooseMatmul(rt, epi, { config: config(own), tune: false });
  assert.deepEqual([r2.source, r2.plan.variant], ["shipped", dflt]);
  // no entry for either class: the default
  assert.equal(chooseMatmul(rt, epi, { config: config(shippedFile({})), tune: false }).source, "default");
});

test("a plain f32-output class of 16-bit operands (linear's xT weight gradients) without an entry takes the 16-bit product's winner; its own entry wins", () => {
  const rt = device(rng.int(400, 700));
  const { problem, variant } = problemWithAlternative(rt, "f16");
  const tn: MatmulProblem = { ...problem, transA: true };
  const wide: MatmulProblem = { ...tn, outDtype: "f32" };
  const key = tuneKey(rt.info, normalize(wide)), narrowKey = tuneKey(rt.info, normalize(tn));
  assert.notEqual(key, narrowKey);
  const now = new Date().toISOString();
  const choose = (entries: Record<string, TuneRecord>) => chooseMatmul(rt, wide, { config: config(shippedFile(entries)), tune: false });
  const r = choose({ [narrowKey]: record(variant, now) });
  assert.deepEqual([r.source, r.plan.variant, r.plan.problem.outDtype, rt.dispatches], ["plain", variant, "f32", 0]);
  const dflt = defaultVariant(normalize(wide), capsOf(rt.info)).name;
  const own = choose({ [key]: record(dflt, now), [narrowKey]: record(variant, now) });
  assert.deepEqual([own.source, own.plan.variant], ["shipped", dflt]);
  assert.equal(choose({}).source, "default");
  // the other way round: a 16-bit output never takes an f32 output's winner
  const narrow = chooseMatmul(rt, tn, { config: config(shippedFile({ [key]: record(variant, now) })), tune: false });
  assert.equal(narrow.source, "default");
});

test("a GELU-gradient class is its own: not the bias class's winner of the same shape; without an entry its plain class's", () => {
  const rt = device(rng.int(400, 700));
  const { problem, variant } = problemWithAlternative(rt, "f16");
  const gate: MatmulProblem = { ...problem, epilogue: { geluGrad: true } };
  const key = tuneKey(rt.info, normalize(gate));
  const biasKey = tuneKey(rt.info, normalize({ ...problem, epilogue: { bias: true } }));
  const plainKey = tuneKey(rt.info, normalize(problem));
  assert.match(key, /\/dgelu$/);
  assert.equal(new Set([key, biasKey, plainKey]).size, 3);
  const now = new Date().toISOString();
  const choose = (entries: Record<string, TuneRecord>) => chooseMatmul(rt, gate, { config: config(shippedFile(entries)), tune: false });
  assert.equal(choose({ [biasKey]: record(variant, now) }).source, "default");
  const r = choose({ [plainKey]: record(variant, now) });
  assert.deepEqual([r.source, r.plan.variant, r.plan.problem.epilogue.geluGrad], ["plain", variant, true]);
  const dflt = defaultVariant(normalize(gate), capsOf(rt.info)).name;
  const own = choose({ [key]: record(dflt, now), [plainKey]: record(variant, now) });
  assert.deepEqual([own.source, own.plan.variant], ["shipped", dflt]);
});

test("tuning-export merges cache files: new classes added, newer tunings replace older ones", () => {
  const rt = device(rng.int(400, 700));
  const a = problemWithAlternative(rt), b = problemWithAlternative(rt);
  const [ka, kb] = [a, b].map((x) => tuneKey(rt.info, normalize(x.problem)));
  const dir = mkdtempSync(join(tmpdir(), "helios-export-"));
  const out = join(dir, "matmul-tuning.json");
  const c1 = join(dir, "c1.json"), c2 = join(dir, "c2.json");
  writeFileSync(c1, JSON.stringify({ [ka]: record(a.variant, "2024-01-01T00:00:00Z") }));
  const r1 = exportTuning([c1], out);
  assert.deepEqual([r1.added, r1.replaced, r1.entries], [1, 0, 1]);
  const newer = record("simt_64x64_4x4", "2025-01-01T00:00:00Z"), older = record("simt_64x64_4x4", "2023-01-01T00:00:00Z");
  writeFileSync(c2, JSON.stringify({ [ka]: ka === kb ? newer : older, [kb]: newer }));
  const r2 = exportTuning([c2], out);
  const data = JSON.parse(readFileSync(out, "utf8"));
  assert.equal(data.version, SHIPPED_VERSION);
  assert.equal(r2.entries, ka === kb ? 1 : 2);
  assert.equal(data.entries[shippedKey(ka)!].variant, ka === kb ? newer.variant : a.variant, "an older tuning never replaces a newer one");
  assert.equal(data.entries[shippedKey(kb)!].driver, rt.info.driverVersion);
  // the CLI: same merge, usage error without files
  const cli = resolve("dist/bench/tuning-export.js");
  const ok = spawnSync(process.execPath, [cli, c1, `--out=${out}`], { encoding: "utf8" });
  assert.equal(ok.status, 0, ok.stderr);
  assert.match(ok.stdout, /0 added, 0 replaced/);
  assert.equal(spawnSync(process.execPath, [cli], { encoding: "utf8" }).status, 2);
});

test("the package's shipped data file parses, and every winner in it is a shipped variant", () => {
  const d = loadShipped(readMatmulConfig({}).shippedFile);
  assert.equal(d.version, SHIPPED_VERSION);
  for (const e of Object.values(d.entries)) assert.ok(VARIANTS.has(e.variant), `shipped winner ${e.variant} is not in the variant table`);
});
