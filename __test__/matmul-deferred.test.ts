// When HeliosBackend tunes matmul shape classes (HELIOS_AUTOTUNE, ts/ops/matmul.ts): deferred (the
// default) never times anything inside a product call and tunes on tunePending(); eager tunes on
// a class's first eager use. Lavapipe is presented as a discrete GPU so the tuner runs for real
// (SIMT candidates); a spy on batchProfile (the tuner's timed batches: the backend's own work never
// profiles) tells when tuning ran.
import { test } from "node:test";
import assert from "node:assert/strict";
import { existsSync, mkdtempSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { HeliosBackend } from "../ts/backend.js";
import { onNative, testRuntime } from "./backend-helpers.js";
import { Rng, randTensor, assertClose } from "./harness.js";
import * as N from "./ref/nn.js";
import { readMatmulConfig } from "../ts/kernels/matmul/config.js";

const TOL = { atol: 1e-4, rtol: 1e-4 };
const native = { skip: !onNative() && "needs the native runtime" };

/** A GPU-like backend on the test runtime counting profiled (tuning) batches, with its own cache dir and HELIOS_AUTOTUNE=mode. */
async function withSpiedGpu(mode: string | undefined, body: (G: HeliosBackend, profiled: () => number, dir: string) => void | Promise<void>): Promise<void> {
  const dir = mkdtempSync(join(tmpdir(), "helios-deferred-"));
  const saved = { cache: process.env.HELIOS_CACHE_DIR, tune: process.env.HELIOS_AUTOTUNE };
  process.env.HELIOS_CACHE_DIR = dir;
  if (mode === undefined) delete process.env.HELIOS_AUTOTUNE;
  else process.env.HELIOS_AUTOTUNE = mode;
  let profiles = 0;
  try {
    const base = testRuntime() as unknown as Record<string, (...a: unknown[]) => unknown>;
    const gpuLike = {
      ...base,
      getDeviceInfo: () => ({ ...(base.getDeviceInfo() as object), deviceType: "discrete-gpu" }),
      batchProfile: (...a: unknown[]) => { profiles++; return base.batchProfile(...a); },
    };
    await body(new HeliosBackend({ runtime: gpuLike as never, validation: true }), () => profiles, dir);
  } finally {
    for (const [k, v] of [["HELIOS_CACHE_DIR", saved.cache], ["HELIOS_AUTOTUNE", saved.tune]] as const) {
      if (v === undefined) delete process.env[k];
      else process.env[k] = v;
    }
  }
}

/** Random operands of three shape classes (sizes drawn per run), with their fp64 products. */
function problems(rng: Rng) {
  const dim = (lo: number) => rng.int(lo, lo + 24);
  return [0, 1, 2].map((i) => {
    const m = dim(8 << i), k = dim(16 << i), n = dim(40);
    const a = randTensor(rng, [m, k], "f32"), b = randTensor(rng, [k, n], "f32");
    return { a, b, want: N.matmul(a.ref, b.ref), name: `${m}x${k}x${n}` };
  });
}

const cacheEntries = (dir: string) =>
  existsSync(join(dir, "matmul-tune-v1.json")) ? Object.entries(JSON.parse(readFileSync(join(dir, "matmul-tune-v1.json"), "utf8")) as Record<string, { variant: string }>) : [];

test("HELIOS_AUTOTUNE: deferred (default, 1), eager, 0; anything else names the accepted values", () => {
  assert.equal(readMatmulConfig({}).tuneMode, "deferred");
  assert.equal(readMatmulConfig({ HELIOS_AUTOTUNE: "1" }).tuneMode, "deferred");
  assert.equal(readMatmulConfig({ HELIOS_AUTOTUNE: " Eager " }).tuneMode, "eager");
  assert.deepEqual([readMatmulConfig({ HELIOS_AUTOTUNE: "off" }).tuneMode, readMatmulConfig({ HELIOS_AUTOTUNE: "0" }).autotune], ["off", false]);
  assert.throws(() => readMatmulConfig({ HELIOS_AUTOTUNE: "lazy" }),
    (e: Error & { code?: string }) => e.code === "ERR_HELIOS_INVALID_ARGUMENT" && /HELIOS_AUTOTUNE=lazy: expected deferred, eager, 0 or 1/.test(e.message));
});

test("deferred: a training-style loop never tunes inside its calls; tunePending tunes what it met, values unchanged", native, async () => {
  await withSpiedGpu(undefined, (G, profiled, dir) => {
    const rng = new Rng(4000 + Math.floor(Math.random() * 1000));
    const ps = problems(rng);
    assert.equal(G.tunesMatmuls, false, "no warm-up pass needed before a capture");
    for (let step = 0; step < 3; step++) {
      for (const p of ps) assertClose(G.matmul(p.a.td, p.b.td), p.want, TOL, `untuned ${p.name}, step ${step}`);
      G.syncGpu();
    }
    assert.equal(profiled(), 0, "no timed batch inside the loop");
    assert.deepEqual(cacheEntries(dir), []);
    const r = G.tunePending();
    assert.equal(r.classes, new Set(cacheEntries(dir).map(([k]) => k)).size);
    assert.ok(r.classes >= 1 && r.tuned === r.classes, JSON.stringify(r));
    assert.ok(profiled() > 0, "tunePending times the candidates");
    const after = profiled();
    for (const p of ps) assertClose(G.matmul(p.a.td, p.b.td), p.want, TOL, `tuned ${p.name}`);
    G.syncGpu();
    assert.equal(profiled(), after, "tuned classes are not tuned again");
    assert.equal(G.tunePending().classes, 0);
  });
});

test("deferred: classes met inside a capture are queued; tunePending is refused inside one", native, async () => {
  await withSpiedGpu("deferred", (G, profiled, dir) => {
    const rng = new Rng(4100 + Math.floor(Math.random() * 1000));
    const [p] = problems(rng);
    const a = G.fromArray([...p.a.ref.data], p.a.ref.shape), b = G.fromArray([...p.b.ref.data], p.b.ref.shape);
    G.beginCapture();
    const c = G.matmul(a, b);
    assert.throws(() => G.tunePending(), (e: Error & { code?: string }) => e.code === "ERR_HELIOS_CAPTURE" && /tunePending/.test(e.message));
    const cap = G.endCapture(c);
    G.replay(cap);
    assertClose(c, p.want, TOL, "captured product, default plan");
    assert.equal(profiled(), 0);
    assert.equal(G.tunePending().classes, 1, "the class met in the capture was queued");
    assert.equal(cacheEntries(dir).length, 1);
    G.destroyCapture(cap);
  });
});

test("eager (today's behaviour for A/B): the first eager product tunes its class inside the call", native, async () => {
  await withSpiedGpu("eager", (G, profiled, dir) => {
    const rng = new Rng(4200 + Math.floor(Math.random() * 1000));
    const [p] = problems(rng);
    assert.equal(G.tunesMatmuls, true);
    assertClose(G.matmul(p.a.td, p.b.td), p.want, TOL, `eager ${p.name}`);
    assert.ok(profiled() > 0, "tuned inside the call");
    assert.equal(cacheEntries(dir).length, 1);
    assert.equal(G.tunePending().classes, 0, "nothing deferred");
  });
});
