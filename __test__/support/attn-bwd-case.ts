// One causal flash-attention backward problem for the interpreter-checked kernel tests
// (attention-cm-bwd, attention-cm-bwd-kv): seeded f16 q, k, v, dO, float64 references, Di, the
// kernels' input bindings in either layout, and the error of a read-back gradient; and the
// problems both run (BWD_CASES).
import { InterpRuntime } from "./interp-runtime.js";
import { Rng, randTensor } from "../harness.js";
import * as N from "../ref/nn.js";
import { packPush } from "../../ts/kernels/common.js";
import { FA_PUSH, FA_ROWS_PUSH } from "../../ts/kernels/attention.js";
import { fromF16Array, toF16Array } from "../../ts/f16.js";
import { headsOut, oIn, qkvIn, rowStatIn, type RowsLayout } from "./attn-layout.js";

export interface BwdCase { bh: number; T: number; D: number; pShared?: boolean; cap?: number; rows?: RowsLayout }

/**
 * T = 64 and 192 (not multiples of 128: the dK/dV kernel's 4-subgroup form only), 128 and 256 (T =
 * 192 and 256 stream several tiles past the diagonal); D = 16, 32, 48, 64; both layouts, softCap,
 * the shared-memory P/dS path.
 */
export const BWD_CASES: readonly BwdCase[] = [
  { bh: 2, T: 128, D: 64 },
  { bh: 3, T: 64, D: 32 },
  { bh: 1, T: 192, D: 16 },
  { bh: 1, T: 256, D: 32 },
  { bh: 1, T: 128, D: 48, pShared: true },
  // soft-capped scores (Alpha's default attention): a cap the scores reach, both P/dS paths
  { bh: 2, T: 128, D: 64, cap: 0.7 },
  { bh: 1, T: 192, D: 64, pShared: true, cap: 0.5 },
  // the rows layout (_rows kernels): packed q, k, v or three tensors, several heads per row
  { bh: 6, T: 64, D: 32, rows: { H: 3, packed: true } },
  { bh: 2, T: 128, D: 64, rows: { H: 2, packed: true } },
  { bh: 1, T: 256, D: 16, rows: { H: 1, packed: true } },
  { bh: 4, T: 192, D: 16, cap: 0.7, rows: { H: 2, packed: false } },
  { bh: 2, T: 128, D: 32, cap: 0.5, pShared: true, rows: { H: 2, packed: false } },
  { bh: 2, T: 64, D: 48, pShared: true, rows: { H: 1, packed: true } },
];

export function upload(rt: InterpRuntime, data: ArrayBufferView): number {
  const h = rt.createBuffer(data.byteLength);
  rt.uploadBuffer(h, data);
  return h;
}

/** The problem's inputs on a fresh interpreter: bindings q, k, v, dO, lse, di (as the kernels take them). */
export function bwdSetup(seed: number, c: BwdCase) {
  const { bh, T, D } = c;
  const rng = new Rng(seed + T + D + bh);
  const [q, k, v, dO] = [0, 1, 2, 3].map(() => randTensor(rng, [bh, T, D], "f16"));
  const scale = 1 / Math.sqrt(D);
  const cap = c.cap ?? 0;
  const fwd = N.attention(q.ref, k.ref, v.ref, scale, cap);
  const ref = N.attentionBackward(q.ref, k.ref, v.ref, dO.ref, scale, cap);
  // Di = rowsum(dO * O), as attn_rowdot makes it
  const di = new Float32Array(bh * T);
  for (let r = 0; r < bh * T; r++) {
    let acc = 0;
    for (let e = 0; e < D; e++) acc += dO.ref.data[r * D + e] * fwd.output.data[r * D + e];
    di[r] = acc;
  }
  const rt = new InterpRuntime();
  const inL = qkvIn([q.ref, k.ref, v.ref], T, c.rows);
  const qkvBufs = inL.datas.map((d) => upload(rt, toF16Array(d)));
  const ins = [...inL.bind.map((b) => qkvBufs[b]), upload(rt, toF16Array(oIn(dO.ref, T, c.rows)))];
  ins.push(upload(rt, Float32Array.from(fwd.lse.data)), upload(rt, rowStatIn(di, bh, T, c.rows)));
  // the gradients mirror q, k, v: one packed buffer, or three
  const out = () => rt.createBuffer(bh * T * D * 2 * (c.rows?.packed ? 3 : 1));
  const push = packPush(c.rows ? FA_ROWS_PUSH : FA_PUSH, { T, scale, cap: cap > 0 ? cap : 1, ...inL.push });
  return { rt, ins, ref, out, push, cap };
}

/** Largest absolute error of gradient `p` (0 dQ, 1 dK, 2 dV) read from `h`, and the largest |ref|. */
export function gradError(rt: InterpRuntime, h: number, want: { data: ArrayLike<number> }, c: BwdCase, p: number) {
  const width = (c.rows?.H ?? 1) * c.D * (c.rows?.packed ? 3 : 1);
  const got = headsOut(fromF16Array(new Uint16Array(rt.readBuffer(h))), c.bh, c.T, c.D, c.rows, width, c.rows?.packed ? p : 0);
  let worst = 0, scaleRef = 0;
  for (let i = 0; i < got.length; i++) {
    worst = Math.max(worst, Math.abs(got[i] - want.data[i]));
    scaleRef = Math.max(scaleRef, Math.abs(want.data[i]));
  }
  return { got, worst, scaleRef };
}
