// GPT-2 forward and backward written out with Backend ops (no autograd). Shapes: N = B*T rows,
// C = dim, H heads of D = C/H; attention reads Q, K, V straight from the qkv projection's [N, 3C]
// rows and writes O [N, C] and dQKV [N, 3C] (a packed AttentionLayout) on backends whose
// attnHeadLayout is "fused", else runs on [B*H, T, D] copies. Every tensor made here goes into
// a Scope so the step can hand its leases back to the pool, and each temporary is released as
// soon as its last reader is recorded: inside a captured step the runtime recycles a released
// buffer for the next lease (in-batch reuse), so the step's peak is its live set. What backward
// needs (ForwardCache) lives until the backward of its block has read it. Lazily fused
// elementwise results hold their inputs' buffers until they are computed, so they are released
// too once consumed, and views (reshape) are dropped as soon as the copy that reads them is.
import type { TensorData } from "../ts/types.js";
import { LN_EPS, type GPTConfig } from "./config.js";
import { Scope, type TrainBackend } from "./backend.js";
import { block, get, type BlockParams, type Params } from "./params.js";
import type { AttentionLayout } from "../ts/ops/attention.js";

export interface Batch {
  /** [N] i32 token ids. */
  readonly idx: TensorData;
  /** [N] i32 next-token targets. */
  readonly targets: TensorData;
  /** [N] i32 positions (i % T), fixed for a (B, T). */
  readonly pos: TensorData;
  /** idx's CSR lists (indexCsr), when idx lives only on the device (a captured step writes them per replay). */
  readonly idxCsr?: { readonly offsets: TensorData; readonly positions: TensorData };
  readonly B: number;
  readonly T: number;
}

export interface Dropout {
  readonly p: number;
  readonly seed: number;
  /** Counter of the first mask of this step; each mask uses the next one. */
  counter: number;
  /**
   * Captured steps: an i32 [1] device tensor holding the step's first counter; `counter` then
   * counts masks from 0 and each mask uses base[0] + counter (dropoutMaskAt).
   */
  readonly base?: TensorData;
}

interface BlockCache {
  /** Fused head layout: Q, K and V are the one [N, 3C] qkv tensor, and y is O. */
  x: TensorData; h1: TensorData; Q: TensorData; K: TensorData; V: TensorData; O: TensorData; lse: TensorData;
  y: TensorData; x1: TensorData; h2: TensorData; f: TensorData; g: TensorData;
  m1: TensorData | null; m2: TensorData | null;
  scope: Scope;
}

export interface ForwardCache {
  batch: Batch;
  blocks: BlockCache[];
  xf: TensorData;
  hf: TensorData;
  /** Null when the head ran in row chunks (see GPTOptions.headChunkBytes). */
  logits: TensorData | null;
  loss: TensorData;
  /** The head's gradients, made by a chunked forward asked for them (ForwardOptions.headGradScale). */
  headGrad: { lossScale: number; dhf: TensorData; dwteHead: TensorData } | null;
}

export interface ForwardOptions {
  /**
   * Training forward: a chunked head also makes its gradients (of lossScale * mean loss) while
   * each chunk's logits are live, so backward does not recompute them (one [rows, vocab] product
   * per chunk less). backward uses them when called with the same lossScale.
   */
  headGradScale?: number;
}

export interface GPTOptions {
  /**
   * Matmul operands in f16 (f32 accumulation inside the kernel, f32 master weights, f32
   * LayerNorm / softmax / attention / loss statistics); the trainer pairs it with loss scaling.
   */
  matmul16?: boolean;
  /**
   * Largest logits tensor the LM head + cross-entropy makes at once (bytes, default 2000 MiB,
   * under the 2^31 - 1 bytes one storage binding may span). Above it the head runs in row
   * chunks: forward keeps only the loss — and, for training (ForwardOptions.headGradScale), the
   * head's gradients made from each chunk's live logits; otherwise backward recomputes each
   * chunk's logits. GPT-2 124M at B=16, T=1024 has 1.6 GB of f16 logits (matmul16: one pass) and
   * 3.3 GB of f32 logits (two chunks). Fewer, larger chunks make larger head products, which run
   * faster (H100: 115.0 ms per matmul16 step at one pass against 120.5 ms at 256 MiB chunks), for
   * up to twice this many bytes (logits + gradient) at the step's peak.
   */
  headChunkBytes?: number;
}

const DEFAULT_HEAD_CHUNK_BYTES = 2000 * 2 ** 20;

