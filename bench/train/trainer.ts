// The training step: upload a batch, forward, backward, clip + AdamW, read the loss, release
// every temporary. Eager by default; captured (record once, replay each step) when the backend
// exposes a capture API and HELIOS_CAPTURE is on.
import type { TensorData } from "../../ts/types.js";
import type { GPTConfig, OptimConfig } from "./config.js";
import { Scope, scalar, type TrainBackend } from "./backend.js";
import { GPT, type Batch, type Dropout } from "./model.js";
import { initHostParams, paramSpecs, upload, type ParamSpec, type Params } from "./params.js";
import { adamwUpdate, initOptimState, type OptimState } from "./optim.js";
import type { HostBatch } from "./data.js";

export interface StepResult {
  step: number;
  loss: number;
  gradNorm: number;
  lr: number;
  /** False when a NaN/Inf gradient made the step skip its update. */
  applied: boolean;
  ms: number;
}

export interface TrainerOptions {
  seed?: number;
  /** Host weights to start from (checkpoint or exported init) instead of a fresh init. */
  init?: Map<string, Float32Array>;
  /** 16-bit matmul operands with dynamic loss scaling (see GPTOptions.matmul16). */
  matmul16?: boolean;
  /** Initial loss scale under matmul16 (halved on overflow, doubled after 1000 clean steps). */
  lossScale?: number;
}

export class Trainer {
  readonly model: GPT;
  readonly specs: ParamSpec[];
  params: Params;
  opt: OptimState;
  private readonly posCache = new Map<string, TensorData>();
  private readonly seed: number;
  private dropCounter = 0;
  lossScale: number;
  private cleanSteps = 0;

  constructor(readonly B: TrainBackend, readonly cfg: GPTConfig, readonly optim: OptimConfig, o: TrainerOptions = {}) {
    this.seed = o.seed ?? 1337;
    this.model = new GPT(B, cfg, { matmul16: o.matmul16 });
    this.lossScale = o.matmul16 ? o.lossScale ?? 1024 : 1;
    this.specs = paramSpecs(cfg);
    this.params = upload(B, o.init ?? initHostParams(cfg, this.seed), this.specs);
    this.opt = initOptimState(B, this.specs);
  }

  private positions(B: number, T: number): TensorData {
    const key = `${B}x${T}`;
    let p = this.posCache.get(key);
    if (!p) {
      const a = new Int32Array(B * T);
      for (let i = 0; i < a.length; i++) a[i] = i % T;
      p = this.B.fromArray(a as unknown as number[], [B * T], "i32");
      this.posCache.set(key, p);
    }
    return p;
  }

  private upload(s: Scope, hb: HostBatch): Batch {
    const n = hb.B * hb.T;
    return {
      idx: s.keep(this.B.fromArray(hb.idx as unknown as number[], [n], "i32")),
      targets: s.keep(this.B.fromArray(hb.targets as unknown as number[], [n], "i32")),
      pos: this.positions(hb.B, hb.T),
      B: hb.B,
      T: hb.T,
    };
  }

  /** Loss and gradients of one batch (no update); the caller releases `scope`. */
  lossAndGrads(hb: HostBatch, scope: Scope, train = true): { loss: TensorData; grads: Map<string, TensorData> } {
    const batch = this.upload(scope, hb);
    const drop: Dropout | null = train && this.cfg.dropout > 0
      ? { p: this.cfg.dropout, seed: this.seed, counter: this.dropCounter }
      : null;
    const fc = this.model.forward(this.params, batch, drop, scope);
    if (drop) this.dropCounter = drop.counter;
    const grads = this.model.backward(this.params, fc, scope, this.lossScale);
    for (const g of grads.values()) scope.keep(g);
    return { loss: fc.loss, grads };
  }

  step(hb: HostBatch): StepResult {
    const t0 = performance.now();
    const scope = new Scope(this.B);
    try {
      const { loss, grads } = this.lossAndGrads(hb, scope);
      const up = adamwUpdate(this.B, this.optim, this.specs, this.params, grads, this.opt, this.lossScale);
      if (this.model.matmul16) this.adjustLossScale(up.applied);
      const l = scalar(loss);
      scope.releaseAll();
      this.B.flush?.();
      return { step: this.opt.step, loss: l, gradNorm: up.gradNorm, lr: up.lr, applied: up.applied, ms: performance.now() - t0 };
    } finally {
      scope.releaseAll();
    }
  }

  private adjustLossScale(applied: boolean): void {
    if (!applied) {
      this.lossScale = Math.max(1, this.lossScale / 2);
      this.cleanSteps = 0;
    } else if (++this.cleanSteps >= 1000) {
      this.lossScale = Math.min(65536, this.lossScale * 2);
      this.cleanSteps = 0;
    }
  }

  /** Mean loss over batches without dropout or update. */
  evalLoss(batches: HostBatch[]): number {
    let total = 0;
    for (const hb of batches) {
      const scope = new Scope(this.B);
      const batch = this.upload(scope, hb);
      const fc = this.model.forward(this.params, batch, null, scope);
      total += scalar(fc.loss);
      for (const b of fc.blocks) b.scope.releaseAll();
      scope.releaseAll();
    }
    return total / batches.length;
  }

  /** Logits of the last position of each row: [B, vocab] on the host. */
  lastLogits(hb: HostBatch): Float32Array {
    const scope = new Scope(this.B);
    try {
      const batch = this.upload(scope, hb);
      const fc = this.model.forward(this.params, batch, null, scope);
      const fl = fc.logits;
      if (!fl) throw new Error(`lastLogits: B=${hb.B}, T=${hb.T} runs the LM head in chunks; sample with fewer rows`);
      const logits = fl.dtype === "f32" ? fl : scope.keep(this.B.castDtype!(fl, "f32"));
      const all = logits.data;
      const V = this.cfg.vocab;
      const out = new Float32Array(hb.B * V);
      for (let b = 0; b < hb.B; b++) {
        const row = (b * hb.T + hb.T - 1) * V;
        for (let j = 0; j < V; j++) out[b * V + j] = Number(all[row + j]);
      }
      for (const b of fc.blocks) b.scope.releaseAll();
      return out;
    } finally {
      scope.releaseAll();
    }
  }
}
