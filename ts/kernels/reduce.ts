// Reductions, softmax and finiteness checks.
//
// reduce_rows: bindings x (read), out (write). Push {len, n, outBase, scale}. One workgroup
//   (ROW_WG threads) per row r covering x[r*len, min(n, (r+1)*len)); writes
//   out[outBase + r] = scale * sum(f(x)). Dispatch gridRows(rows). f is identity, square,
//   or a non-finite indicator (then the result is clamped to 1).
// reduce_strided: bindings x, out. Push {outer, dim, inner, scale}. One thread per output
//   (o, i), summing x[(o*dim + j)*inner + i] over j (adjacent threads read adjacent i).
// softmax_rows / logsoftmax_rows: bindings x, out. Push {dim}. One workgroup per row of the
//   last axis: max, sum of exp(x - max), then the normalized write.
// softmax_strided: same math for a non-last axis, one thread per (o, i) line.
// Numerics: f32 accumulation; the max is subtracted before exp, so large logits are safe.
import { abs, exp, f32, kernel, lit, log, max, min, select, u32, type KernelDesc, type Expr } from "../ir/index.js";
import type { Dtype } from "../types.js";
import { ROW_WG, WG, flatIndex, fromF32, rowIndex, storageOf, toF32, wgReduce, wgReduceSg } from "./common.js";

/** nonfinite maps each element to a 0/1 flag; flag sums flags. Both clamp the result to 1. */
export type ReduceFn = "sum" | "sumsq" | "nonfinite" | "flag";

export const REDUCE_ROWS_PUSH = { rows: "u32", len: "u32", n: "u32", outBase: "u32", scale: "f32" } as const;

function mapValue(fn: ReduceFn, x: Expr): Expr {
  if (fn === "sumsq") return x.mul(x);
  if (fn === "nonfinite") return select(abs(x).le(3.4028234663852886e38), lit(f32, 0), lit(f32, 1));
  return x;
}

export function reduceRowsKernel(inDtype: Dtype, outDtype: Dtype, fn: ReduceFn): KernelDesc {
  const k = kernel(`reduce_rows_${fn}_${inDtype}`, { workgroup: [ROW_WG] });
  const x = k.buffer("x", storageOf(inDtype), "read");
  const out = k.buffer("out", storageOf(outDtype), "write");
  const pc = k.push(REDUCE_ROWS_PUSH);
  const sh = k.shared("partial", f32, ROW_WG);
  const row = rowIndex(k, pc.rows);
  const t = k.let(k.localIndex, "t");
  const base = k.let(row.mul(pc.len), "base");
  const acc = k.var(f32, 0, "acc");
  k.for(t, pc.len, (j) => {
    const idx = k.let(base.add(j), "idx");
    k.if(idx.lt(pc.n), () => acc.set(acc.get().add(mapValue(fn, toF32(x.load(idx))))));
  }, { step: ROW_WG });
  const total = wgReduce(k, sh, t, acc.get(), (a, b) => a.add(b));
  k.if(t.eq(0), () => {
    const v = fn === "nonfinite" || fn === "flag" ? min(total, 1) : total.mul(pc.scale);
    out.store(pc.outBase.add(row), fromF32(v, outDtype));
  });
  return k.finish();
}

export const REDUCE_STRIDED_PUSH = { outer: "u32", dim: "u32", inner: "u32", scale: "f32" } as const;

export function reduceStridedKernel(dtype: Dtype, outDtype: Dtype = dtype): KernelDesc {
  const k = kernel(`reduce_strided_${dtype}${outDtype === dtype ? "" : `_${outDtype}`}`, { workgroup: [WG] });
  const x = k.buffer("x", storageOf(dtype), "read");
  const out = k.buffer("out", storageOf(outDtype), "write");
  const pc = k.push(REDUCE_STRIDED_PUSH);
  const i = flatIndex(k);
  k.if(i.ge(pc.outer.mul(pc.inner)), () => k.return());
  const o = k.let(i.div(pc.inner), "o");
  const inner = k.let(i.rem(pc.inner), "ii");
  const base = k.let(o.mul(pc.dim).mul(pc.inner).add(inner), "base");
  const acc = k.var(f32, 0, "acc");
  k.for(lit(u32, 0), pc.dim, (j) => {
    acc.set(acc.get().add(toF32(x.load(base.add(j.mul(pc.inner))))));
  });
  out.store(i, fromF32(acc.get().mul(pc.scale), outDtype));
  return k.finish();
}

export const SOFTMAX_ROWS_PUSH = { rows: "u32", dim: "u32" } as const;