export class GPT {
  readonly matmul16: boolean;
  /**
   * matmul16 on a backend whose `fusedLinear` is on (HELIOS_TRAIN_FUSED_LINEAR): each linear layer
   * is one product with its bias (and, for the projections, the residual) in the matmul epilogue
   * (TrainBackend.linear), the qkv and MLP pre-activation f written in f16 by their products, and
   * LayerNorm writing its f16 matmul operand itself. Off: the products, then elementwise passes
   * for bias, residual and the f16 casts.
   */
  readonly fused: boolean;
  /**
   * (fused) The MLP backward's dg = dy·W_proj product multiplies by gelu'(f) in its epilogue and
   * writes df in f16 (TrainBackend.linear's geluGradOf): no dg, and no elementwise geluBackward
   * and cast pass. Not in f32: there f stays the fc product's pending bias add (its consumers fuse
   * it), which the epilogue would have to write out first: the same dispatches and bytes.
   */
  readonly fusedGeluGrad: boolean;
  /**
   * (fused) Each LayerNorm backward adds the residual gradient into its dx and writes dx's f16
   * copy in the same pass (TrainBackend.layerNormBackward's opts): the copy is the dy operand of
   * the linear layer before it, so the elementwise add and the cast passes are gone. Where a
   * dropout mask sits between (mask · dx is that layer's dy) only the add is fused.
   */
  readonly fusedLnGrad: boolean;
  /**
   * f32 on a backend whose `fusedLinear` is on and whose f32 products split their operands
   * (TrainBackend.f32Splits, splitOperand): the tensors its x3 products and split attention read in two
   * layouts or twice are split once, in one pass: qkv (attention forward and backward, from its
   * pending bias add), g (from its pending bias + GELU, which is then never written in f32), every
   * layer's output gradient dy (dX's and dW's products), each LM-head chunk's dlogits and the
   * token embedding. Bias, residual and GELU's backward stay elementwise passes in f32: in the
   * epilogues of the x3 tiles they cost more than the passes (H200, session 24: the residual
   * +0.03–0.05 ms per projection against a 0.036 ms pass, gelu'(f) +0.15 ms against 0.14).
   */
  readonly f32Fused: boolean;
  readonly headChunkBytes: number;
  /** Attention on the qkv projection's rows (TrainBackend.attnHeadLayout "fused"), or null: head transposes. */
  readonly heads: AttentionLayout | null;
  /** f16 copies of the matrices for this step (matmul16), keyed by the f32 parameter. */
  private half = new Map<TensorData, TensorData>();
  /**
   * Transposed f16 copies [in, out] for the forward products (matmul16): x·W as an NN product,
   * which the tensor-core matmul runs 10-15% faster than x·Wᵀ on GPT-2's shapes (H100 session 3,
   * bench/matmul-shapes); backward's dy·W reads the untransposed copy. Not in f32: on the x3
   * tiles NN gained 1.6 % (2.456 against 2.496 ms a layer, tuned, H200 session 24), which the
   * transposed f32 copies (0.39 ms a step) take back.
   */
  private halfT = new Map<TensorData, TensorData>();

  constructor(readonly B: TrainBackend, readonly cfg: GPTConfig, o: GPTOptions = {}) {
    this.matmul16 = o.matmul16 ?? false;
    this.headChunkBytes = o.headChunkBytes ?? DEFAULT_HEAD_CHUNK_BYTES;
    if (!(this.headChunkBytes > 0)) throw new Error(`GPTOptions.headChunkBytes = ${o.headChunkBytes}: expected > 0`);
    if (this.matmul16 && !B.castDtype) throw new Error(`backend ${B.name} has no castDtype: matmul16 needs it`);
    this.heads = B.attnHeadLayout === "fused" ? { heads: cfg.heads, packed: true } : null;
    this.fused = this.matmul16 && B.fusedLinear === true && typeof B.linear === "function";
    this.f32Fused = !this.matmul16 && B.fusedLinear === true && B.f32Splits === true && typeof B.splitOperand === "function";
    this.fusedGeluGrad = this.fused;
    this.fusedLnGrad = this.fused;
  }

  /** crossEntropyWithGrad's options: (f32Fused) dlogits written split for dhf's and dwte's products. */
  private get headSplit(): { splitGrad?: ("rows" | "whole")[] } {
    return this.f32Fused ? { splitGrad: ["rows", "whole"] } : {};
  }

  /** (f32Fused) Splits f32 operand t ahead for `reads` products in each of `layouts` (TrainBackend.splitOperand). */
  private splitAhead(t: TensorData, layouts: ("rows" | "whole")[], reads = 1, evaluate = false): void {
    if (this.f32Fused) this.B.splitOperand?.(t, layouts, reads, { evaluate });
  }

  /** The operand a matmul reads: x itself, or its f16 copy (kept in s) under matmul16. */
  private operand(s: Scope, x: TensorData, consume = false): TensorData {
    if (!this.matmul16 || x.dtype === "f16") return x;
    const h = s.keep(this.B.castDtype!(x, "f16"));
    // The cast holds its own reference: an f32 input used only by the matmul goes back now.
    if (consume) s.drop(x);
    return h;
  }

  private weight(W: TensorData): TensorData {
    return this.matmul16 ? this.half.get(W) ?? W : W;
  }

  /** A matmul result back in f32 (fused into its consumer by the backend). */
  private f32(s: Scope, t: TensorData): TensorData {
    return this.matmul16 ? s.keep(this.B.castDtype!(t, "f32")) : t;
  }

  /** `t` in f32, consuming t (its pending cast holds the 16-bit buffer until computed). */
  private f32Owned(t: TensorData): TensorData {
    if (!this.matmul16) return t;
    const c = this.B.castDtype!(t, "f32");
    this.free(t);
    return c;
  }

  /** `t` in f32 kept in `top` (outliving the chunk scope `s`, which keeps any 16-bit original). */
  private f32Into(s: Scope, top: Scope, t: TensorData): TensorData {
    if (!this.matmul16) return top.keep(t);
    return top.keep(this.B.castDtype!(s.keep(t), "f32"));
  }

  /**
   * Casts every matrix to f16 once per step (after the previous update), plus its transpose: all
   * of them in a few dispatches where the backend has castTransposeMulti. Inside a captured step
   * these are recorded dispatches, so each replay copies the weights AdamW has just updated.
   */
  private castWeights(p: Params, top: Scope): void {
    this.half.clear();
    this.halfT.clear();
    if (!this.matmul16) return;
    const mats = [...p].filter(([name, W]) => W.shape.length === 2 && !name.endsWith("wpe.weight")).map(([, W]) => W);
    const B = this.B;
    const pairs = B.castTransposeMulti ? B.castTransposeMulti(mats, "f16") : mats.map((W) => {
      const cast = B.castDtype!(W, "f16");
      return { cast, transposed: B.transpose(cast, 0, 1) };
    });
    mats.forEach((W, i) => {
      this.half.set(W, top.keep(pairs[i].cast));
      this.halfT.set(W, top.keep(pairs[i].transposed));
    });
  }

