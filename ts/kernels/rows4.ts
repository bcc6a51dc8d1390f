// Register-resident row kernels with 4-wide loads for rows whose length is a multiple of 4
// (softmax / logSoftmax, layerNorm forward and layerNorm backward's dx over the last axis).
//
// softmax_rows4 / logsoftmax_rows4: bindings x (read), out (write). Push SOFTMAX_ROWS_PUSH
//   {rows, dim}. layernorm_fwd4: bindings x, w, b (read), out (write; x's dtype or another, as
//   layernorm_fwd). Push LN_PUSH
//   {rows, dim, eps}. layernorm_bwd_dx4: bindings x, w, g (read), dx, stats (write f32 [rows, 2]:
//   mean, rstd), push LN_PUSH: layernorm_bwd_dx's contract with x and g read once (and its
//   LnDxOpts: res loaded with g, before the reductions; and its g dtype: `_g_f16`).
//   All need dim % 4 == 0 and dim <= 4 * ROW_WG * v4.
// Dispatch: gridRows(rows), one workgroup per row of ROW_WG threads; layernorm_fwd4 and
//   layernorm_bwd_dx4 run ln4Shape's W threads (64 to 256, `_w<W>` in the name below ROW_WG).
// Thread t owns the vectors t, t + W, ... (< dim/4) of its row: every load is issued
//   unconditionally at a clamped index (so all v4 loads are in flight at once, no per-load
//   branch) and masked afterwards; the row is read once and written once. Reductions: subgroup
//   reduce, then one partial per subgroup in shared memory (wgReduceSg), or the shared-memory
//   tree where subgroups are unavailable.
// Numerics: as softmax_rows_cached / layernorm_fwd_cached (f32, max subtracted, centered
//   variance from registers).
import { exp, f32, kernel, lit, log, max, min, rsqrt, select, vecOf, type Buffer, type Expr, type KernelBuilder, type KernelDesc } from "../ir/index.js";
import type { Dtype } from "../types.js";
import { ROW_WG, rowIndex, storageOf, wgReduce, wgReduceSg } from "./common.js";
import { SOFTMAX_ROWS_PUSH } from "./reduce.js";
import { LN_DX_PLAIN, LN_PUSH, lnDxBuffers, lnDxPlain, lnDxTag, lnGradTag, lnOutTag, loadLnRes, storeLnDx, type LnDxOpts } from "./norm.js";

/** Vectors per thread for a row of `dim` elements, or 0 when the 4-wide kernels do not apply. */
export function rows4Vpt(dim: number): number {
  if (dim % 4 !== 0 || dim === 0) return 0;
  for (const v of [1, 2, 4, 8]) if (dim / 4 <= ROW_WG * v) return v;
  return 0;
}

interface RowVecs {
  row: Expr;
  t: Expr;
  base4: Expr;
  cols: Expr[];
  valid: Expr[];
  vals: Expr[];
  red: (v: Expr, fn: "add" | "max") => Expr;
}

/** Loads this thread's vectors of the row (f32x4), clamped in range; `valid` marks real ones. */
function loadRow(k: KernelBuilder, x: Buffer, dtype: Dtype, rows: Expr, dim: Expr, v4: number, sg: boolean, wg = ROW_WG): RowVecs {
  const sh = k.shared("partial", f32, wg);
  const row = rowIndex(k, rows);
  const t = k.let(k.localIndex, "t");
  const dim4 = k.let(dim.shr(2), "dim4");
  const last = k.let(dim4.sub(1), "last");
  const base4 = k.let(row.mul(dim4), "base4");
  const cols = Array.from({ length: v4 }, (_, r) => k.let(t.add(r * wg), "col"));
  const valid = cols.map((c) => k.let(c.lt(dim4), "ok"));
  const xv = x.as(storageOf(dtype), 4);
  const vals = cols.map((c) => k.let(xv.load(base4.add(min(c, last))).cast("f32x4"), "xv"));
  const red = (v: Expr, fn: "add" | "max") =>
    sg ? wgReduceSg(k, sh, v, fn) : wgReduce(k, sh, t, v, fn === "max" ? (a, b) => max(a, b) : (a, b) => a.add(b), wg);
  return { row, t, base4, cols, valid, vals, red };
}

