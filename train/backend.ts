// The slice of Alpha's Backend that the trainer uses, with the optional GPU ops it needs made
// required, plus the trainer-facing extras (flush, releaseGpuTensor) as optional members. Any
// Backend that implements these (HeliosBackend, the float64 reference in __test__) can train.
import type { Backend, Dtype, TensorData } from "../ts/types.js";
import type { AttentionLayout } from "../ts/ops/attention.js";
import type { AdamwStepScalars, AdamwTensors } from "../ts/ops/optim.js";

type Required_<T, K extends keyof T> = T & { [P in K]-?: NonNullable<T[P]> };

export type TrainBackend = Required_<
  Pick<
    Backend,
    | "name" | "zeros" | "fromArray" | "add" | "mul" | "sum" | "matmul" | "reshape" | "transpose" | "cat" | "slice"
    | "embedding" | "layerNorm" | "gelu" | "crossEntropy"
    | "matmulTransposed" | "matmulTransposedA" | "sliceQkv" | "flashAttention" | "flashAttentionBackward"
    | "geluBackward" | "layerNormBackward" | "crossEntropyBackward" | "embeddingBackward"
    | "residualDropoutAdd" | "dropoutMask" | "totalSumOfSquares" | "checkFinite" | "adamwStep"
  >,
  | "matmulTransposed" | "matmulTransposedA" | "sliceQkv" | "flashAttention" | "flashAttentionBackward"
  | "geluBackward" | "layerNormBackward" | "crossEntropyBackward" | "embeddingBackward"
  | "residualDropoutAdd" | "dropoutMask" | "totalSumOfSquares" | "checkFinite" | "adamwStep"
> & {
  /** Needed only for 16-bit matmul operands (GPTOptions.matmul16). */
  castDtype?(a: TensorData, dtype: Dtype): TensorData;
  /**
   * HeliosBackend: castDtype(W, dtype) and its transpose for every matrix W, in a few dispatches
   * (the matmul16 weight copies of a step); without it, castDtype and transpose per matrix.
   */
  castTransposeMulti?(ws: TensorData[], dtype: Dtype): { cast: TensorData; transposed: TensorData }[];
  /**
   * HeliosBackend: crossEntropy's loss and crossEntropyBackward's dlogits (gradient g) from one
   * pass over the logits (with opts.splitGrad, f32: dlogits also written split for the x3
   * products, as splitOperand); without it, the two ops.
   */
  crossEntropyWithGrad?(logits: TensorData, targets: TensorData, g: TensorData, opts?: { splitGrad?: readonly ("rows" | "whole")[] }): { loss: TensorData; dlogits: TensorData };
  /**
   * HeliosBackend: y = x·Wᵀ + bias (+ residual) written as outDtype, bias and residual in the
   * matmul epilogue (W [out, in], or [in, out] with inOut); with geluGradOf = f, y is multiplied
   * by gelu'(f) before the residual (geluBackward(f, x·W) in one product: the MLP backward);
   * with xT, x is stored [K, M] (weight gradients dyᵀ·x written in f32 by the product).
   * Used when `fusedLinear` (matmul16 and f32).
   */
  linear?(x: TensorData, W: TensorData, bias: TensorData | null, opts?: { inOut?: boolean; xT?: boolean; residual?: TensorData | null; geluGradOf?: TensorData | null; outDtype?: Dtype }): TensorData;
  /**
   * HeliosBackend.splitOperand: f32 t is about to be read by f32 products (or split attention) in
   * these layouts, `reads` times each; a backend whose f32 products split their operands splits it
   * now, once. Asked for only in f32 where `fusedLinear`.
   */
  splitOperand?(t: TensorData, layouts: readonly ("rows" | "whole")[], reads?: number, opts?: { evaluate?: boolean }): boolean;
  /** HeliosBackend: whether f32 products split their operands (where splitOperand does something). */
  readonly f32Splits?: boolean;
  /**
   * HELIOS_TRAIN_FUSED_LINEAR (HeliosBackend): the layers through linear() (GELU's backward in
   * the epilogue of the product before it included); under matmul16 also f16 LayerNorm outputs,
   * in f32 the operand splits made ahead (splitOperand).
   */
  readonly fusedLinear?: boolean;
  /** layerNorm writing `opts.outDtype` (HeliosBackend; asked for only where `fusedLinear`). */
  layerNorm(x: TensorData, w: TensorData, b: TensorData, eps: number, opts?: { outDtype?: Dtype }): TensorData;
  /**
   * layerNormBackward with `opts` (HeliosBackend; asked for only where `fusedLinear`): dx =
   * residual + dx_LN, and dx16 (dx in f16, castDtype's rounding) with f16Copy, from one pass;
   * there g may also be f16 with an f32 x (the f16 dh products, read as they are).
   */
  layerNormBackward(
    x: TensorData, w: TensorData, g: TensorData, eps: number, opts?: { residual?: TensorData | null; f16Copy?: boolean },
  ): { dx: TensorData; dw: TensorData; db: TensorData; dx16?: TensorData };
  releaseGpuTensor?(t: TensorData): void;
  /** Computes pending (lazily fused) tensors now, so the buffers they read can go back early. */
  evaluate?(...ts: TensorData[]): void;
  flush?(): void;
  syncGpu?(): void;
  /**
   * embeddingBackward from the indices' CSR lists (HeliosBackend): the captured step's token
   * embedding, whose indices only the device holds (the lists are computed on the host per step).
   */
  embeddingBackwardCsr?(offsets: TensorData, positions: TensorData, g: TensorData, vocab: number): TensorData;
  /** `sum` with an f32 result (HeliosBackend): bias gradients from f16 copies under matmul16. */
  sumF32?(a: TensorData, axis?: number, keepdims?: boolean): TensorData;
  /**
   * "fused" (HeliosBackend by default, HELIOS_ATTN_HEAD_LAYOUT): the trainer runs attention on the
   * qkv projection's rows, flashAttention(qkv, qkv, qkv, ..., {heads, packed: true}), with no head
   * transposes; absent or "copy": on [B*H, T, D] copies.
   */
  readonly attnHeadLayout?: "fused" | "copy";
  /** Backend's flashAttention, with the layout argument of a backend whose attnHeadLayout is "fused". */
  flashAttention(
    Q: TensorData, K: TensorData, V: TensorData, T: number, scale: number, softCap: number, layout?: AttentionLayout,
  ): { output: TensorData; lse: TensorData };
  flashAttentionBackward(
    Q: TensorData, K: TensorData, V: TensorData, O: TensorData, dO: TensorData, lse: TensorData,
    T: number, scale: number, softCap: number, layout?: AttentionLayout,
  ): { dQ: TensorData; dK: TensorData; dV: TensorData };
  /**
   * AdamW over every parameter in a few dispatches, in place (HeliosBackend): used instead of
   * one adamwStep / adamwStepDevice per tensor when `multiTensorAdamw` is true.
   */
  adamwStepMulti?(sets: AdamwTensors[], hyper: TensorData | AdamwStepScalars, beta1: number, beta2: number, eps: number): void;
  /** HELIOS_MULTI_TENSOR_ADAMW (HeliosBackend). */
  readonly multiTensorAdamw?: boolean;
} & Partial<CaptureOps>;