  /** x · Wᵀ for W stored [out, in]: an NN product on the transposed f16 copy under matmul16. */
  private timesWT(x: TensorData, W: TensorData): TensorData {
    const t = this.halfT.get(W);
    return t ? this.B.matmul(x, t) : this.B.matmulTransposed(x, this.weight(W));
  }

  /** Releases tensors held by no scope (a view or a lazily fused value that was consumed). */
  private free(...ts: (TensorData | null)[]): void {
    for (const t of ts) if (t) this.B.releaseGpuTensor?.(t);
  }

  /**
   * Attention on the qkv rows themselves: Q, K, V are qkvA (kept in s), O [N, C] is y as well (the
   * projection's operand: f16 under matmul16, as qkvA is).
   */
  private attendRows(s: Scope, qkv: TensorData, qkvA: TensorData, T: number, scale: number) {
    if (qkvA !== qkv) s.drop(qkv);
    const att = this.B.flashAttention(qkvA, qkvA, qkvA, T, scale, 0, this.heads!);
    const O = s.keep(att.output), lse = s.keep(att.lse);
    return { Q: qkvA, K: qkvA, V: qkvA, O, lse, y: this.operand(s, O) };
  }

  /** Attention on [B*H, T, D] copies: split, head transposes, and O back to [N, C] (y). */
  private attendHeads(s: Scope, qkv: TensorData, qkvA: TensorData, nb: number, T: number, scale: number) {
    const qkvParts = this.B.sliceQkv(qkvA);
    // Backward needs only Q, K, V: hand the packed and sliced copies back as they are read.
    s.drop(qkv);
    if (qkvA !== qkv) s.drop(qkvA);
    const [Q, K, V] = qkvParts.map((t) => {
      const h = this.toHeads(s, t, nb, T);
      this.free(t);
      return h;
    });
    const att = this.B.flashAttention(Q, K, V, T, scale, 0);
    const O = s.keep(att.output), lse = s.keep(att.lse);
    return { Q, K, V, O, lse, y: this.operand(s, this.fromHeads(s, O, nb, T), true) };
  }

  /** [B*T, C] -> [B*H, T, D] (one copy; t stays the caller's). */
  private toHeads(s: Scope, t: TensorData, B: number, T: number): TensorData {
    const { heads: H, dim: C } = this.cfg;
    return this.permuted(s, t, [B, T, H, C / H], [B * H, T, C / H]);
  }

  /** [B*H, T, D] -> [B*T, C] (one copy; t stays the caller's). */
  private fromHeads(s: Scope, t: TensorData, B: number, T: number): TensorData {
    const { heads: H, dim: C } = this.cfg;
    return this.permuted(s, t, [B, H, T, C / H], [B * T, C]);
  }

  /** t viewed as `from`, dims 1 and 2 swapped, viewed as `to`; only the result is kept (in s). */
  private permuted(s: Scope, t: TensorData, from: number[], to: number[]): TensorData {
    const a = this.B.reshape(t, from);
    const b = this.B.transpose(a, 1, 2);
    // A view holds its source's buffer: hand both views back once the copy is recorded.
    this.free(a);
    const c = s.keep(this.B.reshape(b, to));
    this.free(b);
    return c;
  }

  /** LayerNorm of x as a matmul operand, kept in s (fused: written in f16 by the LayerNorm kernel). */
  private normOperand(s: Scope, x: TensorData, w: TensorData, b: TensorData): TensorData {
    if (this.fused) return s.keep(this.B.layerNorm(x, w, b, LN_EPS, { outDtype: "f16" }));
    return this.operand(s, s.keep(this.B.layerNorm(x, w, b, LN_EPS)), true);
  }

  /**
   * (fused) x Wᵀ + b (+ residual) as one product, written as `dtype` and kept in s: bias and
   * residual are added to the f32 accumulator in the matmul epilogue and rounded once.
   */
  private linearEpi(s: Scope, x: TensorData, W: TensorData, b: TensorData, dtype: "f16" | "f32", residual: TensorData | null = null): TensorData {
    const t = this.halfT.get(W);
    const lin = this.B.linear!.bind(this.B);
    return s.keep(t ? lin(x, t, b, { inOut: true, outDtype: dtype, residual }) : lin(x, this.weight(W), b, { outDtype: dtype, residual }));
  }

  /**
   * x + (y Wᵀ + b), dropout on the projection when `drop` has it: the residual in the epilogue
   * (fused, no dropout), else the product and one fused elementwise kernel. Returns the sum and the mask.
   */
  private project(s: Scope, y: TensorData, W: TensorData, b: TensorData, x: TensorData, drop: Dropout | null, N: number) {
    if (this.fused && !(drop && drop.p > 0)) return { out: this.linearEpi(s, y, W, b, "f32", x), mask: null };
    const a = this.linear(s, y, W, b);
    const mask = this.mask(s, drop, N);
    const out = this.residual(s, x, a, mask);
    s.drop(a);
    return { out, mask };
  }

  /** y = x W^T + b with W stored [out, in]; x is already the matmul operand (see operand()). */
  private linear(s: Scope, x: TensorData, W: TensorData, b: TensorData): TensorData {
    const xw = this.timesWT(x, W);
    const x32 = this.matmul16 ? this.B.castDtype!(xw, "f32") : xw;
    const y = s.keep(this.B.add(x32, b));
    // The bias add holds its own reference on xw's buffer (the cast is fused into it).
    this.free(xw, x32 === xw ? null : x32);
    return y;
  }