// hsum, splat and tree are shared with layernorm_bwd4_dwdb (layernorm-bwd.ts), whose dx must
// round exactly as layernorm_bwd_dx4's
export const hsum = (v: Expr) => v.x.add(v.y).add(v.z.add(v.w));
const hmax = (v: Expr) => max(max(v.x, v.y), max(v.z, v.w));
export const splat = (s: Expr) => vecOf("f32x4", s);
export const tree = (xs: Expr[], f: (a: Expr, b: Expr) => Expr) => xs.reduce(f);

export function softmaxRows4Kernel(dtype: Dtype, logOut: boolean, v4: number, sg: boolean): KernelDesc {
  const k = kernel(`${logOut ? "logsoftmax" : "softmax"}_rows4_v${v4}${sg ? "_sg" : ""}_${dtype}`, { workgroup: [ROW_WG] });
  const x = k.buffer("x", storageOf(dtype), "read");
  const out = k.buffer("out", storageOf(dtype), "write");
  const pc = k.push(SOFTMAX_ROWS_PUSH);
  const { base4, cols, valid, vals, red } = loadRow(k, x, dtype, pc.rows, pc.dim, v4, sg);
  const localMax = tree(vals.map((v, r) => select(valid[r], hmax(v), lit(f32, "-inf"))), (a, b) => max(a, b));
  const rowMax = k.let(red(localMax, "max"), "rmax");
  const mx = k.let(splat(rowMax), "mx");
  const exps = vals.map((v) => k.let(exp(v.sub(mx)), "e"));
  const localSum = tree(exps.map((e, r) => select(valid[r], hsum(e), lit(f32, 0))), (a, b) => a.add(b));
  const sum = k.let(red(localSum, "add"), "sum");
  const ov = out.as(storageOf(dtype), 4);
  const shift = k.let(splat(log(sum).add(rowMax)), "lse");
  const inv = k.let(lit(f32, 1).div(sum), "inv");
  cols.forEach((c, r) => {
    const y = logOut ? vals[r].sub(shift) : exps[r].mul(inv);
    k.if(valid[r], () => ov.store(base4.add(c), y.cast(`${storageOf(dtype)}x4` as "f32x4")));
  });
  return k.finish();
}

/**
 * LayerNorm's row shape for rows of `dim` (dim % 4 == 0), forward (layernorm_fwd4) and backward
 * (layernorm_bwd_dx4 and the fused layernorm_bwd4_dwdb's slots, which must match it: dx bit for
 * bit): the fewest threads per row, at least 64, whose vectors per thread stay at most 4 (`w<wg>`
 * in the names below ROW_WG). A GPT-2 row (768) then takes 64 threads of 3 vectors instead of 256
 * threads of which 64 idle, so an SM holds 4x the rows in flight: H200, the trainer's LayerNorm
 * forward (16384 × 768 f32 → f16) took 33 µs at 256 threads a row (2.3 TB/s).
 */
export function ln4Shape(dim: number): { v4: number; wg: number } | null {
  if (rows4Vpt(dim) === 0) return null;
  for (let wg = 64; wg < ROW_WG; wg *= 2) if (dim / 4 <= wg * 4) return { v4: Math.ceil(dim / 4 / wg), wg };
  return { v4: rows4Vpt(dim), wg: ROW_WG };
}

/** The `_w<wg>` name tag of a row shape narrower than ROW_WG (ln4Shape). */
export const widthTag = (wg: number) => (wg !== ROW_WG ? `_w${wg}` : "");

export function layerNormFwd4Kernel(dtype: Dtype, wDtype: Dtype, v4: number, sg: boolean, outDtype: Dtype = dtype, wg = ROW_WG): KernelDesc {
  const k = kernel(`layernorm_fwd4_v${v4}${widthTag(wg)}${sg ? "_sg" : ""}_${dtype}${lnOutTag(dtype, outDtype)}`, { workgroup: [wg] });
  const x = k.buffer("x", storageOf(dtype), "read");
  const w = k.buffer("w", storageOf(wDtype), "read");
  const b = k.buffer("b", storageOf(wDtype), "read");
  const out = k.buffer("out", storageOf(outDtype), "write");
  const pc = k.push(LN_PUSH);
  const { base4, cols, valid, vals, red } = loadRow(k, x, dtype, pc.rows, pc.dim, v4, sg, wg);
  const dimF = k.let(pc.dim.cast(f32), "dimf");
  const localSum = tree(vals.map((v, r) => select(valid[r], hsum(v), lit(f32, 0))), (p, q) => p.add(q));
  const mean = k.let(red(localSum, "add").div(dimF), "mean");
  const mv = k.let(splat(mean), "mv");
  const cen = vals.map((v) => k.let(v.sub(mv), "c"));
  const localSq = tree(cen.map((c, r) => select(valid[r], hsum(c.mul(c)), lit(f32, 0))), (p, q) => p.add(q));
  const rstd = k.let(rsqrt(red(localSq, "add").div(dimF).add(pc.eps)), "rstd");
  const wv = w.as(storageOf(wDtype), 4), bv = b.as(storageOf(wDtype), 4), ov = out.as(storageOf(outDtype), 4);
  cols.forEach((c, r) => {
    k.if(valid[r], () => {
      const y = cen[r].mul(rstd).mul(wv.load(c).cast("f32x4")).add(bv.load(c).cast("f32x4"));
      ov.store(base4.add(c), y.cast(`${storageOf(outDtype)}x4` as "f32x4"));
    });
  });
  return k.finish();
}


