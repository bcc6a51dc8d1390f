// The training step as one captured batch (the CUDA-Graphs analogue): forward, backward, the
// gradient norm, the clip factor, the non-finite guard and AdamW are recorded once and replayed
// each step. Everything that changes per step reaches the device through tensors written before
// the replay: the tokens and targets, [lr, bc1, bc2] and the dropout counter. The host reads the
// loss, the sum of squares and the non-finite flag after the replay, once per step.
// Data parallel (ctx.ddp), the step is captured in pieces cut where a gradient bucket is complete:
// each replay of a piece is followed by that bucket's all-reduce (NCCL: enqueued in stream order
// after the piece, no host wait), and the next piece runs while it reduces.
import type { TensorData } from "../ts/types.js";
import { indexCsr } from "../ts/ops/indices.js";
import type { GPTConfig, OptimConfig } from "./config.js";
import { Scope, multiTensor, type CaptureHandle, type CaptureOps, type TrainBackend } from "./backend.js";
import type { GPT } from "./model.js";
import type { ParamSpec, Params } from "./params.js";
import { adamwSets, type OptimState } from "./optim.js";
import type { HostBatch } from "./data.js";
import type { DataParallel } from "../ts/distributed/ddp.js";

type CB = TrainBackend & CaptureOps;

export interface CaptureContext {
  readonly model: GPT;
  readonly cfg: GPTConfig;
  readonly optim: OptimConfig;
  readonly specs: ParamSpec[];
  readonly params: Params;
  readonly opt: OptimState;
  readonly seed: number;
  readonly lossScale: number;
  /** Position indices [B*T] (persistent; read by the capture). */
  readonly pos: TensorData;
  /** Data parallelism: gradients averaged over ranks bucket by bucket between pieces. */
  readonly ddp?: DataParallel | null;
}

/** A piece of a data-parallel step: its capture, then the all-reduce of the bucket it completed. */
interface Piece {
  graph: CaptureHandle;
  bucket: TensorData;
}

/** The token indices' CSR lists on the device, rewritten before each replay. */
interface Csr {
  readonly vocab: number;
  readonly offsets: TensorData;
  readonly positions: TensorData;
}

export interface ReplayResult {
  loss: number;
  sumSq: number;
  nonFinite: boolean;
}

export class CapturedStep {
  constructor(
    private readonly C: CB,
    private readonly graph: CaptureHandle,
    /** Inputs written before each replay, outputs read after it, and what they depend on. */
    private readonly io: { idx: TensorData; targets: TensorData; sched: TensorData; counter: TensorData; out: TensorData; csr: Csr | null },
    private readonly held: Scope,
    /** Dropout masks per step (the counter advances by this much). */
    readonly masks: number,
    /** Batch geometry, loss scale and the exact tensors bound: a change needs a new capture. */
    readonly key: string,
    private readonly bound: TensorData[],
    /** Data parallel: the pieces before `graph`, in order (empty otherwise). */
    private readonly pieces: Piece[] = [],
    private readonly ddp: DataParallel | null = null,
  ) {}

  /** Whether this capture still fits: same geometry and loss scale, same parameter and state tensors. */
  fits(key: string, ctx: CaptureContext): boolean {
    if (key !== this.key) return false;
    const now = boundTensors(ctx);
    return now.length === this.bound.length && now.every((t, i) => t === this.bound[i]);
  }

  run(hb: HostBatch, lr: number, bc1: number, bc2: number, counter: number): ReplayResult {
    const { C, io } = this;
    C.writeTensor(io.idx, hb.idx);
    if (io.csr) {
      // the token embedding's backward reads the tokens' CSR lists, built here (range-checked)
      const { offsets, positions } = indexCsr("training step", hb.idx, io.csr.vocab);
      C.writeTensor(io.csr.offsets, offsets);
      C.writeTensor(io.csr.positions, positions);
    }
    C.writeTensor(io.targets, hb.targets);
    C.writeTensor(io.sched, [lr, bc1, bc2]);
    if (this.masks > 0) C.writeTensor(io.counter, [counter | 0]);
    for (const p of this.pieces) {
      C.replay(p.graph);
      this.ddp!.reducer.reduce(p.bucket);
    }
    C.replay(this.graph);
    const [loss, sumSq, bad] = Array.from(io.out.data, Number);
    return { loss, sumSq, nonFinite: bad !== 0 || !Number.isFinite(sumSq) };
  }

  destroy(): void {
    for (const p of this.pieces) this.C.destroyCapture(p.graph);
    this.C.destroyCapture(this.graph);
    this.held.releaseAll();
  }
}

export function stepKey(hb: HostBatch, lossScale: number): string {
  return `${hb.B}x${hb.T}:${lossScale}`;
}

function boundTensors(ctx: CaptureContext): TensorData[] {
  const out: TensorData[] = [ctx.pos];
  for (const s of ctx.specs) out.push(ctx.params.get(s.name)!, ctx.opt.m.get(s.name)!, ctx.opt.v.get(s.name)!);
  return out;
}