  private residual(s: Scope, x: TensorData, a: TensorData, mask: TensorData | null): TensorData {
    return s.keep(mask ? this.B.residualDropoutAdd(x, a, mask) : this.B.add(x, a));
  }

  private mask(s: Scope, drop: Dropout | null, N: number): TensorData | null {
    if (!drop || drop.p === 0) return null;
    if (drop.base) {
      const at = this.B.dropoutMaskAt;
      if (!at) throw new Error(`backend ${this.B.name} has no dropoutMaskAt (needed for captured dropout)`);
      return s.keep(at.call(this.B, [N, this.cfg.dim], drop.seed, drop.base, drop.counter++, drop.p));
    }
    return s.keep(this.B.dropoutMask([N, this.cfg.dim], drop.seed, drop.counter++, drop.p));
  }

  /** Logits and mean cross-entropy; `drop` null = evaluation (no dropout). */
  forward(p: Params, batch: Batch, drop: Dropout | null, top: Scope, opts: ForwardOptions = {}): ForwardCache {
    const { B: nb, T } = batch;
    if (T > this.cfg.blockSize) throw new Error(`sequence length ${T} exceeds blockSize ${this.cfg.blockSize}`);
    const N = nb * T;
    const scale = 1 / Math.sqrt(this.cfg.dim / this.cfg.heads);
    this.castWeights(p, top);
    const te = this.B.embedding(get(p, "transformer.wte.weight"), batch.idx);
    const pe = this.B.embedding(get(p, "transformer.wpe.weight"), batch.pos);
    let x = top.keep(this.B.add(te, pe));
    this.free(te, pe);
    const blocks: BlockCache[] = [];
    for (let l = 0; l < this.cfg.layers; l++) {
      const w = block(p, l);
      const s = new Scope(this.B);
      const h1 = this.normOperand(s, x, w.ln1w, w.ln1b);
      // Under matmul16 attention runs on f16 Q, K, V: the tensor-core flash forward, and the f16
      // copies the backward reads anyway. Fused, the product writes them with the bias added;
      // otherwise the bias add and the cast are one fused kernel after it.
      const qkv = this.fused ? this.linearEpi(s, h1, w.qkvW, w.qkvB, "f16") : this.linear(s, h1, w.qkvW, w.qkvB);
      const qkvA = this.matmul16 && qkv.dtype !== "f16" ? s.keep(this.B.castDtype!(qkv, "f16")) : qkv;
      // f32 on the qkv rows: split attention reads qkv forward and backward, split once (from the pending bias add)
      if (this.heads) this.splitAhead(qkvA, ["whole"], 2);
      const { Q, K, V, O, lse, y } = this.heads ? this.attendRows(s, qkv, qkvA, T, scale) : this.attendHeads(s, qkv, qkvA, nb, T, scale);
      const { out: x1, mask: m1 } = this.project(s, y, w.projW, w.projB, x, drop, N);
      const h2 = this.normOperand(s, x1, w.ln2w, w.ln2b);
      // f (kept for GELU's backward) is f16 when fused, as is g = gelu(f), the next product's operand
      const f = this.fused ? this.linearEpi(s, h2, w.fcW, w.fcB, "f16") : this.linear(s, h2, w.fcW, w.fcB);
      const g = this.operand(s, s.keep(this.B.gelu(f)), true);
      // g's two readers (the projection forward, its weight gradient) take it split: its GELU runs once, into the splits
      this.splitAhead(g, ["rows", "whole"]);
      const { out: x2, mask: m2 } = this.project(s, g, w.mlpW, w.mlpB, x1, drop, N);
      blocks.push({ x, h1, Q, K, V, O, lse, y, x1, h2, f, g, m1, m2, scope: s });
      x = x2;
    }
    const hf = this.normOperand(top, x, get(p, "transformer.ln_f.weight"), get(p, "transformer.ln_f.bias"));
    const wte = this.weight(get(p, "transformer.wte.weight"));
    const rows = this.headRows(N);
    const gradScale = opts.headGradScale;
    // each row chunk reads wte as logits' Wᵀ and (training) as dhf's W: one split for all of them
    const chunks = Math.ceil(N / rows);
    this.splitAhead(wte, gradScale === undefined ? ["rows"] : ["rows", "whole"], chunks);
    if (rows >= N) {
      // Under matmul16 the logits stay f16 (crossEntropy computes in f32): half the largest tensor.
      const logits = top.keep(this.timesWT(hf, get(p, "transformer.wte.weight")));
      if (gradScale !== undefined && this.B.crossEntropyWithGrad) {
        // Training: the loss and dlogits from one read of the logits, then the head's gradients
        // at once (backward takes them as a chunked forward's), so the logits go back here.
        const one = top.keep(this.B.fromArray([gradScale], [1], "f32"));
        const r = this.B.crossEntropyWithGrad(logits, batch.targets, one, this.headSplit);
        top.drop(logits);
        const loss = this.f32(top, top.keep(r.loss));
        const headGrad = { lossScale: gradScale, ...this.headGradsFrom(top, top.keep(r.dlogits), hf, wte) };
        return { batch, blocks, xf: x, hf, logits: null, loss, headGrad };
      }
      const loss = this.f32(top, top.keep(this.B.crossEntropy(logits, batch.targets)));
      return { batch, blocks, xf: x, hf, logits, loss, headGrad: null };
    }
    const grad = gradScale === undefined ? null : this.headGrad(top);
    let loss: TensorData | null = null;
    for (let r0 = 0; r0 < N; r0 += rows) {
      const r1 = Math.min(N, r0 + rows);
      const s = new Scope(this.B);
      const hfc = s.keep(this.B.slice(hf, [r0, 0], [r1, hf.shape[1]]));
      const targets = s.keep(this.B.slice(batch.targets, [r0], [r1]));
      const logits = s.keep(this.timesWT(hfc, get(p, "transformer.wte.weight")));
      // with the gradients asked for: the chunk's loss and dlogits (gradient = lossScale times the
      // chunk's share of rows, as crossEntropyBackward divides by the chunk's rows) in one pass
      const share = gradScale === undefined ? 0 : (gradScale * (r1 - r0)) / N;
      // (f32Fused) dlogits comes split for its two products from the same pass
      const both = grad && this.B.crossEntropyWithGrad ? this.B.crossEntropyWithGrad(logits, targets, s.keep(this.B.fromArray([share], [1], "f32")), this.headSplit) : null;
      const ce = this.f32(s, s.keep(both ? both.loss : this.B.crossEntropy(logits, targets)));
      // crossEntropy is a mean over the chunk's rows: weight it by its share of all N rows.
      const part = this.B.mul(ce, s.keep(this.B.fromArray([(r1 - r0) / N], [1], "f32")));
      if (loss === null) loss = top.keep(part);
      else {
        const prev: TensorData = loss;
        loss = top.keep(this.B.add(prev, s.keep(part)));
        top.drop(prev);
      }
      if (grad) {
        const dlogits = s.keep(both ? both.dlogits : this.B.crossEntropyBackward(logits, targets, s.keep(this.B.fromArray([share], [1], "f32"))));
        s.drop(logits);
        grad.chunk(s, hfc, dlogits, wte);
      }
      s.releaseAll();
    }
    const headGrad = grad && gradScale !== undefined ? { lossScale: gradScale, ...grad.finish() } : null;
    return { batch, blocks, xf: x, hf, logits: null, loss: loss!, headGrad };
  }

