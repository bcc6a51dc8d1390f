// The trainer's matmul16 layers through HeliosBackend.linear (HELIOS_TRAIN_FUSED_LINEAR, the
// default: bias and the projections' residual in the matmul epilogue, f16 qkv and f written by
// their products, LayerNorm writing its f16 operand) against the separate passes it replaces (=0):
// - matmul16: losses and gradient norms agree within 2e-3 relative over 6 steps, eager and captured,
//   with dropout (whose projections keep the elementwise pass) and without. Not bit for bit: the
//   products' f32 sums are now rounded once, to f16 after the bias (qkv, f) or not at all (the
//   projections' f32 output), where the separate passes rounded each product to f16 first, and
//   GELU's backward reads f in f16. Those are f16 roundings (2^-11 = 4.9e-4 relative) of some
//   activations. The loss is itself an f16 value under matmul16 (cross-entropy of f16 logits), so
//   2e-3 is two of its ulps; |g| moved by at most 3.6e-4 here (observed, lavapipe). lr is 3e-3: at
//   the tiny configs' usual 3e-2 these little models turn chaotic within 6 steps (|g| then moves
//   by tens of percent between matmul16 and f32 as well), which would test the dynamics, not the op.
// - f32 mode does not use the switch: losses, norms and weights are bit for bit equal.
// - a matmul16 step records 5 dispatches per layer and 1 more fewer (the LayerNorm casts, the qkv
//   bias + cast, the two bias + residual passes, the final LayerNorm's cast), and holds f in f16.
import { test } from "node:test";
import assert from "node:assert/strict";
import { Trainer } from "../train/trainer.js";
import { asTrainBackend } from "../train/backend.js";
import { initHostParams } from "../train/params.js";
import { makeBackend, onNative } from "./backend-helpers.js";
import { TINY_OPT, patternBatch, randomBatch } from "./train-helpers.js";
import type { GPTConfig } from "../train/config.js";
import type { HeliosBackend } from "../ts/backend.js";

// odd widths (edge tiles everywhere) with dropout; a wider multiple-of-4 width (the 4-wide LayerNorm) without
const CFGS: GPTConfig[] = [
  { vocab: 19, blockSize: 8, layers: 3, heads: 3, dim: 15, dropout: 0.1 },
  { vocab: 37, blockSize: 16, layers: 2, heads: 4, dim: 64, dropout: 0 },
];
const on = makeBackend({ trainFusedLinear: true });
const off = makeBackend({ trainFusedLinear: false });

function relClose(a: number, b: number, tol: number, what: string): void {
  if (Number.isNaN(a) && Number.isNaN(b)) return; // a skipped step's norm
  assert.ok(Math.abs(a - b) <= tol * Math.max(1, Math.abs(b)), `${what}: fused ${a}, separate passes ${b}`);
}

function pair(cfg: GPTConfig, capture: boolean, matmul16: boolean, seed: number) {
  const init = initHostParams(cfg, seed);
  const opt = { ...TINY_OPT, lr: 3e-3, warmup: 2 };
  const mk = (H: HeliosBackend) => new Trainer(asTrainBackend(H), cfg, opt, { init, seed, capture, matmul16 });
  return { a: mk(on), b: mk(off) };
}

function batch(cfg: GPTConfig, s: number) {
  const T = cfg.dim === 15 ? 5 : 13;
  return s % 2 ? randomBatch(cfg.vocab, 2, T, s) : patternBatch(cfg.vocab, 2, T, s);
}

