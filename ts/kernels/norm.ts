// LayerNorm over the last axis.
//
// layernorm_fwd: bindings x, w, b (read), out (write; x's dtype, or another: `_out_<dtype>`).
//   Push {dim, eps}. One workgroup per row: mean, then the centered variance (two passes over the
//   row: no catastrophic cancellation), then out = (x - mean) * rstd * w + b, computed in f32 and
//   rounded once to out's dtype. Dispatch gridRows(rows).
// layernorm_bwd_dx: bindings x, w, g (read), dx (write). Push {dim, eps}. One workgroup per
//   row: recomputes mean/rstd, sums dy = g*w and dy*xhat, writes
//   dx = rstd * (dy - (sum(dy) + xhat * sum(dy*xhat)) / dim).
// layernorm_bwd_dwdb: bindings x, g (read), dw, db (write). Push {rows, dim, eps}. One thread
//   per column j walks every row (recomputing that row's mean/rstd from a per-row stats
//   buffer: binding 2 holds [mean, rstd] pairs written by the dx kernel). For few rows; many rows
//   take layernorm_bwd_dwdb_cols (below), a column sum. Rows with dim % 4 == 0 up to 4096 take
//   neither: layernorm_bwd4_dwdb (layernorm-bwd.ts) sums dw/db partials in the dx pass.
// The three dx kernels (layernorm_bwd_dx, layernorm_bwd_dx4, layernorm_bwd4_dwdb) take LnDxOpts
//   (issue 27): `_res_<dtype>` binds res (read, after g) and writes dx = res + dx_LN, dx_LN first
//   rounded to x's dtype, one f32 add rounded once to res's dtype (what add(res, dx) computes);
//   `_h16` binds dx16 (write, after dx) and writes that dx rounded to f16 (castDtype's
//   conversion). Without options the kernels are built exactly as before (same names, same IR).
// Every LayerNorm-backward kernel that reads g (these, layernorm_bwd4_dwdb, layernorm_bwd_dwdb_cols)
//   takes g's dtype: an f16 g beside an f32 x (`_g_f16`, lnGradTag) is converted to f32 on load,
//   exactly as castDtype(g, "f32") would be, so the results are the f32 g's bit for bit with half
//   the g bytes. g in x's dtype builds the kernels as before.
import { f32, kernel, lit, rsqrt, select, type Buffer, type Expr, type KernelBuilder, type KernelDesc } from "../ir/index.js";
import type { Dtype } from "../types.js";
import { ROW_WG, WG, flatIndex, fromF32, rowIndex, storageOf, toF32, wgReduce, wgReduceSg, type StorageElem } from "./common.js";
import { COLS_WG, COLSUM_PUSH, columnSums, loadVector } from "./colsum.js";

/** Rows a thread of layernorm_bwd_dwdb_cols loads before adding them (two 16-byte loads each; 4 beat 1 and 2 on the H200). */
export const LN_COLS_UNROLL = 4;

export const LN_PUSH = { rows: "u32", dim: "u32", eps: "f32" } as const;

/**
 * What a LayerNorm-backward dx kernel does beyond dx (header): `res` adds a residual gradient of
 * that dtype (x's or f32; dx is then written in it), `copy16` writes an f16 copy of dx as well.
 */
export interface LnDxOpts {
  readonly res: Dtype | null;
  readonly copy16: boolean;
}

export const LN_DX_PLAIN: LnDxOpts = Object.freeze({ res: null, copy16: false });

export const lnDxPlain = (o: LnDxOpts): boolean => o.res === null && !o.copy16;

/** The kernel name's suffix for `o`: "" for the plain kernel. */
export function lnDxTag(o: LnDxOpts): string {
  return `${o.res ? `_res_${storageOf(o.res)}` : ""}${o.copy16 ? "_h16" : ""}`;
}

/** The kernel name's tag for g of `gDtype` beside x of `dtype`: "" when g is stored as x is (header). */
export function lnGradTag(dtype: Dtype, gDtype: Dtype): string {
  return storageOf(gDtype) === storageOf(dtype) ? "" : `_g_${storageOf(gDtype)}`;
}

/** The bindings after x, w and g of a dx kernel with options: res (read), dx (write), dx16 (write). */
export interface LnDxBufs {
  res: Buffer | null;
  dx: Buffer;
  dx16: Buffer | null;
  /** x's storage type (dx_LN is rounded to it before the residual add). */
  xs: StorageElem;
}