  /**
   * Rows of the LM head per chunk: all N when the logits fit in headChunkBytes, else as few
   * chunks as fit, made equal and whole 128-row blocks where possible, so the head products (K =
   * rows in dwte's) keep the aligned tensor-core kernels with 16-byte loads (H100 session 6: the
   * f32 step's 10422-row dwte products took 36 ms on scalar loads, 1.8x the other head products)
   * and no chunk is larger than it must be (its transients set the step's peak memory). In f32
   * the largest buffer a chunk binds is the logits gradient split into three bf16 parts for the
   * x3 tensor-core products (6 bytes per logit): above 2^31 - 1 bytes the runtime refuses the
   * binding and the tuner falls back to slower kernels (H100 session 7: 8192-row chunks ran dhf
   * on the SIMT tile, 48 ms of a 251 ms step). Under f32Fused a chunk holds the logits, dlogits
   * and dlogits' two splits at once (16 bytes per logit, written by crossEntropyWithGrad's pass):
   * sized at 8 bytes per logit against headChunkBytes, GPT-2's 16384 rows run as four 4096-row
   * chunks (H200 session 24: 0.5 ms faster than three 5504-row ones, 1.4 GB less at the peak).
   */
  headRows(N: number): number {
    const bytes = this.cfg.vocab * (this.matmul16 ? 2 : this.f32Fused ? 8 : 6);
    const fit = Math.floor(this.headChunkBytes / bytes);
    if (fit >= N) return N;
    const even = Math.ceil(N / Math.ceil(N / fit));
    const blocks = Math.ceil(even / 128) * 128;
    if (blocks <= fit) return blocks;
    return Math.max(1, fit >= 128 ? fit - (fit % 128) : fit);
  }

  /** dhf and the head's share of dwte (f32, kept in `top`) from dlogits, which is dropped from `top`. */
  private headGradsFrom(top: Scope, dlogits: TensorData, hf: TensorData, wte: TensorData): { dhf: TensorData; dwteHead: TensorData } {
    const Bk = this.B;
    this.splitAhead(dlogits, ["rows", "whole"]);
    const dhf = top.keep(this.fused ? Bk.linear!(dlogits, wte, null, { inOut: true, outDtype: "f32" }) : this.f32Owned(Bk.matmul(dlogits, wte)));
    const dwteHead = top.keep(this.weightGrad(dlogits, hf));
    top.drop(dlogits);
    return { dhf, dwteHead };
  }

  /**
   * dW = dyᵀ·x in f32 (`keep16`: as the product writes it): the product and (matmul16) its cast, which holds the 16-bit product until
   * computed. Not linear's xT with an f32 output: on the H200 the TN tiles writing f32 took 10–15 %
   * longer than the f16 product and its cast together (GPT-2 step, session 22: 62.5 against 61.0 ms).
   */
  private weightGrad(dy: TensorData, x: TensorData, keep16 = false): TensorData {
    const product = this.B.matmulTransposedA(dy, x);
    return keep16 ? product : this.f32Owned(product);
  }

