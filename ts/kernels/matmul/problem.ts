// The matmul problem a caller asks for, and the epilogue fused into it. Plain data, hashed as a
// struct for plan caching (style rule 5); names are derived for humans only.

export type MatmulDtype = "f32" | "f16" | "bf16";
export type Activation = "none" | "relu" | "gelu" | "silu";

/**
 * y = act(scale · (op(A) · op(B)) + bias[n]) · gelu'(preact[m, n]) + residual[m, n], written as
 * `outDtype`. Applied in f32 before the final conversion.
 */
export interface Epilogue {
  /** Multiplies the product before the bias. Default 1. */
  scale?: number;
  /** A length-N vector added to every row, in the output dtype unless `biasDtype` says otherwise. */
  bias?: boolean;
  /**
   * The bias vector's dtype (default: the output dtype). f32 beside a 16-bit output keeps an f32
   * master bias exact: the sum rounds once, at the store (the trainer's f16 qkv and fc outputs).
   */
  biasDtype?: MatmulDtype;
  act?: Activation;
  /** A batch×M×N tensor (output dtype) added last. */
  residual?: boolean;
  /**
   * Multiplies y by GELU's derivative at a batch×M×N tensor `preact` (output dtype; binding role
   * "preact"), before the residual: an MLP backward's dg = dy·W_proj becomes df = dg ⊙ gelu'(f)
   * for the pre-activation f, so dg is never stored. The tanh form's derivative (elementwise.ts
   * geluGrad), as the elementwise geluBackward computes it.
   */
  geluGrad?: boolean;
}

/**
 * C[b] (M×N, row-major) = op(A[b]) · op(B[b]).
 * A is M×K row-major, or K×M when transA (so op(A) = Aᵀ, matmulTransposedA = Aᵀ·B).
 * B is K×N row-major, or N×K when transB (matmulTransposed = A·Bᵀ).
 * Batches are contiguous; `broadcastB` uses one B for every batch (weights).
 */
export interface MatmulProblem {
  m: number;
  n: number;
  k: number;
  batch?: number;
  transA?: boolean;
  transB?: boolean;
  broadcastB?: boolean;
  dtype: MatmulDtype;
  /** Defaults to `dtype` (like torch.matmul). f32 output is always allowed. */
  outDtype?: MatmulDtype;
  /** 16-bit inputs only: accumulate in f16 (faster on NVIDIA, less accurate). */
  accF16?: boolean;
  epilogue?: Epilogue;
}

export function bytesOf(d: MatmulDtype): number {
  return d === "f32" ? 4 : 2;
}

export function normalize(p: MatmulProblem): Required<Omit<MatmulProblem, "epilogue">> & { epilogue: Required<Epilogue> } {
  for (const [name, v] of [["m", p.m], ["n", p.n], ["k", p.k], ["batch", p.batch ?? 1]] as const) {
    if (!Number.isInteger(v) || v < 1 || v > 2 ** 31) {
      throw new Error(`matmul: ${name}=${v} must be a positive integer`);
    }
  }
  const outDtype = p.outDtype ?? p.dtype;
  if (p.accF16 && p.dtype === "f32") throw new Error("matmul: accF16 needs f16/bf16 inputs");
  return {
    m: p.m,
    n: p.n,
    k: p.k,
    batch: p.batch ?? 1,
    transA: !!p.transA,
    transB: !!p.transB,
    broadcastB: !!p.broadcastB,
    dtype: p.dtype,
    outDtype,
    accF16: !!p.accF16,
    epilogue: {
      scale: p.epilogue?.scale ?? 1,
      bias: !!p.epilogue?.bias,
      biasDtype: p.epilogue?.biasDtype ?? outDtype,
      act: p.epilogue?.act ?? "none",
      residual: !!p.epilogue?.residual,
      geluGrad: !!p.epilogue?.geluGrad,
    },
  };
}

export type NormalizedProblem = ReturnType<typeof normalize>;
