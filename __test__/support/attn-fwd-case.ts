// One forward problem of the tensor-core flash attention tests (attention-cm.test.ts): seeded f16
// inputs in either tensor layout, one dispatch in the kernel interpreter, O and lse against float64
// attention.
import assert from "node:assert/strict";
import { InterpRuntime } from "./interp-runtime.js";
import { Rng, randTensor, sampleOf } from "../harness.js";
import * as N from "../ref/nn.js";
import { packPush } from "../../ts/kernels/common.js";
import { FA_PUSH, FA_ROWS_PUSH } from "../../ts/kernels/attention.js";
import { fromF16Array, toF16Array } from "../../ts/f16.js";
import type { KernelDesc } from "../../ts/ir/index.js";
import { headsOut, qkvIn, type RowsLayout } from "./attn-layout.js";

/** `rows`: the tensors in the rows layout with H heads (bh = B H), q, k, v packed in one tensor or three. */
export interface Case { bh: number; T: number; D: number; cap: number; scale?: number; growing?: boolean; rows?: RowsLayout }

/**
 * Runs one dispatch of `desc` (`rows` query rows per workgroup) and compares O and lse with float64
 * attention on the same f16 inputs; returns them (O as f16 bits). `growing` scales key j by 1 + j/16
 * so row maxima keep rising across tiles (the lazy softmax must rescale late).
 */
export function check(label: string, desc: KernelDesc, rows: number, c: Case): { o: Uint16Array; lse: Float32Array } {
  const { bh, T, D, cap } = c;
  const rng = new Rng(71 + T + D + (c.growing ? 5 : 0));
  const q = randTensor(rng, [bh, T, D], "f16"), v = randTensor(rng, [bh, T, D], "f16");
  let k = randTensor(rng, [bh, T, D], "f16");
  if (c.growing) k = sampleOf([bh, T, D], Array.from(k.ref.data, (x, i) => x * (1 + Math.floor(i / D) % T / 16)), "f16");
  const rt = new InterpRuntime();
  const inL = qkvIn([q.ref, k.ref, v.ref], T, c.rows);
  const uploaded = inL.datas.map((d) => {
    const h = rt.createBuffer(d.length * 2);
    rt.uploadBuffer(h, toF16Array(d));
    return h;
  });
  const bufs = inL.bind.map((b) => uploaded[b]);
  const o = rt.createBuffer(bh * T * D * 2), lse = rt.createBuffer(bh * T * 4);
  const scale = c.scale ?? 1 / Math.sqrt(D);
  const pipe = rt.compileKernel(JSON.stringify(desc));
  rt.beginBatch();
  rt.recordDispatch(pipe, [...bufs, o, lse], [T / rows, bh, 1], packPush(c.rows ? FA_ROWS_PUSH : FA_PUSH, { T, scale, cap: cap > 0 ? cap : 1, ...inL.push }));
  rt.submitBatch(); // the interpreter runs dispatches as they are recorded
  const ref = N.attention(q.ref, k.ref, v.ref, scale, cap);
  // rows: o is [B*T, H*D]; compared head by head
  const oBits = new Uint16Array(rt.readBuffer(o));
  const got = headsOut(fromF16Array(oBits), bh, T, D, c.rows, (c.rows?.H ?? 1) * D);
  const gotLse = new Float32Array(rt.readBuffer(lse));
  let worst = 0;
  for (let i = 0; i < got.length; i++) worst = Math.max(worst, Math.abs(got[i] - ref.output.data[i]));
  assert.ok(worst < 1.5e-2 && got.some((x) => x !== 0), `${label}: output max abs error ${worst}`);
  let worstL = 0;
  for (let i = 0; i < gotLse.length; i++) worstL = Math.max(worstL, Math.abs(gotLse[i] - ref.lse.data[i]) / Math.max(1, Math.abs(ref.lse.data[i])));
  assert.ok(worstL < 2e-3, `${label}: lse max error ${worstL}`);
  if (process.env.HELIOS_TEST_VERBOSE) console.log(`${label} errors: output ${worst}, lse ${worstL}`);
  return { o: oBits, lse: gotLse };
}