  /**
   * dhf and the head's share of dwte from the loss gradient `one` (= lossScale): one pass when
   * the forward kept the logits, else per row chunk (logits recomputed, gradient scaled by the
   * chunk's share of rows because crossEntropyBackward divides by the chunk's row count).
   */
  private headBackward(p: Params, c: ForwardCache, top: Scope, lossScale: number): { dhf: TensorData; dwteHead: TensorData } {
    const Bk = this.B;
    const wte = this.weight(get(p, "transformer.wte.weight"));
    const { targets } = c.batch;
    if (c.logits) {
      const one = top.keep(Bk.fromArray([lossScale], [1], "f32"));
      const dlogits = top.keep(Bk.crossEntropyBackward(c.logits, targets, one));
      // [N, vocab] twice is the largest memory of a GPT-2 step: return both before the blocks run.
      top.drop(c.logits);
      return this.headGradsFrom(top, dlogits, c.hf, wte);
    }
    if (c.headGrad && c.headGrad.lossScale === lossScale) {
      const { dhf, dwteHead } = c.headGrad;
      c.headGrad = null;
      return { dhf, dwteHead };
    }
    if (c.headGrad) {
      // made for another loss scale: recompute below
      top.drop(c.headGrad.dhf);
      top.drop(c.headGrad.dwteHead);
      c.headGrad = null;
    }
    const N = c.hf.shape[0], C = c.hf.shape[1];
    const rows = this.headRows(N);
    const grad = this.headGrad(top);
    for (let r0 = 0; r0 < N; r0 += rows) {
      const r1 = Math.min(N, r0 + rows);
      const s = new Scope(Bk);
      const hfc = s.keep(Bk.slice(c.hf, [r0, 0], [r1, C]));
      const logits = s.keep(this.timesWT(hfc, get(p, "transformer.wte.weight")));
      const g = s.keep(Bk.fromArray([(lossScale * (r1 - r0)) / N], [1], "f32"));
      const dlogits = s.keep(Bk.crossEntropyBackward(logits, s.keep(Bk.slice(targets, [r0], [r1])), g));
      s.drop(logits);
      grad.chunk(s, hfc, dlogits, wte);
      s.releaseAll();
    }
    return grad.finish();
  }

  /** Accumulates the head's gradients into `top`, with this model's matmul16-aware casts. */
  private headGrad(top: Scope): HeadGrad {
    return new HeadGrad(this.B, top, { f32Into: (s, t) => this.f32Into(s, top, t), f32: (s, t) => this.f32(s, t) }, (t) => this.splitAhead(t, ["rows", "whole"]));
  }

  /**
   * Gradients of lossScale * mean loss by parameter name (the optimizer divides lossScale back
   * out); block scopes are released as they finish. `onGrad` hears of each as it is made.
   */
  backward(p: Params, c: ForwardCache, top: Scope, lossScale = 1, onGrad?: (name: string, g: TensorData) => void): Map<string, TensorData> {
    const Bk = this.B;
    const grads = onGrad ? new ReportingMap(onGrad) : new Map<string, TensorData>();
    // Under matmul16 the weight gradients stay in the f16 their products write (AdamW and the norm
    // read f16 as exactly as its f32 cast: no cast pass). Gradients heard of by `onGrad` (the
    // data-parallel reducer packs them into f32 buckets) are cast as before.
    const f16Grads = this.matmul16 && !onGrad;
    const { batch } = c;
    const { B: nb, T } = batch;
    const scale = 1 / Math.sqrt(this.cfg.dim / this.cfg.heads);
    const { dhf, dwteHead } = this.headBackward(p, c, top, lossScale);
    top.drop(c.hf);
    // (fusedLnGrad) a block's output gradient comes with its f16 copy when block l's first
    // product (the MLP projection's backward) reads it as it is: no dropout mask in between
    const copyFor = (l: number) => this.fusedLnGrad && l >= 0 && c.blocks[l].m2 === null;
    const last = this.cfg.layers - 1;
    const lnf = this.lnBackward(c.xf, get(p, "transformer.ln_f.weight"), dhf, null, copyFor(last));
    top.drop(dhf);
    grads.set("transformer.ln_f.weight", lnf.dw);
    grads.set("transformer.ln_f.bias", lnf.db);
    let dx = top.keep(lnf.dx);
    // the f16 copy is released by the block that reads it; top holds it until then
    let dx16 = lnf.dx16 && top.keep(lnf.dx16);
    for (let l = last; l >= 0; l--) {
      const w = block(p, l);
      const bc = c.blocks[l];
      const prev = dx, prev16 = dx16;
      const out = this.blockBackward(w, bc, dx, dx16, copyFor(l - 1), nb, T, scale, grads, `transformer.h.${l}.`, f16Grads);
      if (prev16) top.forget(prev16);
      dx = top.keep(out.dx);
      dx16 = out.dx16 && top.keep(out.dx16);
      bc.scope.releaseAll();
      // Block 0's input (the embeddings' sum) is held by top; later blocks' by the block before.
      top.drop(bc.x);
      top.drop(prev);
    }
    // The f16 weight copies are read for the last time above.
    for (const h of this.half.values()) top.drop(h);
    this.half.clear();
    const V = this.cfg.vocab;
    const dwteEmb = batch.idxCsr && Bk.embeddingBackwardCsr
      ? Bk.embeddingBackwardCsr(batch.idxCsr.offsets, batch.idxCsr.positions, dx, V)
      : Bk.embeddingBackward(batch.idx, dx, V);
    grads.set("transformer.wte.weight", Bk.add(dwteEmb, dwteHead));
    this.free(dwteEmb);
    top.drop(dwteHead);
    grads.set("transformer.wpe.weight", Bk.embeddingBackward(batch.pos, dx, this.cfg.blockSize));
    top.drop(dx);
    return grads;
  }

