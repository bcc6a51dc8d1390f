// The elementwise halves of attention backward done with dense score matrices (the products
// themselves are batched tensor-core matmuls: ts/ops/attention-dense.ts).
//
// attn_rowdot: bindings dO, O (read, storage of the tensors' dtype), di (write f32).
//   Push {rows, D}. di[r] = sum_d dO[r, d] * O[r, d] in f32: ROWDOT_LANES threads per row, their
//   partial sums added through shared memory. Dispatch grid1d(rows, ROWDOT_ROWS_PER_GROUP).
// attn_bwd_ds: bindings s (read f32, scale·Q Kᵀ), dp (read f32, dO Vᵀ), lse (read f32),
//   di (read f32), p (write f16), ds (write f16). Push {n4, T, causal}. For element (b, i, j)
//   of the [BH, T, T] scores: p = causal && j > i ? 0 : exp(s - lse[b, i]),
//   ds = p * (dp - di[b, i]); four consecutive columns per thread (T % 4 == 0, so the four
//   share a row). Dispatch grid1d(BH*T*T/4).
// Numerics: f32 throughout; P and dS are rounded to f16 once, as operands of the next
//   products (FlashAttention-2's backward rounds them the same way).
import { exp, f16, f32, kernel, lit, select, u32, vecOf, type KernelDesc } from "../ir/index.js";
import type { Dtype } from "../types.js";
import { flatIndex, storageOf, toF32 } from "./common.js";

export const ROWDOT_PUSH = { rows: "u32", D: "u32" } as const;

/** Threads per row of attn_rowdot: neighbouring threads read neighbouring elements. */
export const ROWDOT_LANES = 8;
/** Rows per 256-thread workgroup of attn_rowdot: dispatch grid1d(rows, ROWDOT_ROWS_PER_GROUP). */
export const ROWDOT_ROWS_PER_GROUP = 256 / ROWDOT_LANES;

export function attnRowDotKernel(dtype: Dtype): KernelDesc {
  const L = ROWDOT_LANES;
  const k = kernel(`attn_rowdot_${storageOf(dtype)}_l${L}`, { workgroup: [256] });
  const dO = k.buffer("dO", storageOf(dtype), "read");
  const O = k.buffer("O", storageOf(dtype), "read");
  const di = k.buffer("di", f32, "write");
  const pc = k.push(ROWDOT_PUSH);
  const part = k.shared("part", f32, 256);
  // thread i: row i / L, elements i % L, i % L + L, ...: each load instruction of a subgroup
  // covers whole rows, not one element of 32 rows
  const i = flatIndex(k);
  const r = k.let(i.div(L), "r");
  const j = k.let(i.rem(L), "j");
  const tid = k.let(k.localIndex, "tid");
  const live = k.let(r.lt(pc.rows), "live");
  const base = k.let(r.mul(pc.D), "base");
  const acc = k.var(f32, 0, "acc");
  k.if(live, () => {
    k.for(j, pc.D, (d) => {
      acc.set(acc.get().add(toF32(dO.load(base.add(d))).mul(toF32(O.load(base.add(d))))));
    }, { step: L });
  });
  part.store(tid, acc.get());
  k.barrier();
  k.if(live.and(j.eq(0)), () => {
    const sum = Array.from({ length: L }, (_, e) => part.load(tid.add(e))).reduce((a, c) => a.add(c));
    di.store(r, sum);
  });
  return k.finish();
}

export const DS_PUSH = { n4: "u32", T: "u32", causal: "u32" } as const;

export function attnBwdDsKernel(): KernelDesc {
  const k = kernel("attn_bwd_ds", { workgroup: [256] });
  const S = k.buffer("s", f32, "read");
  const dP = k.buffer("dp", f32, "read");
  const lse = k.buffer("lse", f32, "read");
  const di = k.buffer("di", f32, "read");
  const P = k.buffer("p", f16, "write");
  const dS = k.buffer("ds", f16, "write");
  const pc = k.push(DS_PUSH);
  const t = flatIndex(k);
  k.if(t.ge(pc.n4), () => k.return());
  const e0 = k.let(t.mul(4), "e0");
  const row = k.let(e0.div(pc.T), "row");
  const i = k.let(row.rem(pc.T), "i");
  const j0 = k.let(e0.rem(pc.T), "j0");
  const m = k.let(lse.load(row), "m");
  const d = k.let(di.load(row), "d");
  const s4 = k.let(S.loadVec(t, 4), "s4");
  const dp4 = k.let(dP.loadVec(t, 4), "dp4");
  const lanes = ["x", "y", "z", "w"] as const;
  const ps = lanes.map((c, q) => {
    const masked = pc.causal.ne(0).and(j0.add(q).gt(i));
    return k.let(select(masked, lit(f32, 0), exp(s4.swz(c).sub(m))), "p");
  });
  const dss = lanes.map((c, q) => k.let(ps[q].mul(dp4.swz(c).sub(d)), "ds"));
  P.store(t, vecOf("f32x4", ...ps).cast("f16x4"));
  dS.store(t, vecOf("f32x4", ...dss).cast("f16x4"));
  return k.finish();
}
