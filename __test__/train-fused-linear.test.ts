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
// - GELU's backward in the epilogue of the product before it (GPT.fusedGeluGrad: df = (dy·W_proj)
//   ⊙ gelu'(f) in f16 from linear's geluGradOf) against geluBackward and the cast after that
//   product, everything else fused alike: the loss is the same value and every gradient tensor
//   within 2e-3 relative Frobenius (dy·W is no longer rounded to f16 before the product with
//   gelu'(f): observed 7.1e-4, about one f16 ulp); losses and |g| within 2e-3 over 6 steps, eager
//   and captured.
// - LayerNorm backward adding the residual gradient and writing dx's f16 copy in its pass
//   (GPT.fusedLnGrad: layerNormBackward's opts) against the add after it and the cast in the next
//   linear layer's backward, everything else fused alike: bit for bit (losses, |g|, every gradient
//   tensor, weights after 4 steps), eager and captured, with dropout (only the add fused: the mask
//   multiply reads dx) and without. The add and cast are exact functions of the same f32 values.
// - f32: the switch turns on only the operand splits made ahead (GPT.f32Fused), where f32 products
//   split their operands (not the mock, not lavapipe): here losses, norms and weights are bit for
//   bit equal. __test__/train-split-ahead.test.ts runs them where they split.
// - a matmul16 step records 6 dispatches per layer and 1 more fewer (the LayerNorm casts, the qkv
//   bias + cast, the two bias + residual passes, GELU's backward and cast, the final LayerNorm's
//   cast), holds f in f16, and gets df from one linear() with geluGradOf per layer; the
//   LayerNorm backward options take out the residual stream's elementwise kernels as well (below).
import { test } from "node:test";
import assert from "node:assert/strict";
import { Trainer } from "../train/trainer.js";
import { asTrainBackend, Scope } from "../train/backend.js";
import { initHostParams } from "../train/params.js";
import { assertSameOrRounding, bitExactDevice, makeBackend, onNative } from "./backend-helpers.js";
import { TINY_OPT, patternBatch, randomBatch } from "./train-helpers.js";
import { values } from "./harness.js";
import type { GPTConfig } from "../train/config.js";
import type { HeliosBackend } from "../ts/backend.js";
import type { TensorData } from "../ts/types.js";
import { size } from "../ts/shape.js";

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

/**
 * Trainers from one init: on the fused backend and on the separate passes, or (`only`) both on
 * the fused backend, b's model with that one fusion off (its own unfused branch): GELU's backward
 * after the product, or LayerNorm backward without its options (the residual add and the cast apart).
 */
function pair(cfg: GPTConfig, capture: boolean, matmul16: boolean, seed: number, only: "gelu" | "ln" | null = null) {
  const init = initHostParams(cfg, seed);
  const opt = { ...TINY_OPT, lr: 3e-3, warmup: 2 };
  const mk = (H: HeliosBackend) => new Trainer(asTrainBackend(H), cfg, opt, { init, seed, capture, matmul16 });
  if (!only) return { a: mk(on), b: mk(off) };
  const b = mk(on);
  Object.defineProperty(b.model, only === "gelu" ? "fusedGeluGrad" : "fusedLnGrad", { value: false });
  return { a: mk(on), b };
}

/** ‖a − b‖ / ‖b‖ over a tensor's elements. */
function relFro(a: ArrayLike<number | bigint>, b: ArrayLike<number | bigint>): number {
  let num = 0, den = 0;
  for (let i = 0; i < b.length; i++) {
    num += (Number(a[i]) - Number(b[i])) ** 2;
    den += Number(b[i]) ** 2;
  }
  return Math.sqrt(num / den);
}

function batch(cfg: GPTConfig, s: number) {
  const T = cfg.dim === 15 ? 5 : 13;
  return s % 2 ? randomBatch(cfg.vocab, 2, T, s) : patternBatch(cfg.vocab, 2, T, s);
}

