// Attention inputs and outputs of the kernel tests in either tensor layout (ts/kernels/attention.ts
// HeadLayout): [BH, T, D], or the rows layout with H heads side by side in [B*T, ...] rows (bh =
// b H + h), q, k, v packed in one [B*T, 3*H*D] tensor (bound three times) or three [B*T, H*D] ones.
import type { RefTensor } from "../ref/tensor.js";
import type { HeliosBackend } from "../../ts/backend.js";
import type { TensorData } from "../../ts/types.js";
import * as N from "../ref/nn.js";

export interface RowsLayout { H: number; packed: boolean }

/**
 * The data of the q, k, v buffers (float64 [BH, T, D] references) in `rows` (or as they are),
 * which buffer each of q, k, v binds, and the rows push fields (FA_ROWS_PUSH beyond FA_PUSH).
 */
export function qkvIn(qkv: RefTensor[], T: number, rows?: RowsLayout): { datas: Float64Array[]; bind: number[]; push: Record<string, number> } {
  if (!rows) return { datas: qkv.map((r) => r.data), bind: [0, 1, 2], push: {} };
  const C = rows.H * qkv[0].shape[2];
  if (rows.packed) return { datas: [N.headsToRows(qkv, T, rows.H).data], bind: [0, 0, 0], push: { H: rows.H, ld: 3 * C, kv: C } };
  return { datas: qkv.map((r) => N.headsToRows([r], T, rows.H).data), bind: [0, 1, 2], push: { H: rows.H, ld: C, kv: 0 } };
}

/** An o-side tensor (o, dO: [BH, T, D]) in `rows`: [B*T, H*D]. */
export function oIn(x: RefTensor, T: number, rows?: RowsLayout): Float64Array {
  return rows ? N.headsToRows([x], T, rows.H).data : x.data;
}

/**
 * Part p (0 = q, 1 = k, 2 = v) of values read back from a tensor in `rows` whose rows are `width`
 * wide (the packed gradient: 3 H D, others H D), as [BH, T, D]; as they are without `rows`.
 */
export function headsOut(vals: ArrayLike<number>, BH: number, T: number, D: number, rows: RowsLayout | undefined, width: number, p = 0): Float64Array {
  if (!rows) return Float64Array.from(vals);
  return N.rowsToHeads({ shape: [(BH / rows.H) * T, width], data: Float64Array.from(vals) }, T, rows.H, D, p).data;
}

/** Row statistics ([BH, T], as attn_rowdot makes di) in `rows`: [B*T, H] (what the rows kernels read). */
export function rowStatIn(x: ArrayLike<number>, BH: number, T: number, rows?: RowsLayout): Float32Array {
  if (!rows) return Float32Array.from(x);
  const H = rows.H, out = new Float32Array(BH * T);
  for (let bh = 0; bh < BH; bh++) for (let t = 0; t < T; t++) out[(Math.floor(bh / H) * T + t) * H + (bh % H)] = x[bh * T + t];
  return out;
}

/**
 * Flash attention forward and backward through HeliosBackend on one packed [B*T, 3*H*D] qkv tensor
 * (the trainer's layout), with the float64 references in the same rows layout: `output` [B*T, H*D]
 * and `dQKV` [B*T, 3*H*D].
 */
export function packedAttention(
  Bk: HeliosBackend, qkv: { td: TensorData; ref: RefTensor }, dO: { td: TensorData; ref: RefTensor }, T: number, H: number, D: number,
) {
  const scale = 1 / Math.sqrt(D);
  const layout = { heads: H, packed: true };
  const fwd = Bk.flashAttention(qkv.td, qkv.td, qkv.td, T, scale, 0, layout);
  const g = Bk.flashAttentionBackward(qkv.td, qkv.td, qkv.td, fwd.output, dO.td, fwd.lse, T, scale, 0, layout);
  const [q, k, v] = [0, 1, 2].map((p) => N.rowsToHeads(qkv.ref, T, H, D, p));
  const ref = N.attention(q, k, v, scale, 0);
  const refG = N.attentionBackward(q, k, v, N.rowsToHeads(dO.ref, T, H, D, 0), scale, 0);
  return { fwd, g, output: N.headsToRows([ref.output], T, H).data, dQKV: N.headsToRows([refG.dQ, refG.dK, refG.dV], T, H).data };
}