/** Declares res, dx and dx16 in binding order; call right after g. */
export function lnDxBuffers(k: KernelBuilder, dtype: Dtype, o: LnDxOpts): LnDxBufs {
  const res = o.res ? k.buffer("res", storageOf(o.res), "read") : null;
  const dx = k.buffer("dx", storageOf(o.res ?? dtype), "write");
  const dx16 = o.copy16 ? k.buffer("dx16", storageOf("f16"), "write") : null;
  return { res, dx, dx16, xs: storageOf(dtype) };
}

/** The residual's element(s) at `i` (f32, or f32x4 with width 4), for storeLnDx. */
export function loadLnRes(b: LnDxBufs, i: Expr, width: 1 | 4): Expr | null {
  if (!b.res) return null;
  return width === 1 ? toF32(b.res.load(i)) : b.res.as(b.res.elem as StorageElem, 4).load(i).cast("f32x4");
}

/**
 * Stores dx at `i` (elements, or 4-vectors with width 4) from dx_LN `v` (f32 / f32x4) and the
 * residual `r` (loadLnRes): r + round_x(v) in f32, rounded to dx's dtype; dx16 gets it in f16.
 */
export function storeLnDx(k: KernelBuilder, b: LnDxBufs, i: Expr, v: Expr, r: Expr | null, width: 1 | 4): void {
  const ty = (s: StorageElem) => (width === 1 ? s : (`${s}x4` as "f32x4"));
  const f = ty("f32");
  let sum = v;
  if (r) {
    const dxLn = b.xs === "f32" ? v : v.cast(ty(b.xs)).cast(f);
    sum = k.let(r.add(dxLn), "dxr");
  } else if (b.dx16) {
    sum = k.let(v, "dxv");
  }
  const outs = b.dx.elem as StorageElem;
  (width === 1 ? b.dx : b.dx.as(outs, 4)).store(i, sum.cast(ty(outs)));
  if (b.dx16) (width === 1 ? b.dx16 : b.dx16.as("f16", 4)).store(i, sum.cast(ty("f16")));
}

function rowStats(k: KernelBuilder, x: Buffer, base: Expr, t: Expr, dim: Expr, eps: Expr) {
  const sh = k.shared("partial", f32, ROW_WG);
  const s = k.var(f32, 0, "s");
  k.for(t, dim, (j) => s.set(s.get().add(toF32(x.load(base.add(j))))), { step: ROW_WG });
  const mean = k.let(wgReduce(k, sh, t, s.get(), (a, b) => a.add(b)).div(dim.cast(f32)), "mean");
  const v = k.var(f32, 0, "v");
  k.for(t, dim, (j) => {
    const d = k.let(toF32(x.load(base.add(j))).sub(mean), "d");
    v.set(v.get().add(d.mul(d)));
  }, { step: ROW_WG });
  const variance = wgReduce(k, sh, t, v.get(), (a, b) => a.add(b)).div(dim.cast(f32));
  const rstd = k.let(rsqrt(variance.add(eps)), "rstd");
  return { sh, mean, rstd };
}

/** The name suffix of a forward kernel whose output dtype is not its input's. */
export function lnOutTag(dtype: Dtype, outDtype: Dtype): string {
  return storageOf(outDtype) === storageOf(dtype) ? "" : `_out_${storageOf(outDtype)}`;
}

export function layerNormFwdKernel(dtype: Dtype, wDtype: Dtype, outDtype: Dtype = dtype): KernelDesc {
  const k = kernel(`layernorm_fwd_${dtype}${lnOutTag(dtype, outDtype)}`, { workgroup: [ROW_WG] });
  const x = k.buffer("x", storageOf(dtype), "read");
  const w = k.buffer("w", storageOf(wDtype), "read");
  const b = k.buffer("b", storageOf(wDtype), "read");
  const out = k.buffer("out", storageOf(outDtype), "write");
  const pc = k.push(LN_PUSH);
  const row = rowIndex(k, pc.rows);
  const t = k.let(k.localIndex, "t");
  const base = k.let(row.mul(pc.dim), "base");
  const { mean, rstd } = rowStats(k, x, base, t, pc.dim, pc.eps);
  k.for(t, pc.dim, (j) => {
    const xh = toF32(x.load(base.add(j))).sub(mean).mul(rstd);
    out.store(base.add(j), fromF32(xh.mul(toF32(w.load(j))).add(toF32(b.load(j))), outDtype));
  }, { step: ROW_WG });
  return k.finish();
}