/** 6 steps of a and b on the same batches: the same steps applied, losses and |g| within 2e-3. */
function track(cfg: GPTConfig, { a, b }: { a: Trainer; b: Trainer }): void {
  for (let s = 0; s < 6; s++) {
    const x = a.step(batch(cfg, s)), y = b.step(batch(cfg, s));
    assert.equal(x.applied, y.applied, `step ${s + 1}: applied`);
    relClose(x.loss, y.loss, 2e-3, `step ${s + 1} loss`);
    relClose(x.gradNorm, y.gradNorm, 2e-3, `step ${s + 1} |g|`);
  }
  a.dropCapture();
  b.dropCapture();
}

for (const [i, cfg] of CFGS.entries()) {
  const tag = `L=${cfg.layers} C=${cfg.dim} dropout ${cfg.dropout}`;
  for (const capture of [false, true]) {
    const skip = capture && !onNative() && "the mock runtime has no captured batches";
    test(`matmul16: fused linear layers track the separate passes (${capture ? "captured" : "eager"}, ${tag})`, { skip }, () => {
      const p = pair(cfg, capture, true, 31 + i);
      assert.ok(p.a.model.fused && !p.b.model.fused, "the switch reaches the model");
      track(cfg, p);
    });
    // f32 captured: one configuration is enough
    if (!(i > 0 && capture)) test(`f32: the switch changes nothing, bit for bit (${capture ? "captured" : "eager"}, ${tag})`, { skip }, () => {
      const { a, b } = pair(cfg, capture, false, 41 + i);
      assert.ok(!a.model.fused && !a.model.fusedGeluGrad && !b.model.f32Fused);
      assert.equal(a.model.f32Fused, on.f32Splits);
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
  test(`matmul16: GELU's backward in the product's epilogue gives geluBackward's gradients (${tag})`, () => {
    const { a, b } = pair(cfg, false, true, 61 + i, "gelu");
    assert.ok(a.model.fusedGeluGrad && !b.model.fusedGeluGrad && a.model.fused && b.model.fused);
    const hb = randomBatch(cfg.vocab, 2, cfg.dim === 15 ? 5 : 13, 7);
    const sa = new Scope(a.B), sb = new Scope(b.B);
    try {
      const x = a.lossAndGrads(hb, sa), y = b.lossAndGrads(hb, sb);
      assert.equal(Number(x.loss.data[0]), Number(y.loss.data[0]), "the forward is the same");
      assert.equal(x.grads.size, y.grads.size);
      for (const [name, g] of x.grads) {
        const e = relFro(values(g), values(y.grads.get(name)!));
        assert.ok(e <= 2e-3, `${name}: relative error ${e}`);
      }
    } finally {
      sa.releaseAll();
      sb.releaseAll();
    }
  });
  for (const capture of [false, true]) {
    const skip = capture && !onNative() && "the mock runtime has no captured batches";
    test(`matmul16: GELU's backward in the epilogue tracks geluBackward over 6 steps (${capture ? "captured" : "eager"}, ${tag})`, { skip }, () => {
      track(cfg, pair(cfg, capture, true, 71 + i, "gelu"));
    });
  }
}

for (const [i, cfg] of CFGS.entries()) {
  const tag = `L=${cfg.layers} C=${cfg.dim} dropout ${cfg.dropout}`;
  for (const capture of [false, true]) {
    const skip = capture && !onNative() && "the mock runtime has no captured batches";
    test(`matmul16: LayerNorm backward with the residual add and the f16 copy in its pass is bit for bit the separate add and cast (${capture ? "captured" : "eager"}, ${tag})`, { skip }, () => {
      const { a, b } = pair(cfg, capture, true, 81 + i, "ln");
      assert.ok(a.model.fusedLnGrad && !b.model.fusedLnGrad && b.model.fused);
      // bit for bit on lavapipe; on NVIDIA the fused add is contracted differently (last f32 bits,
      // so an f16 copy may round one ulp apart), which later products and steps carry along
      const exact = bitExactDevice(a.B as unknown as HeliosBackend);
      if (!capture) {
        const hb = randomBatch(cfg.vocab, 2, cfg.dim === 15 ? 5 : 13, 9);
        const sa = new Scope(a.B), sb = new Scope(b.B);
        try {
          const x = a.lossAndGrads(hb, sa), y = b.lossAndGrads(hb, sb);
          assertSameOrRounding(exact, [Number(x.loss.data[0])], [Number(y.loss.data[0])], 2e-3, "loss");
          assert.equal(x.grads.size, y.grads.size);
          for (const [name, g] of x.grads) assertSameOrRounding(exact, values(g), values(y.grads.get(name)!), 1e-2, name);
        } finally {
          sa.releaseAll();
          sb.releaseAll();
        }
      }
      for (let s = 0; s < 4; s++) {
        const x = a.step(batch(cfg, s)), y = b.step(batch(cfg, s));
        assert.equal(x.applied, y.applied, `step ${s + 1} applied`);
        assertSameOrRounding(exact, [x.loss, x.gradNorm], [y.loss, y.gradNorm], 2e-3, `step ${s + 1} loss, |g|`);
      }
      // Weights after 4 steps: bit for bit where the device is exact. Elsewhere Adam's update of a
      // near-zero gradient is about ±lr whatever its size, so a rounding difference can move such a
      // weight by up to lr a step: held to that.
      const lr = a.optim.lr;
      for (const sp of a.specs) {
        const x = a.params.get(sp.name)!.data, y = b.params.get(sp.name)!.data;
        if (exact) assert.deepEqual(Array.from(x), Array.from(y), sp.name);
        else for (let k = 0; k < y.length; k++) assert.ok(Math.abs(x[k] - y[k]) <= 8 * lr, `${sp.name}[${k}]: ${x[k]} vs ${y[k]} (8 lr = ${8 * lr})`);
      }
      a.dropCapture();
      b.dropCapture();
    });
  }
}

test("fusedLnGrad: per layer two LayerNorm backwards with the residual (ln_1 of block 0 without the f16 copy) reading the f16 dh products, ln_f with the copy alone; with dropout the residual only", () => {
  for (const cfg of CFGS) {
    const { a } = pair(cfg, false, true, 91, "ln");
    const H = a.B as unknown as HeliosBackend & { layerNormBackward: HeliosBackend["layerNormBackward"] };
    const seen: string[] = [];
    H.layerNormBackward = (x, w, g, eps, o = {}) => {
      seen.push(`${o.residual ? "res" : "-"}${o.f16Copy ? "+h16" : ""}${o.residual ? ` g:${g.dtype}` : ""}`);
      return Object.getPrototypeOf(H).layerNormBackward.call(H, x, w, g, eps, o);
    };
    try {
      a.step(patternBatch(cfg.vocab, 2, cfg.dim === 15 ? 5 : 13, 4));
    } finally {
      delete (H as Partial<typeof H>).layerNormBackward;
    }
    // backward order: ln_f, then per block from the top ln_2 and ln_1
    const drop = cfg.dropout > 0;
    const want = [drop ? "-" : "-+h16"];
    for (let l = cfg.layers - 1; l >= 0; l--) want.push(drop ? "res g:f16" : "res+h16 g:f16", drop || l === 0 ? "res g:f16" : "res+h16 g:f16");
    assert.deepEqual(seen, want, `L=${cfg.layers} dropout ${cfg.dropout}`);
  }
});

test("a matmul16 step records 6 dispatches per layer and 2 fewer, and the residual stream's and dh copies 4 per layer and 1 fewer; f is kept in f16; df comes from linear's geluGradOf", () => {
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
  const noLn = pair(cfg, false, true, 51, "ln").b;
  const f = per(a), s = per(b), n = per(noLn);
  // the fused layers (6 per layer and 1), and dhf's f32 cast: its product writes f32 (linear's outDtype)
  assert.equal(s - n, 6 * cfg.layers + 2, `${s} -> ${n} dispatches`);
  // LayerNorm backward's options: the lazily fused residual stream (dout + ln_2's dx + ln_1's dx ...)
  // was computed by the f16 casts before the two products of each layer that read it (2 per layer)
  // and once in f32 for the embeddings' backward (at this depth the pending sum fits one kernel's
  // inputs); and LayerNorm backward reads the f16 dh products, whose f32 copies go (2 per layer)
  assert.equal(n - f, 4 * cfg.layers + 1, `${n} -> ${f} dispatches`);
  const A = a.B as unknown as HeliosBackend & { linear: HeliosBackend["linear"] };
  const gates: string[] = [];
  A.linear = (x, W, bias, o = {}) => {
    if (o.geluGradOf) gates.push(`${o.geluGradOf.dtype}->${o.outDtype}`);
    return Object.getPrototypeOf(A).linear.call(A, x, W, bias, o);
  };
  try {
    a.step(patternBatch(cfg.vocab, 2, 13, 3));
  } finally {
    delete (A as Partial<typeof A>).linear;
  }
  assert.deepEqual(gates, Array(cfg.layers).fill("f16->f16"), "one GELU-gradient product per layer, f16 in and out");
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

test("HELIOS_TRAIN_FUSED_LINEAR parsing; a backend without linear() never takes the matmul16 fused path; f32 splits operands ahead", async () => {
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
  // f32: operand splits made ahead, where f32 products split (a backend claiming so here)
  const splitting = Object.create(on, { f32Splits: { value: true } }) as HeliosBackend;
  const splittingOff = Object.create(off, { f32Splits: { value: true } }) as HeliosBackend;
  assert.deepEqual([splitting, splittingOff, on].map((H) => new GPT(asTrainBackend(H), CFGS[1], {}).f32Fused), [true, false, on.f32Splits], "f32: operand splits made ahead");
  assert.equal(new GPT(asTrainBackend(splitting), CFGS[1], { matmul16: true }).f32Fused, false);
  // GELU's backward in the product goes with the rest
  assert.deepEqual([on, off, noLinear].map((H) => new GPT(asTrainBackend(H), CFGS[1], { matmul16: true }).fusedGeluGrad), [true, false, false]);
  assert.equal(new GPT(asTrainBackend(on), CFGS[1], {}).fusedGeluGrad, false, "f32");
  // and LayerNorm backward's residual add and f16 copy
  assert.deepEqual([on, off, noLinear].map((H) => new GPT(asTrainBackend(H), CFGS[1], { matmul16: true }).fusedLnGrad), [true, false, false]);
  assert.equal(new GPT(asTrainBackend(on), CFGS[1], {}).fusedLnGrad, false, "f32");
});

test("matmul16: weight gradients kept in f16 equal their f32 casts bit for bit, and so does the AdamW update they drive", () => {
  const cfg = CFGS[1]; // no dropout: two backward passes from one state see the same forward
  const tr = new Trainer(asTrainBackend(on), cfg, { ...TINY_OPT, lr: 3e-3, warmup: 2 }, { init: initHostParams(cfg, 71), seed: 71, matmul16: true });
  const hb = randomBatch(cfg.vocab, 2, 13, 5);
  const sa = new Scope(on), sb = new Scope(on);
  try {
    const kept = tr.lossAndGrads(hb, sa);
    // a listener (the data-parallel reducer's hook) gets f32 gradients: the cast path
    const cast = tr.lossAndGrads(hb, sb, true, () => {});
    let f16 = 0;
    for (const [name, g] of kept.grads) {
      const c = cast.grads.get(name)!;
      if (g.dtype === "f16") {
        f16++;
        assert.equal(c.dtype, "f32", name);
      }
      assert.deepEqual(Array.from(values(g)), Array.from(values(c)), name);
    }
    assert.equal(f16, cfg.layers * 4, "every linear layer's weight gradient stays f16");
    // AdamW on copies of the same state, once with each set of gradients
    const update = (grads: Map<string, TensorData>) => {
      const sets = tr.specs.map((s) => ({
        params: on.fromArray(Float32Array.from(values(tr.params.get(s.name)!)), s.shape),
        grads: grads.get(s.name)!, m: on.fromArray(new Float32Array(size(s.shape)).fill(0.01), s.shape),
        v: on.fromArray(new Float32Array(size(s.shape)).fill(0.02), s.shape), weightDecay: 0.1,
      }));
      on.adamwStepMulti(sets, { lr: 1e-3, bc1: 0.1, bc2: 0.05, gradScale: 0.5 }, 0.9, 0.95, 1e-8);
      return sets.map((x) => [Array.from(values(x.params)), Array.from(values(x.m)), Array.from(values(x.v))]);
    };
    assert.deepEqual(update(kept.grads), update(cast.grads));
  } finally {
    sa.releaseAll();
    sb.releaseAll();
  }
});