/** A captured batch, as the backend hands it out (opaque to the trainer). */
export type CaptureHandle = object;

/**
 * What a captured step needs beyond the eager ops (HeliosBackend has all of it): the capture
 * calls, in-place uploads into the step's input tensors, and the per-step scalar variants that
 * read lr, bias corrections, gradScale and the dropout counter from device tensors.
 */
export interface CaptureOps extends Pick<Backend, "full" | "div" | "sqrt" | "scale" | "clamp"> {
  readonly canCapture: boolean;
  beginCapture(): void;
  endCapture(...outputs: TensorData[]): CaptureHandle;
  abortCapture(): void;
  replay(c: CaptureHandle): void;
  destroyCapture(c: CaptureHandle): void;
  writeTensor(t: TensorData, data: ArrayLike<number>): void;
  adamwStepDevice(
    params: TensorData, grads: TensorData, m: TensorData, v: TensorData, hyper: TensorData,
    beta1: number, beta2: number, eps: number, weightDecay: number,
  ): void;
  dropoutMaskAt(shape: number[], seed: number, counter: TensorData, offset: number, p: number): TensorData;
}

const CAPTURE_OPS = [
  "full", "div", "sqrt", "scale", "clamp", "beginCapture", "endCapture", "abortCapture", "replay", "destroyCapture", "writeTensor", "adamwStepDevice", "dropoutMaskAt",
] as const;

/** The backend's capture ops when it has them all and capture is enabled there; null otherwise. */
export function captureOps(b: TrainBackend): (TrainBackend & CaptureOps) | null {
  const r = b as unknown as Record<string, unknown>;
  if (!CAPTURE_OPS.every((k) => typeof r[k] === "function") || r.canCapture !== true) return null;
  return b as TrainBackend & CaptureOps;
}

const NEEDED = [
  "matmulTransposed", "matmulTransposedA", "sliceQkv", "flashAttention", "flashAttentionBackward",
  "geluBackward", "layerNormBackward", "crossEntropyBackward", "embeddingBackward",
  "residualDropoutAdd", "dropoutMask", "totalSumOfSquares", "checkFinite", "adamwStep",
] as const;

/** Whether the optimizer updates every parameter with adamwStepMulti (HELIOS_MULTI_TENSOR_ADAMW on a backend that has it). */
export function multiTensor(b: TrainBackend): b is TrainBackend & Required<Pick<TrainBackend, "adamwStepMulti">> {
  return b.multiTensorAdamw === true && typeof b.adamwStepMulti === "function";
}

/** Narrows a Backend to a TrainBackend, naming every missing op at once. */
export function asTrainBackend(b: Backend): TrainBackend {
  const missing = NEEDED.filter((k) => typeof (b as unknown as Record<string, unknown>)[k] !== "function");
  if (missing.length > 0) throw new Error(`backend ${b.name} cannot train: it lacks ${missing.join(", ")}`);
  return b as TrainBackend;
}

/**
 * Temporaries of one step. Everything `keep`-ed is released by `releaseAll`, so each step
 * returns its leases to the pool and pool bytes stay flat over steps.
 */
export class Scope {
  private readonly held: TensorData[] = [];
  constructor(private readonly B: TrainBackend) {}
  keep<T extends TensorData>(t: T): T {
    this.held.push(t);
    return t;
  }
  /** Releases one tensor now (it must have been kept here). */
  drop(t: TensorData): void {
    const i = this.held.lastIndexOf(t);
    if (i < 0) return;
    this.held.splice(i, 1);
    this.B.releaseGpuTensor?.(t);
  }
  /** Stops holding `t` without releasing it (ownership passes to the caller). */
  forget<T extends TensorData>(t: T): T {
    const i = this.held.lastIndexOf(t);
    if (i >= 0) this.held.splice(i, 1);
    return t;
  }
  releaseAll(): void {
    const rel = this.B.releaseGpuTensor?.bind(this.B);
    if (rel) for (const t of this.held) rel(t);
    this.held.length = 0;
  }
}

/** Reads a one-element tensor (waits for the work it depends on). */
export function scalar(t: TensorData): number {
  return Number(t.data[0]);
}