for (const [i, cfg] of CFGS.entries()) {
  const tag = `L=${cfg.layers} C=${cfg.dim} dropout ${cfg.dropout}`;
  for (const capture of [false, true]) {
    const skip = capture && !onNative() && "the mock runtime has no captured batches";
    test(`matmul16: fused linear layers track the separate passes (${capture ? "captured" : "eager"}, ${tag})`, { skip }, () => {
      const { a, b } = pair(cfg, capture, true, 31 + i);
      assert.ok(a.model.fused && !b.model.fused, "the switch reaches the model");
      for (let s = 0; s < 6; s++) {
        const x = a.step(batch(cfg, s)), y = b.step(batch(cfg, s));
        assert.equal(x.applied, y.applied, `step ${s + 1}: applied`);
        relClose(x.loss, y.loss, 2e-3, `step ${s + 1} loss`);
        relClose(x.gradNorm, y.gradNorm, 2e-3, `step ${s + 1} |g|`);
      }
      a.dropCapture();
      b.dropCapture();
    });
    // f32 captured: one configuration is enough
    if (!(i > 0 && capture)) test(`f32: the switch changes nothing, bit for bit (${capture ? "captured" : "eager"}, ${tag})`, { skip }, () => {
      const { a, b } = pair(cfg, capture, false, 41 + i);
      assert.ok(!a.model.fused && !b.model.fused);
      for (let s = 0; s < 4; s++) {
        const x = a.step(batch(cfg, s)), y = b.step(batch(cfg, s));
        assert.deepEqual([x.loss, x.gradNorm, x.applied], [y.loss, y.gradNorm, y.applied], `step ${s + 1}`);
      }
      for (const sp of a.specs) {
        assert.deepEqual(Array.from(a.params.get(sp.name)!.data), Array.from(b.params.get(sp.name)!.data), sp.name);
      }
      a.dropCapture();
      b.dropCapture();
    });
  }
}

test("a matmul16 step records 5 dispatches per layer and 1 fewer; f is kept in f16", () => {
  const cfg = CFGS[1];
  const { a, b } = pair(cfg, false, true, 51);
  const per = (tr: Trainer) => {
    const H = tr.B as unknown as HeliosBackend;
    tr.step(patternBatch(cfg.vocab, 2, 13, 0));
    H.syncGpu();
    const d0 = H.stats().dispatches;
    tr.step(patternBatch(cfg.vocab, 2, 13, 1));
    return H.stats().dispatches - d0;
  };
  const f = per(a), s = per(b);
  assert.equal(s - f, 5 * cfg.layers + 1, `${s} -> ${f} dispatches`);
  for (const [tr, dtype] of [[a, "f16"], [b, "f32"]] as const) {
    const H = tr.B as unknown as HeliosBackend & { gelu: HeliosBackend["gelu"] };
    const seen: string[] = [];
    H.gelu = (t) => {
      seen.push(t.dtype);
      return Object.getPrototypeOf(H).gelu.call(H, t);
    };
    try {
      tr.step(patternBatch(cfg.vocab, 2, 13, 2));
    } finally {
      delete (H as Partial<typeof H>).gelu;
    }
    assert.deepEqual(seen, Array(cfg.layers).fill(dtype), "GELU's input f (kept for its backward)");
  }
});

test("HELIOS_TRAIN_FUSED_LINEAR parsing; f32, or a backend without linear(), never takes the fused path", async () => {
  const { readConfig } = await import("../ts/config.js");
  assert.equal(readConfig({}).trainFusedLinear, true);
  assert.equal(readConfig({ HELIOS_TRAIN_FUSED_LINEAR: "0" }).trainFusedLinear, false);
  assert.equal(readConfig({ HELIOS_TRAIN_FUSED_LINEAR: "off" }).trainFusedLinear, false);
  assert.throws(() => readConfig({ HELIOS_TRAIN_FUSED_LINEAR: "fast" }), (e: Error & { code?: string }) => e.code === "ERR_HELIOS_INVALID_ARGUMENT" && /HELIOS_TRAIN_FUSED_LINEAR=fast/.test(e.message));
  assert.equal(on.fusedLinear, true);
  assert.equal(off.fusedLinear, false);
  const { GPT } = await import("../train/model.js");
  assert.equal(new GPT(asTrainBackend(on), CFGS[1], { matmul16: true }).fused, true);
  const noLinear = Object.create(on, { linear: { value: undefined } }) as HeliosBackend;
  assert.equal(new GPT(asTrainBackend(noLinear), CFGS[1], { matmul16: true }).fused, false, "no linear(): the separate passes");
  assert.equal(new GPT(asTrainBackend(on), CFGS[1], {}).fused, false, "f32");
});