  /**
   * layerNormBackward, with `residual` added into dx and (`copy`) dx16, dx in f16, from the same
   * pass (fusedLnGrad); else dx alone, the caller adding the residual.
   */
  private lnBackward(x: TensorData, w: TensorData, g: TensorData, residual: TensorData | null, copy: boolean) {
    if (!this.fusedLnGrad) return { ...this.B.layerNormBackward(x, w, g, LN_EPS), dx16: null };
    const r = this.B.layerNormBackward(x, w, g, LN_EPS, { residual, f16Copy: copy });
    if (copy && !r.dx16) throw new Error(`backend ${this.B.name}: layerNormBackward returned no dx16 for f16Copy (fusedLinear needs its opts)`);
    return { dx: r.dx, dw: r.dw, db: r.db, dx16: copy ? r.dx16! : null };
  }

  /**
   * One block's backward from dout (the caller's) and, under fusedLnGrad without a dropout mask on
   * the MLP projection, dout16 = dout in f16 (handed over: released once its products are recorded);
   * returns dx, and dx16 when `copy`. Each temporary, and each saved activation of the block
   * (c.scope), is released right after its last reader is recorded.
   */
  private blockBackward(
    w: BlockParams, c: BlockCache, dout: TensorData, dout16: TensorData | null, copy: boolean, nb: number, T: number, scale: number,
    grads: Map<string, TensorData>, pre: string, f16Grads: boolean,
  ): { dx: TensorData; dx16: TensorData | null } {
    const Bk = this.B;
    const saved = (...ts: (TensorData | null)[]) => {
      for (const t of ts) if (t) c.scope.drop(t);
    };
    // Records dW and db of a linear layer from dy (the caller's); returns the dy its products read
    // (under matmul16 dy16, dy's f16 copy made by the pass before, or a new one: release it with
    // `dropCopy`).
    const weightGrads = (dy: TensorData, x: TensorData, name: string, dy16: TensorData | null): TensorData => {
      const dyOp = dy16 ?? (this.matmul16 ? Bk.castDtype!(dy, "f16") : dy);
      // Under matmul16 the bias gradient sums the f16 dy the matmuls read (f32 accumulation and
      // result): half the bytes, and an f32 dy that only feeds the cast is never written. Recorded
      // before dW: nothing orders the two, so no barrier comes between them and the GPU runs the
      // memory-bound sum beside the product instead of after it.
      // (f32Fused) dy's two products, dW's (whole) and dX's (rows), read one split, made in the
      // pass that writes dy itself where it is pending (GELU's backward) for the bias sum below
      this.splitAhead(dy, ["rows", "whole"], 1, true);
      const db = this.matmul16 && Bk.sumF32 ? Bk.sumF32(dyOp, 0) : Bk.sum(dy, 0);
      // The gradient outlives this block (the trainer releases it after the update).
      grads.set(name + ".weight", this.weightGrad(dyOp, x, f16Grads));
      grads.set(name + ".bias", db);
      return dyOp;
    };
    const dropCopy = (dy: TensorData, dyOp: TensorData) => this.free(dyOp === dy ? null : dyOp);
    // dy -> dx of a linear layer (f32; with `raw` the product as it is: f16 under matmul16, for a
    // consumer that reads f16, which f32 and back would only copy); records dW and db. dy stays the
    // caller's; dy16 (its f16 copy, or null) is released here.
    const lin = (dy: TensorData, x: TensorData, W: TensorData, name: string, dy16: TensorData | null = null, raw = false): TensorData => {
      const dyOp = weightGrads(dy, x, name, dy16);
      const product = Bk.matmul(dyOp, this.weight(W));
      const dx = raw ? product : this.f32Owned(product);
      dropCopy(dy, dyOp);
      return dx;
    };
    // df = geluBackward(f, dm·W_proj): one product with gelu'(f) in its epilogue (fusedGeluGrad),
    // written in f's dtype (f16: the fc layer's products and bias sum read it as it is), or the
    // product and one elementwise pass.
    const mlpGrad = (dm: TensorData, dm16: TensorData | null): TensorData => {
      if (!this.fusedGeluGrad) {
        const dg = lin(dm, c.g, w.mlpW, pre + "mlp.c_proj", dm16);
        const df = Bk.geluBackward(c.f, dg);
        this.free(dg);
        return df;
      }
      const dyOp = weightGrads(dm, c.g, pre + "mlp.c_proj", dm16);
      const df = Bk.linear!(dyOp, this.weight(w.mlpW), null, { inOut: true, outDtype: c.f.dtype, geluGradOf: c.f });
      dropCopy(dm, dyOp);
      return df;
    };
    if (dout16 && c.m2) throw new Error("helios: internal error: an f16 dout for a block with a dropout mask");
    const dm = c.m2 ? Bk.mul(dout, c.m2) : dout;
    const df = mlpGrad(dm, dout16);
    saved(c.g, c.m2, c.f);
    if (dm !== dout) this.free(dm);
    // Under fusedLnGrad LayerNorm backward reads the f16 dh products as they are (an f32 copy
    // would be the same values: f16 -> f32 is exact).
    const fl = this.fusedLnGrad;
    const dh2 = lin(df, c.h2, w.fcW, pre + "mlp.c_fc", null, fl);
    saved(c.h2);
    this.free(df);
    // dx1 = dout + ln_2's dx (in its pass under fusedLnGrad, with dx1's f16 copy when no mask follows)
    const ln2 = this.lnBackward(c.x1, w.ln2w, dh2, fl ? dout : null, fl && !c.m1);
    saved(c.x1);
    this.free(dh2);
    grads.set(pre + "ln_2.weight", ln2.dw);
    grads.set(pre + "ln_2.bias", ln2.db);
    const dx1 = fl ? ln2.dx : Bk.add(dout, ln2.dx);
    if (!fl) this.free(ln2.dx);
    const da = c.m1 ? Bk.mul(dx1, c.m1) : dx1;
    // Under matmul16 Q, K, V and O are f16 (forward) and dO joins them, so the backward runs on
    // tensor cores (HELIOS_ATTN_BWD): dO is the projection's f16 product as it is, and the f16
    // dqkv feeds the qkv layer's products and bias sum as it is (no f32 round trip: f16 -> f32 ->
    // f16 is exact, so this only drops two copies per block).
    const dyA = lin(da, c.y, w.projW, pre + "attn.c_proj", ln2.dx16, this.matmul16);
    // (with the fused head layout y is O, which attention backward still reads)
    saved(c.y === c.O ? null : c.y, c.m1);
    if (da !== dx1) this.free(da);
    let dqkv: TensorData;
    if (this.heads) {
      dqkv = this.attendRowsBackward(c, dyA, T, scale);
      this.free(dyA);
    } else {
      const dO = this.toHeads(c.scope, dyA, nb, T);
      this.free(dyA);
      dqkv = this.attendHeadsBackward(c, dO, nb, T, scale);
    }
    const dh1 = lin(dqkv, c.h1, w.qkvW, pre + "attn.c_attn", this.matmul16 ? dqkv : null, fl);
    saved(c.h1);
    this.free(dqkv);
    const ln1 = this.lnBackward(c.x, w.ln1w, dh1, fl ? dx1 : null, fl && copy);
    this.free(dh1);
    grads.set(pre + "ln_1.weight", ln1.dw);
    grads.set(pre + "ln_1.bias", ln1.db);
    if (fl) {
      this.free(dx1);
      return { dx: ln1.dx, dx16: ln1.dx16 };
    }
    const dx = Bk.add(dx1, ln1.dx);
    this.free(dx1, ln1.dx);
    return { dx, dx16: null };
  }

