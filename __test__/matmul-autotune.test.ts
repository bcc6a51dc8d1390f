import assert from "node:assert/strict";
import { existsSync, mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { test } from "node:test";
import { CACHE_FILE, capsOf, chooseMatmul, duplicatePlans, knownRecord, tuneKey, passOrder, roundOrder, shapeClass, timeInRounds, TUNE_ROUNDS, TURN_MS, turnLength } from "../ts/kernels/matmul/autotune.js";
import { readMatmulConfig } from "../ts/kernels/matmul/config.js";
import { MatmulFixture } from "../ts/kernels/matmul/fixture.js";
import { candidateVariants, defaultVariant, planMatmul } from "../ts/kernels/matmul/plan.js";
import type { MatmulProblem } from "../ts/kernels/matmul/problem.js";
import { normalize } from "../ts/kernels/matmul/problem.js";
import { InterpRuntime } from "./support/interp-runtime.js";

const PROB = { m: 20, n: 24, k: 40, dtype: "f32" as const };

/** The interpreter with one variant's kernels producing wrong results (to test the gate). */
class BrokenRuntime extends InterpRuntime {
  constructor(private readonly broken?: string) { super(); }
  override recordDispatch(p: number, bufs: number[], groups: number[], push?: ArrayBufferView) {
    super.recordDispatch(p, bufs, groups, push);
    const name = (this as unknown as { pipes: Map<number, { desc: { name: string } }> }).pipes.get(p)!.desc.name;
    if (this.broken && name.includes(this.broken)) this.uploadBuffer(bufs[2], new Float32Array(this.readBuffer(bufs[2]).byteLength / 4).fill(1234));
  }
}

test("tunes once, persists, then reuses the cache", () => {
  const dir = mkdtempSync(join(tmpdir(), "helios-tune-"));
  const cfg = readMatmulConfig({ HELIOS_CACHE_DIR: dir });
  const rt = new InterpRuntime({ ...new InterpRuntime().info, coopMatSupported: false });
  const first = chooseMatmul(rt, PROB, { config: cfg, iters: 2, warmup: 0 });
  assert.equal(first.source, "tuned");
  assert.ok(first.record && first.record.candidates.length >= 2);
  assert.ok(existsSync(join(dir, CACHE_FILE)));
  const cache = JSON.parse(readFileSync(join(dir, CACHE_FILE), "utf8"));
  const key = Object.keys(cache)[0];
  assert.ok(key.includes(shapeClass(normalize(PROB))));
  assert.equal(cache[key].variant, first.plan.variant);
  const before = rt.dispatches;
  const second = chooseMatmul(rt, PROB, { config: cfg });
  assert.equal(second.source, "cache");
  assert.equal(second.plan.variant, first.plan.variant);
  assert.equal(rt.dispatches, before, "a cache hit times nothing");
});

test("knownRecord: the record chooseMatmul would plan by, without planning (none, stale, or the cache's)", () => {
  const dir = mkdtempSync(join(tmpdir(), "helios-tune-"));
  const cfg = readMatmulConfig({ HELIOS_CACHE_DIR: dir });
  const rt = new InterpRuntime({ ...new InterpRuntime().info, coopMatSupported: false });
  assert.equal(knownRecord(rt, PROB, cfg), undefined, "no record: nothing (no default plan is made)");
  const key = tuneKey(rt.getDeviceInfo(), normalize(PROB));
  const rec = { variant: "simt_64x64_4x4", ms: 0.5, tunedShape: "1x20x24x40", at: "2026-11-27T00:00:00Z", candidates: [] };
  writeFileSync(join(dir, CACHE_FILE), JSON.stringify({ [key]: { ...rec, variant: "no_such_tile" } }));
  assert.equal(knownRecord(rt, PROB, cfg), undefined, "a stale variant does not count");
  writeFileSync(join(dir, CACHE_FILE), JSON.stringify({ [key]: rec }));
  assert.deepEqual(knownRecord(rt, PROB, cfg), rec);
  assert.equal(chooseMatmul(rt, PROB, { config: cfg, tune: false }).record?.variant, rec.variant, "the record chooseMatmul plans by");
  assert.equal(knownRecord(rt, { ...PROB, dtype: "f16" }, cfg), undefined, "another class");
  assert.equal(knownRecord(rt, PROB, readMatmulConfig({ HELIOS_CACHE_DIR: dir, HELIOS_AUTOTUNE: "0" })), undefined, "no records with tuning off");
});

test("a candidate that fails the correctness gate is never chosen", () => {
  const dir = mkdtempSync(join(tmpdir(), "helios-tune-"));
  const rt = new BrokenRuntime("64x64x16");
  const info = { ...rt.info, coopMatSupported: false };
  Object.assign(rt.info, info);
  const r = chooseMatmul(rt, PROB, { config: readMatmulConfig({ HELIOS_CACHE_DIR: dir }), iters: 2, warmup: 0 });
  assert.match(r.plan.variant, /^simt_128x128_8x(8_sm|16_t128_sm)$/);
  const bad = r.record!.candidates.find((c) => c.variant === "simt_64x64_4x4");
  assert.ok(bad && bad.ms === null && /gate/.test(bad.error ?? ""), JSON.stringify(r.record));
});

test("HELIOS_MATMUL_VARIANT forces, HELIOS_AUTOTUNE=0 uses the default", () => {
  const rt = new InterpRuntime();
  const forced = chooseMatmul(rt, PROB, { config: readMatmulConfig({ HELIOS_MATMUL_VARIANT: "simt_128x128_8x16_t128_sm", HELIOS_CACHE_DIR: "/nonexistent" }) });
  assert.equal(forced.source, "forced");
  assert.equal(forced.plan.variant, "simt_128x128_8x16_t128_sm");
  const dflt = chooseMatmul(rt, PROB, { config: readMatmulConfig({ HELIOS_AUTOTUNE: "0" }) });
  assert.equal(dflt.source, "default");
  assert.equal(rt.dispatches, 0);
  assert.throws(() => chooseMatmul(rt, PROB, { config: readMatmulConfig({ HELIOS_MATMUL_VARIANT: "nope" }) }), /unknown/);
  // a forced variant that cannot run this problem (bf16x3 split on f16 inputs) falls back
  const fb = chooseMatmul(rt, { ...PROB, dtype: "f16" }, { config: readMatmulConfig({ HELIOS_MATMUL_VARIANT: "cm3_64x64x32_w2x2", HELIOS_AUTOTUNE: "0" }) });
  assert.equal(fb.source, "default");
  assert.throws(() => readMatmulConfig({ HELIOS_AUTOTUNE: "maybe" }), /HELIOS_AUTOTUNE/);
  assert.throws(() => readMatmulConfig({ HELIOS_MATMUL_ALIGNED: "2" }), /HELIOS_MATMUL_ALIGNED/);
  assert.throws(() => readMatmulConfig({ HELIOS_MATMUL_STORE: "fast" }), /HELIOS_MATMUL_STORE=fast: expected wide, coopmat or staged4/);
  assert.equal(readMatmulConfig({}).outStore, "wide");
  assert.equal(readMatmulConfig({ HELIOS_MATMUL_STORE: "coopmat", HELIOS_MATMUL_ALIGNED: "0" }).outStore, "coopmat");
  assert.equal(readMatmulConfig({ HELIOS_MATMUL_ALIGNED: "0" }).aligned, false);
  assert.equal(readMatmulConfig({}).presplit, true);
  assert.equal(readMatmulConfig({ HELIOS_MATMUL_PRESPLIT: "0" }).presplit, false);
  assert.throws(() => readMatmulConfig({ HELIOS_MATMUL_PRESPLIT: "yes please" }), /HELIOS_MATMUL_PRESPLIT/);
});

test("config defaults: XDG cache dir", () => {
  assert.equal(readMatmulConfig({ XDG_CACHE_HOME: "/x" }).cacheDir, "/x/helios");
  assert.equal(readMatmulConfig({ HELIOS_CACHE_DIR: "/y", XDG_CACHE_HOME: "/x" }).cacheDir, "/y");
  assert.equal(readMatmulConfig({}).autotune, true);
});

test("the H100-run-15 winners are tuning candidates (f16-accumulator-only tiles with accF16 only) and the large-shape default", () => {
  const caps = { coopMatSupported: true, bf16Supported: true, f16Supported: true, subgroupSize: 32, maxSharedMemoryBytes: 49152 };
  const names = (p: Parameters<typeof normalize>[0]) => candidateVariants(normalize(p), caps).map((v) => v.name);
  const f32acc = names({ m: 4096, n: 4096, k: 4096, dtype: "f16" });
  for (const v of ["cm_128x256x16_w2x4_v128_pf2", "cm_128x256x32_w2x4_v128_s1", "cm_256x128x32_w4x2_v128_s1", "cm_128x128x64_w2x4_v128_s1", "cm_128x256x16_w2x4"]) assert.ok(f32acc.includes(v), v);
  assert.ok(!f32acc.includes("cm_128x256x16_w2x2"), "4×8 accumulators per subgroup: f16 accumulation only");
  assert.ok(names({ m: 4096, n: 4096, k: 4096, dtype: "f16", accF16: true }).includes("cm_256x256x32_w4x2_v128_s1"));
  // HELIOS_AUTOTUNE=0: run 15's fastest tile for shapes that fill the GPU with 128×256 tiles
  assert.equal(defaultVariant(normalize({ m: 4096, n: 4096, k: 4096, dtype: "f16" }), caps).name, "cm_128x256x32_w2x4_v128_s1");
  // medium grids: the 4-subgroup single-stage 128×128 tile (session 5)
  assert.equal(defaultVariant(normalize({ m: 1536, n: 1536, k: 1536, dtype: "f16" }), caps).name, "cm_128x128x32_w2x2_v128_s1");
  // deeper split-K candidates for a weight-gradient product (M·N under one wave, K = tokens)
  const dW = names({ m: 768, n: 768, k: 16384, dtype: "f16", transA: true });
  for (const v of ["cm_128x128x32_w2x2_v128_s1", "cm_128x128x32_w2x2_v128_s1_sk4", "cm_128x128x32_w2x2_v128_s1_sk8"]) assert.ok(dW.includes(v), v);
  assert.ok(!names({ m: 4096, n: 4096, k: 4096, dtype: "f16" }).some((v) => v.includes("_sk")));
  // f32: the presplit twins of the bf16 tiles race SIMT and the in-kernel split; split-K is sized
  // on the tripled K
  const f32 = names({ m: 4096, n: 4096, k: 4096, dtype: "f32" });
  for (const v of ["x3_cm_128x256x32_w2x4_v128_s1", "x3_cm_128x128x32_w2x2_v128_s1", "simt_128x128_8x8_sm", "simt_128x128_8x16_t128_sm", "cm3_64x64x32_w2x2"]) assert.ok(f32.includes(v), v);
  const simtCaps = { ...caps, coopMatSupported: false };
  assert.equal(defaultVariant(normalize({ m: 4096, n: 4096, k: 4096, dtype: "f32" }), simtCaps).name, "simt_128x128_8x8_sm");
  assert.match(defaultVariant(normalize({ m: 256, n: 256, k: 4096, dtype: "f32" }), simtCaps).name, /^simt_64x64_4x4(_sk\d+)?$/);
  assert.ok(!f32.some((v) => v.includes("_kp")), "no pair-staged presplit twin in the race");
  assert.ok(!f32.some((v) => v.startsWith("cm_")), "no f16-tile (low-precision) f32 candidates");
  assert.ok(names({ m: 768, n: 768, k: 16384, dtype: "f32", transA: true }).includes("x3_cm_128x128x32_w2x2_v128_s1_sk4"));
  assert.ok(!candidateVariants(normalize({ m: 4096, n: 4096, k: 4096, dtype: "f32" }), caps, { presplit: false }).some((v) => v.kind === "presplit"));
  // f32 over full waves of 128×256 tiles: x3 of the peeled 128×128 tile, not of the big tile
  // (H100 call 5, session 18: 1.35 vs 6.77 ms at 4096³); stream-K shapes keep the big tile's twin
  assert.equal(defaultVariant(normalize({ m: 4096, n: 4096, k: 4096, dtype: "f32" }), caps).name, "x3_cm_128x128x32_w2x2_v128_s1_pl");
  assert.equal(defaultVariant(normalize({ m: 8192, n: 8192, k: 8192, dtype: "f32" }), caps).name, "x3_cm_128x128x32_w2x2_v128_s1_pl");
  assert.equal(defaultVariant(normalize({ m: 3072, n: 3072, k: 3072, dtype: "f32" }), caps).name, "x3_cm_128x256x32_w2x4_v128_s1_stk");
});

/**
 * The interpreter reporting synthetic GPU times: a per-kernel cost (ns), times a clock factor that
 * grows 2 % with every dispatch it profiles (a GPU slowing down while it tunes).
 */
class DriftRuntime extends BrokenRuntime {
  private profiled = 0;
  constructor(private readonly cost: (kernel: string) => number, broken?: string) { super(broken); }
  override batchProfile() {
    return super.batchProfile().map((e) => ({ ...e, gpuNs: this.cost(e.label) * (1 + 0.02 * this.profiled++) }));
  }
}

test("turns: serpentine passes, rotated; about TURN_MS of products per turn", () => {
  assert.deepEqual([0, 1, 2, 3].map((r) => roundOrder(3, r)), [[0, 1, 2], [2, 1, 0], [0, 1, 2], [2, 1, 0]]);
  // each candidate takes every position in turn
  assert.deepEqual([0, 1, 2, 3, 4, 5].map((p) => passOrder(3, p)), [[0, 1, 2], [2, 1, 0], [1, 2, 0], [1, 0, 2], [2, 0, 1], [0, 2, 1]]);
  for (let p = 0; p < 12; p++) assert.deepEqual([...passOrder(5, p)].sort(), [0, 1, 2, 3, 4]);
  assert.equal(TUNE_ROUNDS, 4);
  assert.equal(TURN_MS, 2);
  assert.equal(turnLength(2.6, 8), 1); // 8192³: product by product
  assert.equal(turnLength(0.33, 8), 7); // 4096³
  assert.equal(turnLength(0.05, 8), 8); // 2048³: capped at iters
  assert.equal(turnLength(0, 8), 8);
});

test("long products take turns one by one, so a clock drifting during tuning picks the truly faster tile", () => {
  // simt_64x64_4x4 is 5 % faster; 2.6 ms products take turns of one product, and with 2 % of drift
  // per product both see the same clocks (turns of a round's length would put 8 % between them);
  // the 128-thread tile fails the gate, so two candidates are timed
  const rt = new DriftRuntime((k) => (k.includes("64x64") ? 2.47e6 : 2.6e6), "_t128");
  Object.assign(rt.info, { coopMatSupported: false });
  const dir = mkdtempSync(join(tmpdir(), "helios-tune-"));
  const r = chooseMatmul(rt, PROB, { config: readMatmulConfig({ HELIOS_CACHE_DIR: dir }), iters: 2, warmup: 0 });
  const names = r.record!.candidates.map((c) => c.variant);
  assert.deepEqual(names.sort(), ["simt_128x128_8x16_t128_sm", "simt_128x128_8x8_sm", "simt_64x64_4x4"]);
  assert.equal(r.plan.variant, "simt_64x64_4x4", JSON.stringify(r.record));
  const ms = Object.fromEntries(r.record!.candidates.map((c) => [c.variant, c.ms!]));
  const ratio = ms.simt_64x64_4x4 / ms.simt_128x128_8x8_sm;
  assert.ok(Math.abs(ratio - 0.95) < 0.01, `measured ratio ${ratio} (${JSON.stringify(ms)})`);
});

test("a timed round is one batch in which the candidates take turns: of one product when long, of several when short", () => {
  // the profiled batches' kernel sequences, as the tuner recorded them
  class Recording extends InterpRuntime {
    batches: string[][] = [];
    constructor(private readonly ns: number) { super(); }
    override batchProfile() {
      const prof = super.batchProfile().map((e) => ({ ...e, gpuNs: this.ns }));
      this.batches.push(prof.map((e) => e.label));
      return prof;
    }
  }
  for (const [ns, turn] of [[2.6e6, 1], [0.9e6, 3]] as const) {
    const rt = new Recording(ns);
    Object.assign(rt.info, { coopMatSupported: false });
    const r = chooseMatmul(rt, PROB, { config: readMatmulConfig({ HELIOS_CACHE_DIR: mkdtempSync(join(tmpdir(), "helios-tune-")) }), iters: 3, warmup: 1 });
    const n = r.record!.candidates.length;
    assert.ok(n >= 2);
    const rounds = rt.batches.slice(-TUNE_ROUNDS);
    for (let q = 0; q < TUNE_ROUNDS; q++) {
      // 1 untimed pass, then enough passes for 3 timed products, serpentine from the round's own pass
      const passes = 1 + Math.ceil(3 / turn);
      const expected = Array.from({ length: passes }, (_, p) => passOrder(n, q + p)).flat().flatMap((i) => Array(turn).fill(i));
      assert.equal(rounds[q].length, expected.length, `turn ${turn}, round ${q}`);
      // candidate i is whichever kernel the tuner listed i-th: the pattern holds up to renaming
      const kernelOf = new Map<number, string>();
      expected.forEach((i, pos) => {
        if (!kernelOf.has(i)) kernelOf.set(i, rounds[q][pos]);
        assert.equal(rounds[q][pos], kernelOf.get(i), `turn ${turn}, round ${q}, position ${pos}`);
      });
      assert.equal(new Set(kernelOf.values()).size, n, `turn ${turn}, round ${q}: one kernel per candidate`);
    }
  }
});

test("timeInRounds leaves out an entry that throws and times the others; without a failed callback it throws", () => {
  const rt = new DriftRuntime(() => 1000);
  Object.assign(rt.info, { coopMatSupported: false });
  const caps = capsOf(rt.info);
  const p = normalize(PROB);
  const fx = new MatmulFixture(rt, p, 5);
  try {
    const plan = planMatmul(p, caps, { variant: "simt_64x64_4x4" });
    const ok = () => ({ plan, bufs: fx.buffers(plan) });
    const bad = () => ({ plan, bufs: { ...fx.buffers(plan), C: undefined } });
    const failed: number[] = [];
    const rounds = timeInRounds(rt, [ok, bad, ok], { warmup: 0, iters: 1 }, (i, err) => {
      failed.push(i);
      assert.match(String(err), /no buffer bound for 'C'/);
    });
    assert.deepEqual(failed, [1]);
    assert.deepEqual(rounds.map((r) => r.length), [TUNE_ROUNDS, 0, TUNE_ROUNDS]);
    assert.ok(rounds[0].every((x) => x > 0));
    assert.throws(() => timeInRounds(rt, [ok, bad], { warmup: 0, iters: 1 }), /no buffer bound for 'C'/);
  } finally {
    fx.destroy();
  }
});

test("a twin whose form does not apply plans another candidate's kernels and is not timed twice", () => {
  const caps = { ...new InterpRuntime().info };
  const names = ["cm_128x256x32_w2x4_v128_s1", "cm_128x256x32_w2x4_v128_s1_kpr", "cm_128x256x32_w2x4_v128_s1_kpr_b2", "cm_128x256x32_w2x4_v128_s1_kpr_a2", "cm_128x256x32_w2x4_v128_s1_sk2"];
  const plansOf = (p: MatmulProblem) => names.map((v) => planMatmul(p, caps, { variant: v }));
  // edge tiles: no pairs, and no second stage beside the f32 edge tile and the f16 output tile
  assert.deepEqual([...duplicatePlans(names, plansOf({ m: 1000, n: 1000, k: 1000, dtype: "f16" }))], [
    ["cm_128x256x32_w2x4_v128_s1_kpr", "cm_128x256x32_w2x4_v128_s1"], ["cm_128x256x32_w2x4_v128_s1_kpr_b2", "cm_128x256x32_w2x4_v128_s1"],
    ["cm_128x256x32_w2x4_v128_s1_kpr_a2", "cm_128x256x32_w2x4_v128_s1"],
  ]);
  // whole tiles: every form applies (B's [n][k] stages do not fit in NT: that twin is _kpr)
  assert.equal(duplicatePlans(names, plansOf({ m: 1024, n: 1024, k: 1024, dtype: "f16" })).size, 0);
  assert.deepEqual([...duplicatePlans(names, plansOf({ m: 1024, n: 1024, k: 1024, dtype: "f16", transB: true }))], [["cm_128x256x32_w2x4_v128_s1_kpr_b2", "cm_128x256x32_w2x4_v128_s1_kpr"]]);
});