/** `o` (norm.ts, LnDxOpts): a residual added into dx and an f16 copy, in the same pass; g of `gDtype` (lnGradTag); `wg` threads a row (ln4Shape). */
export function layerNormBwdDx4Kernel(
  dtype: Dtype, wDtype: Dtype, v4: number, sg: boolean, o: LnDxOpts = LN_DX_PLAIN, gDtype: Dtype = dtype, wg = ROW_WG,
): KernelDesc {
  const k = kernel(`layernorm_bwd_dx4_v${v4}${widthTag(wg)}${sg ? "_sg" : ""}_${dtype}${lnGradTag(dtype, gDtype)}${lnDxTag(o)}`, { workgroup: [wg] });
  const x = k.buffer("x", storageOf(dtype), "read");
  const w = k.buffer("w", storageOf(wDtype), "read");
  const g = k.buffer("g", storageOf(gDtype), "read");
  const bufs = lnDxPlain(o) ? null : lnDxBuffers(k, dtype, o);
  const dx = bufs ? bufs.dx : k.buffer("dx", storageOf(dtype), "write");
  const stats = k.buffer("stats", f32, "write");
  const pc = k.push(LN_PUSH);
  const { row, t, base4, cols, valid, vals, red } = loadRow(k, x, dtype, pc.rows, pc.dim, v4, sg, wg);
  const gv = g.as(storageOf(gDtype), 4), wv = w.as(storageOf(wDtype), 4), dxv = dx.as(storageOf(dtype), 4);
  const last = k.let(pc.dim.shr(2).sub(1), "glast");
  // dy = g * w for this thread's vectors (loaded at clamped indices like x, masked in the sums)
  const dys = cols.map((c) => k.let(gv.load(base4.add(min(c, last))).cast("f32x4").mul(wv.load(min(c, last)).cast("f32x4")), "dy"));
  // the residual is loaded with g, in flight during the reductions
  const res = bufs ? cols.map((c) => loadLnRes(bufs, base4.add(min(c, last)), 4)) : [];
  const dimF = k.let(pc.dim.cast(f32), "dimf");
  const mask = (xs: Expr[]) => tree(xs.map((v, r) => select(valid[r], v, lit(f32, 0))), (p, q) => p.add(q));
  const mean = k.let(red(mask(vals.map(hsum)), "add").div(dimF), "mean");
  const mv = k.let(splat(mean), "mv");
  const cen = vals.map((v) => k.let(v.sub(mv), "c"));
  const rstd = k.let(rsqrt(red(mask(cen.map((c) => hsum(c.mul(c)))), "add").div(dimF).add(pc.eps)), "rstd");
  const xh = cen.map((c) => k.let(c.mul(rstd), "xh"));
  const sum1 = k.let(red(mask(dys.map(hsum)), "add"), "sum1");
  const sum2 = k.let(red(mask(dys.map((d, r) => hsum(d.mul(xh[r])))), "add"), "sum2");
  const a = k.let(splat(sum1.div(dimF)), "a"), b = k.let(splat(sum2.div(dimF)), "b"), rv = k.let(splat(rstd), "rv");
  cols.forEach((c, r) => {
    const v = dys[r].sub(a.add(xh[r].mul(b))).mul(rv);
    if (bufs) k.if(valid[r], () => storeLnDx(k, bufs, base4.add(c), v, res[r], 4));
    else k.if(valid[r], () => dxv.store(base4.add(c), v.cast(`${storageOf(dtype)}x4` as "f32x4")));
  });
  k.if(t.eq(0), () => {
    stats.store(row.mul(2), mean);
    stats.store(row.mul(2).add(1), rstd);
  });
  return k.finish();
}