export function softmaxRowsKernel(dtype: Dtype, logOut: boolean): KernelDesc {
  const k = kernel(`${logOut ? "logsoftmax" : "softmax"}_rows_${dtype}`, { workgroup: [ROW_WG] });
  const x = k.buffer("x", storageOf(dtype), "read");
  const out = k.buffer("out", storageOf(dtype), "write");
  const pc = k.push(SOFTMAX_ROWS_PUSH);
  const sh = k.shared("partial", f32, ROW_WG);
  const row = rowIndex(k, pc.rows);
  const t = k.let(k.localIndex, "t");
  const base = k.let(row.mul(pc.dim), "base");
  const m = k.var(f32, -Infinity, "m");
  k.for(t, pc.dim, (j) => m.set(max(m.get(), toF32(x.load(base.add(j))))), { step: ROW_WG });
  const rowMax = wgReduce(k, sh, t, m.get(), (a, b) => max(a, b));
  const s = k.var(f32, 0, "s");
  k.for(t, pc.dim, (j) => s.set(s.get().add(exp(toF32(x.load(base.add(j))).sub(rowMax)))), { step: ROW_WG });
  const sum = wgReduce(k, sh, t, s.get(), (a, b) => a.add(b));
  const lse = k.let(log(sum).add(rowMax), "lse");
  const inv = k.let(lit(f32, 1).div(sum), "inv");
  k.for(t, pc.dim, (j) => {
    const v = toF32(x.load(base.add(j)));
    const r = logOut ? v.sub(lse) : exp(v.sub(rowMax)).mul(inv);
    out.store(base.add(j), fromF32(r, dtype));
  }, { step: ROW_WG });
  return k.finish();
}

export const SOFTMAX_STRIDED_PUSH = { outer: "u32", dim: "u32", inner: "u32" } as const;

export function softmaxStridedKernel(dtype: Dtype, logOut: boolean): KernelDesc {
  const k = kernel(`${logOut ? "logsoftmax" : "softmax"}_strided_${dtype}`, { workgroup: [WG] });
  const x = k.buffer("x", storageOf(dtype), "read");
  const out = k.buffer("out", storageOf(dtype), "write");
  const pc = k.push(SOFTMAX_STRIDED_PUSH);
  const i = flatIndex(k);
  k.if(i.ge(pc.outer.mul(pc.inner)), () => k.return());
  const o = k.let(i.div(pc.inner), "o");
  const base = k.let(o.mul(pc.dim).mul(pc.inner).add(i.rem(pc.inner)), "base");
  const m = k.var(f32, -Infinity, "m");
  k.for(lit(u32, 0), pc.dim, (j) => m.set(max(m.get(), toF32(x.load(base.add(j.mul(pc.inner)))))));
  const mx = m.get();
  const s = k.var(f32, 0, "s");
  k.for(lit(u32, 0), pc.dim, (j) => s.set(s.get().add(exp(toF32(x.load(base.add(j.mul(pc.inner)))).sub(mx)))));
  const sum = s.get();
  const lse = k.let(log(sum).add(mx), "lse");
  k.for(lit(u32, 0), pc.dim, (j) => {
    const idx = k.let(base.add(j.mul(pc.inner)), "idx");
    const v = toF32(x.load(idx));
    out.store(idx, fromF32(logOut ? v.sub(lse) : exp(v.sub(mx)).div(sum), dtype));
  });
  return k.finish();
}


/**
 * softmax_rows_cached: the same contract as softmax_rows for rows of at most ROW_WG * vpt
 * elements: each thread loads its vpt elements once into registers (j = t + ROW_WG*r,
 * coalesced), so the row is read from memory once instead of three times.
 */
export function softmaxRowsCachedKernel(dtype: Dtype, logOut: boolean, vpt: number, sg = false): KernelDesc {
  const k = kernel(`${logOut ? "logsoftmax" : "softmax"}_rows_c${vpt}${sg ? "_sg" : ""}_${dtype}`, { workgroup: [ROW_WG] });
  const x = k.buffer("x", storageOf(dtype), "read");
  const out = k.buffer("out", storageOf(dtype), "write");
  const pc = k.push(SOFTMAX_ROWS_PUSH);
  const sh = k.shared("partial", f32, ROW_WG);
  const row = rowIndex(k, pc.rows);
  const t = k.let(k.localIndex, "t");
  const base = k.let(row.mul(pc.dim), "base");
  const cols = Array.from({ length: vpt }, (_, r) => k.let(t.add(r * ROW_WG), "col"));
  const vals = cols.map((c, r) => {
    const v = k.var(f32, -Infinity, `xv${r}`);
    k.if(c.lt(pc.dim), () => v.set(toF32(x.load(base.add(c)))));
    return v.get();
  });
  const localMax = vals.reduce((a, b) => max(a, b));
  const red = (v: Expr, fn: "add" | "max") =>
    sg ? wgReduceSg(k, sh, v, fn) : wgReduce(k, sh, t, v, fn === "max" ? (a, b) => max(a, b) : (a, b) => a.add(b));
  const rowMax = k.let(red(localMax, "max"), "rmax");
  const exps = vals.map((v, r) => k.let(select(cols[r].lt(pc.dim), exp(v.sub(rowMax)), lit(f32, 0)), "e"));
  const sum = k.let(red(exps.reduce((a, b) => a.add(b)), "add"), "sum");
  const lse = k.let(log(sum).add(rowMax), "lse");
  const inv = k.let(lit(f32, 1).div(sum), "inv");
  cols.forEach((c, r) => {
    k.if(c.lt(pc.dim), () => out.store(base.add(c), fromF32(logOut ? vals[r].sub(lse) : exps[r].mul(inv), dtype)));
  });
  return k.finish();
}

/** Values per thread for the register-cached row kernels, or 0 when the row is too long. */
export function cachedVpt(dim: number): number {
  for (const v of [1, 2, 4, 8, 16]) if (dim <= ROW_WG * v) return v;
  return 0;
}
