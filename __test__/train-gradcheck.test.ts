// Finite-difference check of the hand-written GPT backward on the float64 reference backend:
// every parameter tensor, a few random coordinates each, with and without dropout.
import { test } from "node:test";
import assert from "node:assert/strict";
import { Trainer } from "../train/trainer.js";
import { Scope } from "../train/backend.js";
import type { Dropout } from "../train/model.js";
import { Rng } from "../train/rng.js";
import { RefTrainBackend } from "./train-ref-backend.js";
import { TINY, TINY_OPT, randomBatch } from "./train-helpers.js";

function check(dropout: number): void {
  const B = new RefTrainBackend();
  const cfg = { ...TINY, dropout };
  const tr = new Trainer(B, cfg, TINY_OPT, { seed: 7 });
  // Larger-than-init weights so every path carries gradient well above rounding.
  for (const [name, p] of tr.params) {
    const r = new Rng(name.length * 31 + 5);
    const d = p.data as Float64Array;
    for (let i = 0; i < d.length; i++) d[i] = d[i] + (name.includes("ln_") ? 0.3 : 0.2) * r.normal();
  }
  const hb = randomBatch(cfg.vocab, 2, 6, 11);
  const drop = (): Dropout | null => (dropout > 0 ? { p: dropout, seed: 99, counter: 0 } : null);
  const lossAt = (): number => {
    const s = new Scope(B);
    const batch = { idx: B.fromArray([...hb.idx], [12], "i32"), targets: B.fromArray([...hb.targets], [12], "i32"), pos: B.fromArray([0, 1, 2, 3, 4, 5, 0, 1, 2, 3, 4, 5], [12], "i32"), B: 2, T: 6 };
    const fc = tr.model.forward(tr.params, batch, drop(), s);
    return Number(fc.loss.data[0]);
  };
  const s = new Scope(B);
  const batch = { idx: B.fromArray([...hb.idx], [12], "i32"), targets: B.fromArray([...hb.targets], [12], "i32"), pos: B.fromArray([0, 1, 2, 3, 4, 5, 0, 1, 2, 3, 4, 5], [12], "i32"), B: 2, T: 6 };
  const fc = tr.model.forward(tr.params, batch, drop(), s);
  const grads = tr.model.backward(tr.params, fc, s);
  const rng = new Rng(3);
  let worst = 0;
  for (const spec of tr.specs) {
    const p = tr.params.get(spec.name)!.data as Float64Array;
    const g = grads.get(spec.name)!.data as Float64Array;
    assert.equal(g.length, p.length, spec.name);
    for (let k = 0; k < 3; k++) {
      const i = rng.int(p.length);
      const h = 1e-5, x = p[i];
      p[i] = x + h;
      const lp = lossAt();
      p[i] = x - h;
      const lm = lossAt();
      p[i] = x;
      const fd = (lp - lm) / (2 * h);
      const err = Math.abs(fd - g[i]) / Math.max(1e-4, Math.abs(fd) + Math.abs(g[i]));
      worst = Math.max(worst, err);
      assert.ok(err < 1e-5, `${spec.name}[${i}]: analytic ${g[i]} vs finite difference ${fd} (rel ${err})`);
    }
  }
  assert.ok(worst < 1e-5);
}

test("GPT backward matches finite differences (float64 reference, no dropout)", () => check(0));
test("GPT backward matches finite differences with residual dropout", () => check(0.25));