export function layerNormBwdDxKernel(dtype: Dtype, wDtype: Dtype, o: LnDxOpts = LN_DX_PLAIN, gDtype: Dtype = dtype): KernelDesc {
  const k = kernel(`layernorm_bwd_dx_${dtype}${lnGradTag(dtype, gDtype)}${lnDxTag(o)}`, { workgroup: [ROW_WG] });
  const x = k.buffer("x", storageOf(dtype), "read");
  const w = k.buffer("w", storageOf(wDtype), "read");
  const g = k.buffer("g", storageOf(gDtype), "read");
  const bufs = lnDxPlain(o) ? null : lnDxBuffers(k, dtype, o);
  const dx = bufs ? bufs.dx : k.buffer("dx", storageOf(dtype), "write");
  const stats = k.buffer("stats", f32, "write");
  const pc = k.push(LN_PUSH);
  const row = rowIndex(k, pc.rows);
  const t = k.let(k.localIndex, "t");
  const base = k.let(row.mul(pc.dim), "base");
  const { sh, mean, rstd } = rowStats(k, x, base, t, pc.dim, pc.eps);
  const s1 = k.var(f32, 0, "s1");
  const s2 = k.var(f32, 0, "s2");
  k.for(t, pc.dim, (j) => {
    const dy = k.let(toF32(g.load(base.add(j))).mul(toF32(w.load(j))), "dy");
    const xh = toF32(x.load(base.add(j))).sub(mean).mul(rstd);
    s1.set(s1.get().add(dy));
    s2.set(s2.get().add(dy.mul(xh)));
  }, { step: ROW_WG });
  const sum1 = k.let(wgReduce(k, sh, t, s1.get(), (a, b) => a.add(b)), "sum1");
  const sum2 = k.let(wgReduce(k, sh, t, s2.get(), (a, b) => a.add(b)), "sum2");
  const dimF = k.let(pc.dim.cast(f32), "dimf");
  k.for(t, pc.dim, (j) => {
    const xh = toF32(x.load(base.add(j))).sub(mean).mul(rstd);
    const dy = toF32(g.load(base.add(j))).mul(toF32(w.load(j)));
    const r = rstd.mul(dy.sub(sum1.add(xh.mul(sum2)).div(dimF)));
    if (bufs) storeLnDx(k, bufs, base.add(j), r, loadLnRes(bufs, base.add(j), 1), 1);
    else dx.store(base.add(j), fromF32(r, dtype));
  }, { step: ROW_WG });
  k.if(t.eq(0), () => {
    stats.store(row.mul(2), mean);
    stats.store(row.mul(2).add(1), rstd);
  });
  return k.finish();
}

export const LN_DWDB_PUSH = { rows: "u32", dim: "u32" } as const;

export function layerNormBwdDwDbKernel(dtype: Dtype, wDtype: Dtype, gDtype: Dtype = dtype): KernelDesc {
  const k = kernel(`layernorm_bwd_dwdb_${dtype}${lnGradTag(dtype, gDtype)}`, { workgroup: [WG] });
  const x = k.buffer("x", storageOf(dtype), "read");
  const g = k.buffer("g", storageOf(gDtype), "read");
  const stats = k.buffer("stats", f32, "read");
  const dw = k.buffer("dw", storageOf(wDtype), "write");
  const db = k.buffer("db", storageOf(wDtype), "write");
  const pc = k.push(LN_DWDB_PUSH);
  const j = flatIndex(k);
  k.if(j.ge(pc.dim), () => k.return());
  const aw = k.var(f32, 0, "aw");
  const ab = k.var(f32, 0, "ab");
  k.for(lit("u32", 0), pc.rows, (r) => {
    const idx = k.let(r.mul(pc.dim).add(j), "idx");
    const gv = k.let(toF32(g.load(idx)), "gv");
    const xh = toF32(x.load(idx)).sub(stats.load(r.mul(2))).mul(stats.load(r.mul(2).add(1)));
    aw.set(aw.get().add(gv.mul(xh)));
    ab.set(ab.get().add(gv));
  });
  dw.store(j, fromF32(aw.get(), wDtype));
  db.store(j, fromF32(ab.get(), wDtype));
  return k.finish();
}

