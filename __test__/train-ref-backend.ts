// The float64 CPU reference (__test__/ref) as a TrainBackend, so the trainer's forward,
// backward and optimizer can be checked by finite differences and compared with HeliosBackend.
// Tensors carry Float64Array data with dtype "f64" (i32 for indices). Attention takes either head
// layout (AttentionLayout: the trainer's fused path by default, attnHeadLayout "copy" for the other).
import type { Dtype, Shape, TensorData } from "../ts/types.js";
import type { AttentionLayout } from "../ts/ops/attention.js";
import type { TrainBackend } from "../train/backend.js";
import type { RefTensor } from "./ref/tensor.js";
import * as N from "./ref/nn.js";
import * as E from "./ref/elementwise.js";

interface T extends TensorData {
  readonly shape: number[];
  readonly data: Float64Array | Int32Array;
}

const f = (t: TensorData): RefTensor => ({ shape: [...t.shape], data: t.data as Float64Array });
const out = (r: RefTensor): T => ({ shape: [...r.shape], dtype: "f64", data: r.data });
const ints = (t: TensorData): { shape: number[]; data: ArrayLike<number> } => ({ shape: [...t.shape], data: t.data as Int32Array });

export class RefTrainBackend implements TrainBackend {
  readonly name = "ref-f64";
  released = 0;
  attnHeadLayout: "fused" | "copy" = "fused";