  /** dQKV [N, 3C] from dO [N, C] (the caller's) on the qkv rows; releases the block's Q/K/V, O and lse. */
  private attendRowsBackward(c: BlockCache, dO: TensorData, T: number, scale: number): TensorData {
    const g = this.B.flashAttentionBackward(c.Q, c.K, c.V, c.O, dO, c.lse, T, scale, 0, this.heads!);
    for (const t of [c.Q, c.O, c.lse]) c.scope.drop(t);
    return g.dQ;
  }

  /** dQKV [N, 3C] from dO [B*H, T, D] (kept in c.scope) through head transposes and a cat; releases the block's Q, K, V, O, lse and dO. */
  private attendHeadsBackward(c: BlockCache, dO: TensorData, nb: number, T: number, scale: number): TensorData {
    const g = this.B.flashAttentionBackward(c.Q, c.K, c.V, c.O, dO, c.lse, T, scale, 0);
    for (const t of [c.Q, c.K, c.V, c.O, c.lse, dO]) c.scope.drop(t);
    const parts = [g.dQ, g.dK, g.dV].map((t) => {
      const h = this.fromHeads(c.scope, t, nb, T);
      this.free(t);
      return h;
    });
    const dqkv = this.B.cat(parts, 1);
    for (const t of parts) c.scope.drop(t);
    return dqkv;
  }
}

/**
 * The LM head's gradients accumulated over row chunks: per chunk, from its dlogits (made by the
 * caller from the live logits with the gradient lossScale times the chunk's share of rows, because
 * crossEntropyBackward divides by the chunk's row count), its rows of dhf and its term of dwte.
 */
class HeadGrad {
  private readonly dhfParts: TensorData[] = [];
  private dwteHead: TensorData | null = null;

  constructor(
    private readonly B: TrainBackend,
    private readonly top: Scope,
    /** Results in f32: `f32Into` keeps its result in `top`, `f32` in the chunk scope. */
    private readonly casts: { f32Into: (s: Scope, t: TensorData) => TensorData; f32: (s: Scope, t: TensorData) => TensorData },
    /** Splits a chunk's dlogits ahead for its two products (GPT.splitAhead). */
    private readonly splitAhead: (dlogits: TensorData) => void,
  ) {}

  /** One chunk's terms from its dlogits (kept in `s`, dropped here: the largest tensors of the step). */
  chunk(s: Scope, hfc: TensorData, dlogits: TensorData, wte: TensorData): void {
    const Bk = this.B, top = this.top;
    const { f32Into, f32 } = this.casts;
    this.splitAhead(dlogits);
    this.dhfParts.push(f32Into(s, Bk.matmul(dlogits, wte)));
    const dw = Bk.matmulTransposedA(dlogits, hfc);
    s.drop(dlogits);
    if (this.dwteHead === null) this.dwteHead = f32Into(s, dw);
    else {
      const prev: TensorData = this.dwteHead;
      this.dwteHead = top.keep(Bk.add(prev, f32(s, s.keep(dw))));
      top.drop(prev);
      // Compute the running sum now: left lazy it would hold every chunk's [vocab, C] product.
      Bk.evaluate?.(this.dwteHead);
    }
  }

  finish(): { dhf: TensorData; dwteHead: TensorData } {
    if (this.dwteHead === null) throw new Error("helios train: internal error: the LM head had no rows");
    const dhf = this.top.keep(this.B.cat(this.dhfParts, 0));
    for (const t of this.dhfParts) this.top.drop(t);
    return { dhf, dwteHead: this.dwteHead };
  }
}

/**
 * The gradient map of a data-parallel step: reports each gradient the moment backward sets it,
 * so its bucket's all-reduce can start while backward goes on (ts/distributed/buckets.ts).
 */
class ReportingMap extends Map<string, TensorData> {
  constructor(private readonly report: (name: string, g: TensorData) => void) {
    super();
  }
  override set(name: string, g: TensorData): this {
    super.set(name, g);
    this.report(name, g);
    return this;
  }
}