/**
 * layernorm_bwd_dwdb_cols: layernorm_bwd_dwdb for many rows as a column sum (ts/kernels/colsum.ts,
 * whose header gives the workgroup shape, chunking and summation order): dw = sum over rows of
 * g * (x - mean) * rstd, db = sum of g, with 16-byte loads of x and g where the plan has vec > 1.
 * Bindings x, g, stats (read: [rows, 2] mean, rstd from the dx kernel), dw, db (write). Push
 * COLSUM_PUSH with dim = rows and inner = the normalized dim; dispatch planColumns(dtype, 1, rows,
 * dim).groups. With one chunk it writes dw and db (outDtype); with more, f32 partials
 * [chunks, dim] that colsum (k2) folds in one dispatch. g of `gDtype` (an f16 g with an f32 x) is
 * loaded at x's vector width.
 */
export function layerNormBwdColsKernel(dtype: Dtype, outDtype: Dtype, vec: number, tx: number, unroll = LN_COLS_UNROLL, gDtype: Dtype = dtype): KernelDesc {
  const u = unroll === LN_COLS_UNROLL ? "" : `_u${unroll}`;
  const k = kernel(`layernorm_bwd_dwdb_cols_${dtype}_${outDtype}${lnGradTag(dtype, gDtype)}_v${vec}_tx${tx}${u}`, { workgroup: [COLS_WG] });
  const x = k.buffer("x", storageOf(dtype), "read");
  const g = k.buffer("g", storageOf(gDtype), "read");
  const stats = k.buffer("stats", f32, "read");
  const dw = k.buffer("dw", storageOf(outDtype), "write");
  const db = k.buffer("db", storageOf(outDtype), "write");
  const pc = k.push(COLSUM_PUSH);
  const nv = k.let(vec === 1 ? pc.inner : pc.inner.shr(Math.log2(vec)), "nvl");
  columnSums(k, { vec, tx, k: 2, outs: [dw, db], outDtype, push: pc, unroll }, (row, v) => {
    const idx = k.let(row.mul(nv).add(v), "xi");
    const xs = loadVector(k, x, dtype, vec, idx);
    const gs = loadVector(k, g, gDtype, vec, idx);
    const mean = k.let(stats.load(row.mul(2)), "mean");
    const rstd = k.let(stats.load(row.mul(2).add(1)), "rstd");
    return [gs.map((gv, e) => gv.mul(xs[e].sub(mean).mul(rstd))), gs];
  });
  return k.finish();
}

/**
 * layernorm_fwd_cached: layernorm_fwd's contract for rows of at most ROW_WG * vpt
 * elements, reading x once into registers (mean and centered variance from registers).
 */
export function layerNormFwdCachedKernel(dtype: Dtype, wDtype: Dtype, vpt: number, sg = false, outDtype: Dtype = dtype): KernelDesc {
  const k = kernel(`layernorm_fwd_c${vpt}${sg ? "_sg" : ""}_${dtype}${lnOutTag(dtype, outDtype)}`, { workgroup: [ROW_WG] });
  const x = k.buffer("x", storageOf(dtype), "read");
  const w = k.buffer("w", storageOf(wDtype), "read");
  const b = k.buffer("b", storageOf(wDtype), "read");
  const out = k.buffer("out", storageOf(outDtype), "write");
  const pc = k.push(LN_PUSH);
  const sh = k.shared("partial", f32, ROW_WG);
  const row = rowIndex(k, pc.rows);
  const t = k.let(k.localIndex, "t");
  const base = k.let(row.mul(pc.dim), "base");
  const dimF = k.let(pc.dim.cast(f32), "dimf");
  const cols = Array.from({ length: vpt }, (_, r) => k.let(t.add(r * ROW_WG), "col"));
  const vals = cols.map((c, r) => {
    const v = k.var(f32, 0, `xv${r}`);
    k.if(c.lt(pc.dim), () => v.set(toF32(x.load(base.add(c)))));
    return v.get();
  });
  const sum = (v: Expr) => (sg ? wgReduceSg(k, sh, v, "add") : wgReduce(k, sh, t, v, (p, q) => p.add(q)));
  const mean = k.let(sum(vals.reduce((p, q) => p.add(q))).div(dimF), "mean");
  const cen = vals.map((v, r) => k.let(select(cols[r].lt(pc.dim), v.sub(mean), lit(f32, 0)), "c"));
  const variance = sum(cen.map((c) => c.mul(c)).reduce((p, q) => p.add(q))).div(dimF);
  const rstd = k.let(rsqrt(variance.add(pc.eps)), "rstd");
  cols.forEach((c, r) => {
    k.if(c.lt(pc.dim), () => {
      out.store(base.add(c), fromF32(cen[r].mul(rstd).mul(toF32(w.load(c))).add(toF32(b.load(c))), outDtype));
    });
  });
  return k.finish();
}
