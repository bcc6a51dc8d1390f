// The slice of Alpha's Backend that the trainer uses, with the optional GPU ops it needs made
// required, plus the trainer-facing extras (flush, releaseGpuTensor) as optional members. Any
// Backend that implements these (HeliosBackend, the float64 reference in __test__) can train.
import type { Backend, Dtype, TensorData } from "../../ts/types.js";

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
  releaseGpuTensor?(t: TensorData): void;
  flush?(): void;
  syncGpu?(): void;
};

const NEEDED = [
  "matmulTransposed", "matmulTransposedA", "sliceQkv", "flashAttention", "flashAttentionBackward",
  "geluBackward", "layerNormBackward", "crossEntropyBackward", "embeddingBackward",
  "residualDropoutAdd", "dropoutMask", "totalSumOfSquares", "checkFinite", "adamwStep",
] as const;

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
