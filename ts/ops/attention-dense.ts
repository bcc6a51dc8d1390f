// Attention backward with dense score matrices: the five products (S = Q Kᵀ, dP = dO Vᵀ,
// dV = Pᵀ dO, dQ = dS K, dK = dSᵀ Q) are batched matmuls through the planner — tensor cores
// for f16 on devices with cooperative matrices — and one elementwise pass makes P and dS
// (ts/kernels/attention-dense.ts). It trades memory (two f32 and two f16 [BH, T, T] buffers,
// transient) for running every FLOP on tensor cores. The tensor-core flash kernels
// (ts/kernels/attention-cm-bwd.ts) come first where they serve; the fused SIMT flash kernels stay
// the path for f32, softCap and devices without cooperative matrices. HELIOS_ATTN_BWD picks (README).
import type { TensorData } from "../types.js";
import { type Engine, run } from "../engine.js";
import type { HeliosTensor } from "../tensor.js";
import { grid1d } from "../kernels/common.js";
import { DS_PUSH, ROWDOT_PUSH, ROWDOT_ROWS_PER_GROUP, attnBwdDsKernel, attnRowDotKernel } from "../kernels/attention-dense.js";
import { planned } from "./matmul.js";

/** Largest binding the dense path makes (the runtime refuses bindings past 2^31 - 1 bytes). */
const MAX_SCORE_BYTES = 2 ** 31 - 1;

export function denseBackwardApplies(E: Engine, dtype: string, BH: number, T: number, softCap: number): boolean {
  const mode = E.config.attnBackward;
  if (mode === "flash" || mode === "cm" || dtype !== "f16" || softCap > 0 || T % 4 !== 0) return false;
  if (BH * T * T * 4 > MAX_SCORE_BYTES) return false;
  return mode === "dense" || !!E.device.coopMatSupported;
}

/** Di = rowsum(dO * O) over `rows` rows of D (f32). */
export function attnRowDot(E: Engine, op: string, dO: TensorData, O: TensorData, rows: number, D: number): HeliosTensor {
  const di = E.alloc([rows], "f32");
  run(E, op, { attnRowDot: dO.dtype }, () => attnRowDotKernel(dO.dtype), ROWDOT_PUSH, { rows, D }, [dO, O], [di], grid1d(rows, ROWDOT_ROWS_PER_GROUP));
  return di;
}

export function attentionBackwardDense(
  E: Engine, op: string, Q: TensorData, K: TensorData, V: TensorData, O: TensorData, dO: TensorData, lse: TensorData,
  BH: number, T: number, D: number, scale: number,
): { dQ: HeliosTensor; dK: HeliosTensor; dV: HeliosTensor } {
  const product = (A: TensorData, B: TensorData, out: HeliosTensor, m: number, n: number, k: number, tA: boolean, tB: boolean, s?: number) => {
    if (!planned(E, op, A, B, out, { m, n, k, batch: BH }, tA, tB, false, { scale: s })) {
      throw new Error(`helios: internal error: ${op}: the matmul planner refused a ${A.dtype} product`);
    }
  };
  const S = E.alloc([BH, T, T], "f32"), dP = E.alloc([BH, T, T], "f32");
  product(Q, K, S, T, T, D, false, true, scale);
  product(dO, V, dP, T, T, D, false, true);
  const di = attnRowDot(E, op, dO, O, BH * T, D);
  const P = E.alloc([BH, T, T], "f16"), dS = E.alloc([BH, T, T], "f16");
  const n4 = (BH * T * T) / 4;
  run(E, op, { attnBwdDs: 1 }, attnBwdDsKernel, DS_PUSH, { n4, T, causal: 1 }, [S, dP, lse, di], [P, dS], grid1d(n4));
  for (const t of [S, dP, di]) E.release(t);
  const dQ = E.alloc([BH, T, D], "f16"), dK = E.alloc([BH, T, D], "f16"), dV = E.alloc([BH, T, D], "f16");
  product(P, dO, dV, T, D, T, true, false);
  product(dS, K, dQ, T, D, T, false, false, scale);
  product(dS, Q, dK, T, D, T, true, false, scale);
  for (const t of [P, dS]) E.release(t);
  return { dQ, dK, dV };
}