  zeros(shape: Shape, dtype: Dtype = "f32"): TensorData {
    const n = shape.reduce((a, b) => a * b, 1);
    return { shape: [...shape], dtype: dtype === "i32" ? "i32" : "f64", data: dtype === "i32" ? new Int32Array(n) : new Float64Array(n) };
  }
  fromArray(data: number[], shape: Shape, dtype: Dtype = "f32"): TensorData {
    if (data.length !== shape.reduce((a, b) => a * b, 1)) throw new Error(`fromArray: ${data.length} values for [${shape}]`);
    if (dtype === "i32") return { shape: [...shape], dtype: "i32", data: Int32Array.from(data) };
    return { shape: [...shape], dtype: "f64", data: Float64Array.from(data) };
  }
  add(a: TensorData, b: TensorData): TensorData { return out(E.binary(f(a), f(b), (x, y) => x + y)); }
  mul(a: TensorData, b: TensorData): TensorData { return out(E.binary(f(a), f(b), (x, y) => x * y)); }
  sum(a: TensorData, axis?: number, keepdims?: boolean): TensorData { return out(N.sum(f(a), axis, keepdims)); }
  matmul(a: TensorData, b: TensorData): TensorData { return out(N.matmul(f(a), f(b))); }
  matmulTransposed(a: TensorData, b: TensorData): TensorData {
    const nd = b.shape.length;
    return out(N.matmul(f(a), N.transpose(f(b), nd - 2, nd - 1)));
  }
  matmulTransposedA(a: TensorData, b: TensorData): TensorData {
    const nd = a.shape.length;
    return out(N.matmul(N.transpose(f(a), nd - 2, nd - 1), f(b)));
  }
  reshape(a: TensorData, shape: Shape): TensorData { return { shape: [...shape], dtype: a.dtype, data: a.data }; }
  transpose(a: TensorData, d0: number, d1: number): TensorData { return out(N.transpose(f(a), d0, d1)); }
  cat(ts: TensorData[], axis: number): TensorData { return out(N.cat(ts.map(f), axis)); }
  slice(a: TensorData, starts: number[], ends: number[]): TensorData {
    if (a.dtype === "i32") {
      const [s0] = starts, [e0] = ends;
      if (a.shape.length !== 1) throw new Error("ref slice: i32 only 1-D");
      return { shape: [e0 - s0], dtype: "i32", data: (a.data as Int32Array).slice(s0, e0) };
    }
    return out(N.slice(f(a), starts, ends));
  }
  sliceQkv(a: TensorData): [TensorData, TensorData, TensorData] {
    const [rows, w] = a.shape;
    const d = w / 3;
    return [0, 1, 2].map((p) => out(N.slice(f(a), [0, p * d], [rows, (p + 1) * d]))) as unknown as [TensorData, TensorData, TensorData];
  }
  embedding(w: TensorData, idx: TensorData): TensorData { return out(N.embedding(f(w), ints(idx))); }
  embeddingBackward(idx: TensorData, g: TensorData, vocab: number): TensorData {
    return out(N.embeddingBackward(idx.data as Int32Array, f(g), vocab));
  }
  layerNorm(x: TensorData, w: TensorData, b: TensorData, eps: number): TensorData { return out(N.layerNorm(f(x), f(w), f(b), eps)); }
  layerNormBackward(x: TensorData, w: TensorData, g: TensorData, eps: number) {
    const r = N.layerNormBackward(f(x), f(w), f(g), eps);
    return { dx: out(r.dx), dw: out(r.dw), db: out(r.db) };
  }
  gelu(a: TensorData): TensorData { return out(E.unary(f(a), E.gelu)); }
  geluBackward(x: TensorData, g: TensorData): TensorData { return out(E.zip(f(x), f(g), (xv, gv) => E.geluGrad(xv) * gv)); }
  crossEntropy(logits: TensorData, targets: TensorData): TensorData {
    const r = N.crossEntropy(f(logits), targets.data as Int32Array);
    return { shape: [1], dtype: "f64", data: r.data };
  }
  crossEntropyBackward(logits: TensorData, targets: TensorData, g: TensorData): TensorData {
    return out(N.crossEntropyBackward(f(logits), targets.data as Int32Array, Number(g.data[0])));
  }
  flashAttention(Q: TensorData, K: TensorData, V: TensorData, T: number, scale: number, cap: number, layout?: AttentionLayout) {
    if (!layout) {
      const r = N.attention(f(Q), f(K), f(V), scale, cap);
      return { output: out(r.output), lse: out(r.lse) };
    }
    const [q, k, v] = this.heads([Q, K, V], T, layout);
    const r = N.attention(q, k, v, scale, cap);
    return { output: out(N.headsToRows([r.output], T, layout.heads)), lse: out(r.lse) };
  }
  flashAttentionBackward(
    Q: TensorData, K: TensorData, V: TensorData, _O: TensorData, dO: TensorData, _lse: TensorData,
    T: number, scale: number, cap: number, layout?: AttentionLayout,
  ) {
    if (!layout) {
      const r = N.attentionBackward(f(Q), f(K), f(V), f(dO), scale, cap);
      return { dQ: out(r.dQ), dK: out(r.dK), dV: out(r.dV) };
    }
    const [q, k, v] = this.heads([Q, K, V], T, layout);
    const D = q.shape[2];
    const r = N.attentionBackward(q, k, v, N.rowsToHeads(f(dO), T, layout.heads, D, 0), scale, cap);
    if (layout.packed) {
      const d = out(N.headsToRows([r.dQ, r.dK, r.dV], T, layout.heads));
      return { dQ: d, dK: d, dV: d };
    }
    const [dQ, dK, dV] = [r.dQ, r.dK, r.dV].map((x) => out(N.headsToRows([x], T, layout.heads)));
    return { dQ, dK, dV };
  }
  /** Q, K, V of a layout with heads as [B*H, T, D]. */
  private heads(qkv: TensorData[], T: number, layout: AttentionLayout): RefTensor[] {
    const W = qkv[0].shape[1], H = layout.heads;
    const D = W / ((layout.packed ? 3 : 1) * H);
    return qkv.map((x, p) => N.rowsToHeads(f(x), T, H, D, layout.packed ? p : 0));
  }
  residualDropoutAdd(residual: TensorData, projected: TensorData, mask: TensorData): TensorData {
    const pm = E.zip(f(projected), f(mask), (p, m) => p * m);
    return out(E.zip(f(residual), pm, (r, p) => r + p));
  }
  dropoutMask(shape: Shape, seed: number, counter: number, p: number): TensorData {
    const n = shape.reduce((a, b) => a * b, 1);
    return { shape: [...shape], dtype: "f64", data: Float64Array.from(N.dropoutMask(n, seed, counter, p)) };
  }
  totalSumOfSquares(ts: TensorData[]): TensorData {
    let s = 0;
    for (const t of ts) for (const v of t.data as Float64Array) s += v * v;
    return { shape: [1], dtype: "f64", data: Float64Array.of(s) };
  }
  checkFinite(a: TensorData): TensorData {
    let bad = 0;
    for (const v of a.data as Float64Array) if (!Number.isFinite(v)) bad = 1;
    return { shape: [1], dtype: "f64", data: Float64Array.of(bad) };
  }
  adamwStep(
    p: TensorData, g: TensorData, m: TensorData, v: TensorData,
    lr: number, b1: number, b2: number, eps: number, wd: number, bc1: number, bc2: number, gs = 1,
  ): void {
    N.adamw(p.data as Float64Array, g.data as Float64Array, m.data as Float64Array, v.data as Float64Array, lr, b1, b2, eps, wd, bc1, bc2, gs);
  }
  releaseGpuTensor(): void {
    this.released++;
  }
}
