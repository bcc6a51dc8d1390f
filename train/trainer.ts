// The training step: upload a batch, forward, backward, clip + AdamW, read the loss, release
// every temporary. Captured (record once, replay each step: captured.ts) when the backend has
// the capture ops and HELIOS_CAPTURE is on; eager otherwise.
import type { TensorData } from "../ts/types.js";
import type { GPTConfig, OptimConfig } from "./config.js";
import { Scope, captureOps, scalar, type TrainBackend } from "./backend.js";
import { readTrainEnv } from "./config.js";
import { CapturedStep, captureStep, stepKey } from "./captured.js";
import { GPT, type Batch, type Dropout } from "./model.js";
import { initHostParams, paramSpecs, upload, type ParamSpec, type Params } from "./params.js";
import { adamwUpdate, initOptimState, learningRate, type OptimState } from "./optim.js";
import type { HostBatch } from "./data.js";
import type { ProcessGroup } from "../ts/distributed/group.js";
import { DataParallel, type DdpBackend } from "../ts/distributed/ddp.js";

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
  /** Largest logits tensor the LM head makes at once (GPTOptions.headChunkBytes). */
  headChunkBytes?: number;
  /** Initial loss scale under matmul16 (halved on overflow, doubled after 1000 clean steps). */
  lossScale?: number;
  /** Run steps as a replayed captured batch when the backend can (default: HELIOS_CAPTURE). */
  capture?: boolean;
  /**
   * Data parallelism (docs/distributed.md): every rank starts from rank 0's weights and its
   * gradients are averaged with the other ranks' during backward (a captured step is captured in
   * pieces, one per gradient bucket: train/captured.ts).
   */
  dist?: ProcessGroup;
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
  private readonly captureWanted: boolean;
  private captured: CapturedStep | null = null;
  /** Data parallelism (TrainerOptions.dist), or null. */
  readonly ddp: DataParallel | null = null;

  constructor(readonly B: TrainBackend, readonly cfg: GPTConfig, readonly optim: OptimConfig, o: TrainerOptions = {}) {
    this.seed = o.seed ?? 1337;
    this.model = new GPT(B, cfg, { matmul16: o.matmul16, headChunkBytes: o.headChunkBytes });
    this.lossScale = o.matmul16 ? o.lossScale ?? 1024 : 1;
    this.specs = paramSpecs(cfg);
    this.params = upload(B, o.init ?? initHostParams(cfg, this.seed), this.specs);
    this.opt = initOptimState(B, this.specs);
    this.captureWanted = o.capture ?? readTrainEnv().capture;
    if (o.dist) {
      this.ddp = new DataParallel(o.dist, B as unknown as DdpBackend, this.specs);
      this.ddp.broadcastParams(this.params);
    }
  }

  /** Whether step() replays a captured batch (the backend has the capture ops and capture is wanted). */
  get capturing(): boolean {
    return this.captureWanted && captureOps(this.B) !== null;
  }

  /** Frees the captured step, if any (the next step records a new one). */
  dropCapture(): void {
    this.captured?.destroy();
    this.captured = null;
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
  lossAndGrads(hb: HostBatch, scope: Scope, train = true, onGrad?: (name: string, g: TensorData) => void): { loss: TensorData; grads: Map<string, TensorData> } {
    const batch = this.upload(scope, hb);
    const drop: Dropout | null = train && this.cfg.dropout > 0
      ? { p: this.cfg.dropout, seed: this.seed, counter: this.dropCounter }
      : null;
    const fc = this.model.forward(this.params, batch, drop, scope, { headGradScale: this.lossScale });
    if (drop) this.dropCounter = drop.counter;
    const grads = this.model.backward(this.params, fc, scope, this.lossScale, onGrad);
    for (const g of grads.values()) scope.keep(g);
    return { loss: fc.loss, grads };
  }

  step(hb: HostBatch): StepResult {
    const C = this.captureWanted ? captureOps(this.B) : null;
    if (C) return this.replayStep(C, hb);
    const t0 = performance.now();
    const scope = new Scope(this.B);
    try {
      const ddp = this.ddp;
      const { loss, grads } = this.lossAndGrads(hb, scope, true, ddp ? (n, g) => ddp.grad(n, g) : undefined);
      // Data parallel: the optimizer takes the gradients averaged over ranks (all ranks then
      // clip, skip a non-finite step and scale the loss alike).
      const use = ddp ? ddp.reduced() : grads;
      if (ddp) for (const g of use.values()) scope.keep(g);
      const up = adamwUpdate(this.B, this.optim, this.specs, this.params, use, this.opt, this.lossScale);
      if (this.model.matmul16) this.adjustLossScale(up.applied);
      const l = scalar(loss);
      scope.releaseAll();
      this.B.flush?.();
      return { step: this.opt.step, loss: l, gradNorm: up.gradNorm, lr: up.lr, applied: up.applied, ms: performance.now() - t0 };
    } finally {
      scope.releaseAll();
    }
  }

  private replayStep(C: NonNullable<ReturnType<typeof captureOps>>, hb: HostBatch): StepResult {
    const t0 = performance.now();
    const ctx = {
      model: this.model, cfg: this.cfg, optim: this.optim, specs: this.specs, params: this.params, opt: this.opt,
      seed: this.seed, lossScale: this.lossScale, pos: this.positions(hb.B, hb.T), ddp: this.ddp,
    };
    const key = stepKey(hb, this.lossScale);
    if (!this.captured || !this.captured.fits(key, ctx)) {
      this.dropCapture();
      // Matmul shape classes tune on first eager use, never inside a capture: on a backend that
      // tunes, one eager forward + backward (no update) first, so the capture records the winners.
      if ((this.B as { tunesMatmuls?: boolean }).tunesMatmuls) {
        const warm = new Scope(this.B);
        const counter = this.dropCounter;
        try {
          this.lossAndGrads(hb, warm);
          this.B.flush?.();
        } finally {
          warm.releaseAll();
          this.dropCounter = counter; // the warm-up does not consume dropout masks
        }
      }
      this.captured = captureStep(C, ctx, hb);
    }
    const o = this.optim, st = this.opt;
    const lr = learningRate(o, st.step);
    const t = st.step + 1;
    const r = this.captured.run(hb, lr, 1 - o.beta1 ** t, 1 - o.beta2 ** t, this.dropCounter);
    this.dropCounter += this.captured.masks;
    const applied = !r.nonFinite;
    const gradNorm = Math.sqrt(r.sumSq) / this.lossScale;
    if (applied) st.step = t;
    if (this.model.matmul16) this.adjustLossScale(applied);
    return { step: st.step, loss: r.loss, gradNorm, lr, applied, ms: performance.now() - t0 };
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
