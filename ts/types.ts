// Alpha's Backend contract, structurally identical to `@alpha/core`'s `Backend` and
// `TensorData` so that Alpha can pass a HeliosBackend wherever it expects its own.
// Keep member names, argument order and optionality exactly as Alpha declares them.

export type Dtype = "f32" | "f64" | "i32" | "f16";
export type Shape = readonly number[];

/** f16 tensors carry raw IEEE half bits in a Uint16Array. */
export type NumericArray = Float32Array | Float64Array | Int32Array;
export type TensorArray = NumericArray | Uint16Array;

export interface TensorData {
  readonly shape: Shape;
  readonly dtype: Dtype;
  readonly data: TensorArray;
}

export interface Backend {
  readonly name: string;

  // creation
  zeros(shape: Shape, dtype?: Dtype): TensorData;
  ones(shape: Shape, dtype?: Dtype): TensorData;
  full(shape: Shape, value: number, dtype?: Dtype): TensorData;
  randn(shape: Shape, dtype?: Dtype): TensorData;
  fromArray(data: number[], shape: Shape, dtype?: Dtype): TensorData;

  // math
  add(a: TensorData, b: TensorData): TensorData;
  sub(a: TensorData, b: TensorData): TensorData;
  mul(a: TensorData, b: TensorData): TensorData;
  div(a: TensorData, b: TensorData): TensorData;
  matmul(a: TensorData, b: TensorData): TensorData;
  sum(a: TensorData, axis?: number, keepdims?: boolean): TensorData;
  mean(a: TensorData, axis?: number, keepdims?: boolean): TensorData;

  // element-wise
  neg(a: TensorData): TensorData;
  exp(a: TensorData): TensorData;
  log(a: TensorData): TensorData;
  sqrt(a: TensorData): TensorData;
  pow(a: TensorData, exp: number): TensorData;
  scale(a: TensorData, s: number): TensorData;
  clamp(a: TensorData, lo: number, hi: number): TensorData;

  // nn
  embedding(weight: TensorData, indices: TensorData): TensorData;
  layerNorm(x: TensorData, weight: TensorData, bias: TensorData, eps: number): TensorData;
  gelu(a: TensorData): TensorData;
  relu(a: TensorData): TensorData;
  silu(a: TensorData): TensorData;
  softmax(a: TensorData, axis?: number): TensorData;
  logSoftmax(a: TensorData, axis?: number): TensorData;
  crossEntropy(logits: TensorData, targets: TensorData): TensorData;

  // reshape / slice
  reshape(a: TensorData, shape: Shape): TensorData;
  transpose(a: TensorData, dim0: number, dim1: number): TensorData;
  slice(a: TensorData, starts: number[], ends: number[]): TensorData;
  cat(tensors: TensorData[], axis: number): TensorData;

  // utility
  argmax(a: TensorData, axis?: number): TensorData;
  topk(a: TensorData, k: number, axis?: number): { values: TensorData; indices: TensorData };
  gather(a: TensorData, axis: number, indices: TensorData): TensorData;
  clone(a: TensorData): TensorData;

  // comparison
  equal(a: TensorData, b: TensorData): boolean;
  allClose(a: TensorData, b: TensorData, atol?: number, rtol?: number): boolean;

  // mask
  causalMask(size: number): TensorData;
  maskedFill(a: TensorData, mask: TensorData, value: number): TensorData;

  // backward (optional in Alpha; HeliosBackend implements all of them)
  geluBackward?(input: TensorData, gradOutput: TensorData): TensorData;
  reluBackward?(input: TensorData, gradOutput: TensorData): TensorData;
  siluBackward?(input: TensorData, gradOutput: TensorData): TensorData;
  siluMul?(a: TensorData, b: TensorData): TensorData;
  siluMulBackward?(a: TensorData, b: TensorData, gradOutput: TensorData): TensorData[];
  clampBackward?(input: TensorData, gradOutput: TensorData, lo: number, hi: number): TensorData;
  layerNormBackward?(
    x: TensorData, weight: TensorData, gradOutput: TensorData, eps: number,
  ): { dx: TensorData; dw: TensorData; db: TensorData };
  crossEntropyBackward?(logits: TensorData, targets: TensorData, gradOutput: TensorData): TensorData;
  embeddingBackward?(indices: TensorData, gradOutput: TensorData, vocabSize: number): TensorData;
  softCap?(input: TensorData, cap: number): TensorData;
  softCapBackward?(gradOutput: TensorData, input: TensorData, cap: number): TensorData;

  // fused ops
  residualDropoutAdd?(residual: TensorData, projected: TensorData, mask: TensorData): TensorData;
  matmulTransposed?(a: TensorData, b: TensorData): TensorData;
  matmulTransposedA?(a: TensorData, b: TensorData): TensorData;
  addInplace?(a: TensorData, b: TensorData): void;
  scaleInplace?(a: TensorData, scalar: number): void;
  /** [rows, 3*D] -> three [rows, D] column blocks. */
  sliceQkv?(a: TensorData): [TensorData, TensorData, TensorData];
  /** Writes grad into a zeroed tensor of origShape at [starts, ends). */
  scatterSlice?(grad: TensorData, origShape: Shape, starts: number[], ends: number[]): TensorData;
  /** Deterministic mask (splitmix32 hash, bit-identical to Alpha's DropoutRng). */
  dropoutMask?(shape: Shape, seed: number, counter: number, p: number): TensorData;

  /** Q,K,V: [B*H, T, D] -> { output: [B*H, T, D], lse: [B*H, T] }. Always causal. */
  flashAttention?(
    Q: TensorData, K: TensorData, V: TensorData, T: number, scale: number, softCap: number,
  ): { output: TensorData; lse: TensorData };
  flashAttentionBackward?(
    Q: TensorData, K: TensorData, V: TensorData, O: TensorData, dO: TensorData, lse: TensorData,
    T: number, scale: number, softCap: number,
  ): { dQ: TensorData; dK: TensorData; dV: TensorData };

  broadcast?(a: TensorData, targetShape: Shape): TensorData;
  castDtype?(a: TensorData, dtype: Dtype): TensorData;
  sumOfSquares?(data: TensorData): TensorData;
  totalSumOfSquares?(tensors: TensorData[]): TensorData;
  /** Scalar f32: 0 when every element is finite, 1 otherwise. */
  checkFinite?(data: TensorData): TensorData;
  adamwStep?(
    params: TensorData, grads: TensorData, m: TensorData, v: TensorData,
    lr: number, beta1: number, beta2: number, eps: number, weightDecay: number,
    bc1: number, bc2: number, gradScale?: number,
  ): void;
}

export function shapeSize(shape: Shape): number {
  let n = 1;
  for (const d of shape) n *= d;
  return n;
}

export function dtypeBytes(d: Dtype): number {
  return d === "f16" ? 2 : d === "f64" ? 8 : 4;
}

export function dtypeArray(d: Dtype) {
  switch (d) {
    case "f16": return Uint16Array;
    case "f32": return Float32Array;
    case "f64": return Float64Array;
    case "i32": return Int32Array;
  }
}