/** Records one training step into a captured batch (nothing runs until the first replay). */
export function captureStep(C: CB, ctx: CaptureContext, hb: HostBatch): CapturedStep {
  const n = hb.B * hb.T;
  const held = new Scope(C), tmp = new Scope(C);
  const io = {
    idx: held.keep(C.zeros([n], "i32")),
    targets: held.keep(C.zeros([n], "i32")),
    sched: held.keep(C.zeros([3], "f32")),
    counter: held.keep(C.zeros([1], "i32")),
    // Without the lists the token embedding's backward would walk device-only indices (a
    // column per thread range) instead of the CSR kernel the eager step runs.
    csr: C.embeddingBackwardCsr
      ? { vocab: ctx.cfg.vocab, offsets: held.keep(C.zeros([ctx.cfg.vocab + 1], "i32")), positions: held.keep(C.zeros([n], "i32")) }
      : null,
  };
  const o = ctx.optim;
  const pieces: Piece[] = [];
  const ddp = ctx.ddp ?? null;
  if (ddp) {
    // a complete bucket ends the piece: its all-reduce runs between this piece's replay and the next's
    ddp.reducer.defer = (bucket) => {
      pieces.push({ graph: C.endCapture(bucket), bucket });
      C.beginCapture();
    };
  }
  C.beginCapture();
  try {
    const batch = { idx: io.idx, targets: io.targets, pos: ctx.pos, B: hb.B, T: hb.T, idxCsr: io.csr ?? undefined };
    const drop = ctx.cfg.dropout > 0 ? { p: ctx.cfg.dropout, seed: ctx.seed, counter: 0, base: io.counter } : null;
    const fc = ctx.model.forward(ctx.params, batch, drop, tmp, { headGradScale: ctx.lossScale });
    const own = ctx.model.backward(ctx.params, fc, tmp, ctx.lossScale, ddp ? (n, g) => ddp.grad(n, g) : undefined);
    for (const g of own.values()) tmp.keep(g);
    // data parallel: the averaged gradients, sliced out of the buckets in the last piece
    const grads = ddp ? ddp.reduced() : own;
    if (ddp) for (const g of grads.values()) tmp.keep(g);
    const list = ctx.specs.map((s) => {
      const g = grads.get(s.name);
      if (!g) throw new Error(`no gradient for ${s.name}`);
      return g;
    });
    const ss = tmp.keep(C.totalSumOfSquares(list));
    const bad = tmp.keep(C.checkFinite(ss));
    const hyper = hyperTensor(C, tmp, o, io.sched, ss, bad, ctx.lossScale);
    if (multiTensor(C)) {
      C.adamwStepMulti(adamwSets(o, ctx.specs, ctx.params, grads, ctx.opt), hyper, o.beta1, o.beta2, o.eps);
    } else {
      for (const s of ctx.specs) {
        const wd = s.decay ? o.weightDecay : 0;
        C.adamwStepDevice(
          ctx.params.get(s.name)!, grads.get(s.name)!, ctx.opt.m.get(s.name)!, ctx.opt.v.get(s.name)!, hyper,
          o.beta1, o.beta2, o.eps, wd,
        );
      }
    }
    // [loss, sumSq, nonFinite]: one read after each replay.
    const one = (t: TensorData) => tmp.keep(C.reshape(t, [1]));
    const out = held.keep(C.cat([one(fc.loss), one(ss), one(bad)], 0));
    const graph = C.endCapture(out);
    // The runtime pins every buffer the capture uses, so the temporaries can go back now.
    tmp.releaseAll();
    return new CapturedStep(C, graph, { ...io, out }, held, drop ? drop.counter : 0, stepKey(hb, ctx.lossScale), boundTensors(ctx), pieces, ddp);
  } catch (e) {
    C.abortCapture();
    for (const p of pieces) C.destroyCapture(p.graph);
    ddp?.reducer.reset();
    tmp.releaseAll();
    held.releaseAll();
    if (e instanceof Error && (e as Error & { code?: string }).code === "ERR_HELIOS_CAPTURE") {
      e.message += " (recording the training step; HELIOS_CAPTURE=0 runs it eagerly)";
    }
    throw e;
  } finally {
    if (ddp) ddp.reducer.defer = null;
  }
}

/**
 * [lr, bc1, bc2, gradScale, skip] on the device. gradScale is adamwUpdate's clip factor over the
 * loss scale, min(1, clip / (norm + 1e-6)) / lossScale; skip is checkFinite of the sum of squares.
 */
function hyperTensor(C: CB, s: Scope, o: OptimConfig, sched: TensorData, ss: TensorData, bad: TensorData, lossScale: number): TensorData {
  const ss1 = s.keep(C.reshape(ss, [1]));
  let factor: TensorData;
  if (o.clip > 0) {
    const norm = s.keep(C.scale(s.keep(C.sqrt(ss1)), 1 / lossScale));
    const denom = s.keep(C.add(norm, s.keep(C.full([1], 1e-6))));
    factor = s.keep(C.clamp(s.keep(C.div(s.keep(C.full([1], o.clip)), denom)), 0, 1));
  } else {
    factor = s.keep(C.full([1], 1));
  }
  const gs = s.keep(C.scale(factor, 1 / lossScale));
  return s.keep(C.cat([sched, gs, s.keep(C.reshape(bad, [1]))], 0));
}
