// Host side of layerNorm, cross-entropy and embedding: validation and dispatch.
import type { Dtype, TensorData } from "../types.js";
import { type Engine, promote, run } from "../engine.js";
import type { HeliosTensor } from "../tensor.js";
import { checkIndices, hostIndices, indexCsr } from "./indices.js";
import { fail, fmt, sameShape, size } from "../shape.js";
import { ROW_WG, gridRows, grid1d, storageOf } from "../kernels/common.js";
import { COLSUM_PUSH, planColumns } from "../kernels/colsum.js";
import { LN_COLS_UNROLL, LN_PUSH, LN_DWDB_PUSH, lnDxPlain, type LnDxOpts, layerNormBwdColsKernel, layerNormFwdKernel, layerNormFwdCachedKernel, layerNormBwdDxKernel, layerNormBwdDwDbKernel } from "../kernels/norm.js";
import { adoptSplits, type SplitLayout } from "./split-ahead.js";
import { XENT_PUSH, XENT_BWD_PUSH, xentFusedKernel, xentFusedWorkgroup, xentRowsKernel, xentBwdKernel, xentRows4Kernel, xentBwd4Kernel } from "../kernels/loss.js";
import { EMB_PUSH, EMB_BWD_PUSH, EMB_BWD_CSR_PUSH, embeddingFwdKernel, embeddingBwdKernel, embeddingBwdSpan, embeddingBwdCsrKernel } from "../kernels/gather.js";
import { REDUCE_ROWS_PUSH, reduceRowsKernel, cachedVpt } from "../kernels/reduce.js";
import { layerNormBwdDx4Kernel, layerNormFwd4Kernel, ln4Shape } from "../kernels/rows4.js";
import { LN_BWD_FUSED_PUSH, layerNormBwdFusedKernel, planLayerNormBwd, slotsFitSubgroups } from "../kernels/layernorm-bwd.js";
import { foldPartials } from "./reduce.js";

function floatOnly(op: string, t: TensorData, what: string): void {
  if (t.dtype === "i32") fail(op, `${what} must be a floating-point tensor, got i32 ${fmt(t.shape)}`);
}

function checkLn(op: string, x: TensorData, w: TensorData, b: TensorData | null): number {
  floatOnly(op, x, "x");
  if (x.shape.length === 0) fail(op, "x must have rank >= 1");
  const dim = x.shape[x.shape.length - 1];
  if (w.shape.length !== 1 || w.shape[0] !== dim) fail(op, `weight ${fmt(w.shape)} must be [${dim}] for x ${fmt(x.shape)}`);
  if (b && (b.shape.length !== 1 || b.shape[0] !== dim)) fail(op, `bias ${fmt(b.shape)} must be [${dim}] for x ${fmt(x.shape)}`);
  if (b && b.dtype !== w.dtype) fail(op, `weight (${w.dtype}) and bias (${b.dtype}) dtypes differ`);
  return dim;
}

/** LayerNorm over the last axis, written as `outDtype` (default x's: f16 writes a matmul operand without a cast pass). */
export function layerNorm(E: Engine, x: TensorData, w: TensorData, b: TensorData, eps: number, outDtype: Dtype = x.dtype): HeliosTensor {
  const dim = checkLn("layerNorm", x, w, b);
  if (outDtype === "i32") fail("layerNorm", "outDtype must be a floating-point dtype");
  const out = E.alloc(x.shape, outDtype);
  const rows = dim === 0 ? 0 : size(x.shape) / dim;
  if (rows === 0 || dim === 0) return out;
  const sg = E.subgroups;
  const shape = ln4Shape(dim);
  const to = outDtype === x.dtype ? {} : { out: outDtype };
  if (shape) {
    const { v4, wg } = shape;
    const narrow = wg === ROW_WG ? {} : { wg };
    run(E, "layerNorm", { ln4: x.dtype, w: w.dtype, v4, sg, ...to, ...narrow }, () => layerNormFwd4Kernel(x.dtype, w.dtype, v4, sg, outDtype, wg),
      LN_PUSH, { rows, dim, eps }, [x, w, b], [out], gridRows(rows));
    return out;
  }
  const vpt = cachedVpt(dim);
  const build = () => (vpt > 0 ? layerNormFwdCachedKernel(x.dtype, w.dtype, vpt, sg, outDtype) : layerNormFwdKernel(x.dtype, w.dtype, outDtype));
  run(E, "layerNorm", { ln: x.dtype, w: w.dtype, vpt, sg, ...to }, build, LN_PUSH, { rows, dim, eps }, [x, w, b], [out], gridRows(rows));
  return out;
}

/** layerNormBackward's options (Helios extension, issue 27): work the caller would do on dx, done in the same pass. */
export interface LnBwdOptions {
  /**
   * A residual gradient added into dx: dx = residual + dx_LN, bit for bit add(residual, dx_LN)
   * on drivers that do not contract the add (lavapipe). x's shape; x's dtype or f32 (dx is then
   * written in the sum's dtype, promote(x, residual), as add would).
   */
  residual?: TensorData | null;
  /** Also return dx16: dx in f16, castDtype(dx, "f16") bit for bit (dx must not be f16 itself). */
  f16Copy?: boolean;
}

function checkLnBwdOptions(op: string, x: TensorData, o: LnBwdOptions): LnDxOpts {
  if (o === null || typeof o !== "object") fail(op, `opts must be an object, got ${o === null ? "null" : typeof o}`);
  const res = o.residual ?? null;
  if (res) {
    floatOnly(op, res, "residual");
    if (!sameShape(res.shape, x.shape)) fail(op, `residual ${fmt(res.shape)} must match x ${fmt(x.shape)}`);
    if (res.dtype !== x.dtype && res.dtype !== "f32") fail(op, `residual dtype ${res.dtype} must be x's (${x.dtype}) or f32`);
  }
  if (o.f16Copy !== undefined && typeof o.f16Copy !== "boolean") fail(op, `f16Copy must be a boolean, got ${String(o.f16Copy)}`);
  const dxDtype = res ? promote(x.dtype, res.dtype) : x.dtype;
  if (o.f16Copy && dxDtype === "f16") fail(op, `f16Copy: dx is f16 already (x f16${res ? ", residual f16" : ""}); it asks for an f16 copy of an f32 dx`);
  return { res: res ? res.dtype : null, copy16: o.f16Copy === true };
}

/**
 * g is x's dtype, or f16 with an f32 x: each kernel converts it on load (castDtype(g, "f32") bit
 * for bit, no cast pass, half the g bytes).
 */
function checkLnGrad(op: string, x: TensorData, g: TensorData): void {
  if (g.shape.join() !== x.shape.join()) fail(op, `gradOutput ${fmt(g.shape)} must match x ${fmt(x.shape)}`);
  if (g.dtype === x.dtype || (x.dtype === "f32" && g.dtype === "f16")) return;
  fail(op, `gradOutput dtype ${g.dtype} must match x dtype ${x.dtype}${x.dtype === "f32" ? " or be f16" : ""}`);
}

/**
 * dx, dw, db of LayerNorm over the last axis; with `opts` (LnBwdOptions) the same pass adds a
 * residual gradient into dx and writes dx16, an f16 copy of dx. Every dx kernel takes the options,
 * and every kernel g's dtype (checkLnGrad).
 */
export function layerNormBackward(E: Engine, x: TensorData, w: TensorData, g: TensorData, eps: number, opts: LnBwdOptions = {}) {
  const op = "layerNormBackward";
  const dim = checkLn(op, x, w, null);
  checkLnGrad(op, x, g);
  const o = checkLnBwdOptions(op, x, opts);
  const res = opts.residual ?? null;
  const plain = lnDxPlain(o);
  const gt = g.dtype;
  // g in x's dtype and no options: the keys and kernels before either (shipped caches and tuning apply)
  const gKey = gt === x.dtype ? {} : { g: gt };
  const key = { ...gKey, ...(plain ? {} : { res: o.res && storageOf(o.res), h16: o.copy16 }) };
  const dx = E.alloc(x.shape, res ? promote(x.dtype, res.dtype) : x.dtype);
  const dx16 = o.copy16 ? E.alloc(x.shape, "f16") : null;
  const dxs = dx16 ? [dx, dx16] : [dx];
  const ins = res ? [x, w, g, res] : [x, w, g];
  const result = (dw: HeliosTensor, db: HeliosTensor) => (dx16 ? { dx, dw, db, dx16 } : { dx, dw, db });
  const dw = E.alloc(w.shape, w.dtype);
  const db = E.alloc(w.shape, w.dtype);
  const rows = dim === 0 ? 0 : size(x.shape) / dim;
  if (rows === 0 || dim === 0) return result(E.filled(w.shape, w.dtype, 0), E.filled(w.shape, w.dtype, 0));
  const fused = planLayerNormBwd(rows, dim, E.device);
  if (fused) {
    // dx and the dw/db partials in one pass over x and g (ts/kernels/layernorm-bwd.ts), folded by one colsum
    const { v4, wg, slots, rowsPerGroup, groups, prefetch } = fused;
    const one = groups === 1;
    const parts = one ? [dw, db] : [E.alloc([1, groups, dim], "f32"), E.alloc([1, groups, dim], "f32")];
    const part = parts[0].dtype, sg = E.subgroups && slotsFitSubgroups(fused, E.device.subgroupSize ?? 0);
    const narrow = wg === ROW_WG ? {} : { wg };
    run(E, op, { lnBwdFused: x.dtype, w: w.dtype, part, v4, slots, sg, prefetch, ...key, ...narrow },
      () => layerNormBwdFusedKernel(x.dtype, w.dtype, part, v4, slots, sg, prefetch, o, gt, wg),
      LN_BWD_FUSED_PUSH, { rows, dim, eps, rowsPerGroup }, ins, [...dxs, ...parts], [groups, 1, 1]);
    if (!one) foldPartials(E, op, parts, 1, dim, 1, [dw, db]);
    return result(dw, db);
  }
  const stats = E.alloc([rows, 2], "f32");
  const shape = ln4Shape(dim), sg = E.subgroups;
  if (shape) {
    // the fused pass's row shape (ln4Shape), so its dx is this kernel's bit for bit where it runs
    const { v4, wg } = shape;
    const narrow = wg === ROW_WG ? {} : { wg };
    run(E, op, { lnDx4: x.dtype, w: w.dtype, v4, sg, ...key, ...narrow }, () => layerNormBwdDx4Kernel(x.dtype, w.dtype, v4, sg, o, gt, wg), LN_PUSH,
      { rows, dim, eps }, ins, [...dxs, stats], gridRows(rows));
  } else {
    run(E, op, { lnDx: x.dtype, w: w.dtype, ...key }, () => layerNormBwdDxKernel(x.dtype, w.dtype, o, gt), LN_PUSH,
      { rows, dim, eps }, ins, [...dxs, stats], gridRows(rows));
  }
  if (rows < 64) {
    run(E, op, { lnDwDb: x.dtype, w: w.dtype, ...gKey }, () => layerNormBwdDwDbKernel(x.dtype, w.dtype, gt), LN_DWDB_PUSH,
      { rows, dim }, [x, g, stats], [dw, db], grid1d(dim));
  } else {
    // many rows: a column sum of (g * xhat, g) over the rows (ts/kernels/colsum.ts), chunk partials
    // of both folded by one colsum
    const p = planColumns(x.dtype, 1, rows, dim);
    const one = p.chunks === 1;
    const outs = one ? [dw, db] : [E.alloc([1, p.chunks, dim], "f32"), E.alloc([1, p.chunks, dim], "f32")];
    const outDtype = outs[0].dtype;
    run(E, op, { lnCols: x.dtype, out: outDtype, vec: p.vec, tx: p.tx, ...gKey }, () => layerNormBwdColsKernel(x.dtype, outDtype, p.vec, p.tx, LN_COLS_UNROLL, gt),
      COLSUM_PUSH, { dim: rows, inner: dim, chunk: p.chunk, chunks: p.chunks, scale: 1 }, [x, g, stats], outs, p.groups);
    if (!one) foldPartials(E, op, outs, 1, dim, 1, [dw, db]);
  }
  E.release(stats);
  return result(dw, db);
}

function checkXent(op: string, logits: TensorData, targets: TensorData): [number, number] {
  floatOnly(op, logits, "logits");
  if (logits.shape.length !== 2) fail(op, `logits must be [N, C], got ${fmt(logits.shape)}`);
  const [n, c] = logits.shape;
  if (size(targets.shape) !== n) fail(op, `targets ${fmt(targets.shape)} must have ${n} elements for logits ${fmt(logits.shape)}`);
  checkIndices(op, targets, c, "targets");
  return [n, c];
}

export function crossEntropy(E: Engine, logits: TensorData, targets: TensorData): HeliosTensor {
  const op = "crossEntropy";
  const [n, c] = checkXent(op, logits, targets);
  if (n === 0 || c === 0) return E.filled([], logits.dtype, NaN);
  return meanRowLoss(E, op, xentRowLoss(E, op, logits, targets, n, c), logits.dtype);
}

export function crossEntropyBackward(E: Engine, logits: TensorData, targets: TensorData, g: TensorData): HeliosTensor {
  const op = "crossEntropyBackward";
  const [n, c] = checkXentGrad(op, logits, targets, g);
  const out = E.alloc(logits.shape, logits.dtype);
  if (n > 0 && c > 0) xentGrad(E, op, logits, targets, g, out, n, c);
  return out;
}

/**
 * crossEntropy and crossEntropyBackward in one dispatch (xent_fused: the row read twice, not three
 * times) where rows split into 4-wide vectors; else their kernels, one after the other.
 */
export function crossEntropyWithGrad(
  E: Engine, logits: TensorData, targets: TensorData, g: TensorData, splitGrad: readonly SplitLayout[] = [],
): { loss: HeliosTensor; dlogits: HeliosTensor } {
  const op = "crossEntropyWithGrad";
  const [n, c] = checkXentGrad(op, logits, targets, g);
  const dlogits = E.alloc(logits.shape, logits.dtype);
  if (n === 0 || c === 0) return { loss: E.filled([], logits.dtype, NaN), dlogits };
  if (c % 4 !== 0) {
    const rowLoss = xentRowLoss(E, op, logits, targets, n, c);
    xentGrad(E, op, logits, targets, g, dlogits, n, c);
    return { loss: meanRowLoss(E, op, rowLoss, logits.dtype), dlogits };
  }
  const rowLoss = E.alloc([n], "f32");
  const wg = xentFusedWorkgroup(E.device.maxWorkgroupSize);
  // dlogits' split for the x3 products, written by the same pass (kept as splits made ahead)
  const split = logits.dtype === "f32" && 2 * n * c < 2 ** 32 ? { rows: splitGrad.includes("rows"), whole: splitGrad.includes("whole") } : null;
  const halves = split ? [split.rows, split.whole].map((on) => (on ? E.alloc([2 * n * c], "f16", op) : null)) : [];
  const extra = [E.indexFlag(), ...halves.filter((h): h is HeliosTensor => h !== null)];
  const form = split && (split.rows || split.whole) ? split : undefined;
  run(E, op, { xentFused: logits.dtype, g: g.dtype, wg, sg: E.subgroups, split: form ? `${+form.rows}${+form.whole}` : "" },
    () => xentFusedKernel(logits.dtype, g.dtype, wg, E.subgroups, form),
    XENT_BWD_PUSH, { rows: n, classes: c, invN: 1 / n }, [logits, targets, g], [rowLoss, dlogits], gridRows(n), extra);
  if (form) adoptSplits(E, dlogits, { rows: halves[0] ?? null, whole: halves[1] ?? null }, 1);
  return { loss: meanRowLoss(E, op, rowLoss, logits.dtype), dlogits };
}

function checkXentGrad(op: string, logits: TensorData, targets: TensorData, g: TensorData): [number, number] {
  const nc = checkXent(op, logits, targets);
  if (size(g.shape) !== 1) fail(op, `gradOutput must be a scalar, got ${fmt(g.shape)}`);
  return nc;
}

/** Per-row losses (f32 [n]): 4-wide with a one-pass log-sum-exp when rows split into vectors. */
function xentRowLoss(E: Engine, op: string, logits: TensorData, targets: TensorData, n: number, c: number): HeliosTensor {
  const rowLoss = E.alloc([n], "f32");
  const v4 = c % 4 === 0;
  run(E, op, { xent: logits.dtype, v4, sg: E.subgroups }, () => (v4 ? xentRows4Kernel(logits.dtype, E.subgroups) : xentRowsKernel(logits.dtype)),
    XENT_PUSH, { rows: n, classes: c }, [logits, targets], [rowLoss], gridRows(n), [E.indexFlag()]);
  return rowLoss;
}

/** The mean of the row losses (released), as a scalar of `dtype`. */
function meanRowLoss(E: Engine, op: string, rowLoss: HeliosTensor, dtype: Dtype): HeliosTensor {
  const n = rowLoss.shape[0];
  const out = E.alloc([], dtype);
  // a row-length-n reduction in one workgroup (n is a batch*time count): deterministic, no atomics
  run(E, op, { reduceRows: "sum", in: "f32", out: dtype }, () => reduceRowsKernel("f32", dtype, "sum"),
    REDUCE_ROWS_PUSH, { rows: 1, len: n, n, outBase: 0, scale: 1 / n }, [rowLoss], [out], gridRows(1));
  E.release(rowLoss);
  return out;
}

function xentGrad(E: Engine, op: string, logits: TensorData, targets: TensorData, g: TensorData, out: HeliosTensor, n: number, c: number): void {
  const v4 = c % 4 === 0;
  run(E, op, { xentBwd: logits.dtype, g: g.dtype, v4, sg: E.subgroups },
    () => (v4 ? xentBwd4Kernel(logits.dtype, g.dtype, E.subgroups) : xentBwdKernel(logits.dtype, g.dtype)), XENT_BWD_PUSH,
    { rows: n, classes: c, invN: 1 / n }, [logits, targets, g], [out], gridRows(n), [E.indexFlag()]);
}

export function embedding(E: Engine, w: TensorData, idx: TensorData): HeliosTensor {
  const op = "embedding";
  if (w.shape.length !== 2) fail(op, `weight must be [vocab, dim], got ${fmt(w.shape)}`);
  const [vocab, dim] = w.shape;
  checkIndices(op, idx, vocab, "indices");
  const out = E.alloc([...idx.shape, dim], w.dtype);
  const n = size(out.shape);
  if (n === 0) return out;
  run(E, op, { emb: w.dtype }, () => embeddingFwdKernel(w.dtype), EMB_PUSH, { n, dim, vocab },
    [w, idx], [out], grid1d(n), [E.indexFlag()]);
  return out;
}

/** dw [vocab, dim] f32 from CSR position lists (IndexCsr) of the indices: row v sums g's rows positions[offsets[v] .. offsets[v + 1]) in order. */
function csrBackward(E: Engine, op: string, offsets: TensorData, positions: TensorData, g: TensorData, vocab: number, dim: number): HeliosTensor {
  const out = E.alloc([vocab, dim], "f32");
  if (dim === 0) return out;
  run(E, op, { embBwdCsr: g.dtype }, () => embeddingBwdCsrKernel(g.dtype), EMB_BWD_CSR_PUSH, { n: vocab * dim, dim },
    [offsets, positions, g], [out], grid1d(vocab * dim));
  return out;
}

/**
 * embeddingBackward with the indices given as their CSR lists (`indexCsr`), e.g. computed on the
 * host for indices a captured step only has on the device. Shapes are checked; the lists' contents
 * are checked when they have a host copy (a list out of range reads clamped, never out of bounds).
 */
export function embeddingBackwardCsr(E: Engine, offsets: TensorData, positions: TensorData, g: TensorData, vocab: number): HeliosTensor {
  const op = "embeddingBackwardCsr";
  if (!Number.isInteger(vocab) || vocab <= 0) fail(op, `vocabSize ${vocab} must be a positive integer`);
  if (offsets.dtype !== "i32" || offsets.shape.length !== 1 || offsets.shape[0] !== vocab + 1) {
    fail(op, `offsets must be i32 [${vocab + 1}] (vocabSize + 1), got ${offsets.dtype} ${fmt(offsets.shape)}`);
  }
  if (positions.dtype !== "i32" || positions.shape.length !== 1) fail(op, `positions must be i32 [count], got ${positions.dtype} ${fmt(positions.shape)}`);
  const count = positions.shape[0];
  const dim = g.shape[g.shape.length - 1] ?? 0;
  if (g.shape.length < 1 || size(g.shape) !== count * dim) fail(op, `gradOutput ${fmt(g.shape)} must be [count, dim] with count = ${count} positions`);
  const ho = hostIndices(offsets), hp = hostIndices(positions);
  if (ho && (ho[0] !== 0 || ho[vocab] !== count)) fail(op, `offsets must run from 0 to the position count ${count}, got ${ho[0]} .. ${ho[vocab]}`);
  if (ho) for (let v = 0; v < vocab; v++) if (!(ho[v + 1] >= ho[v])) fail(op, `offsets must not decrease: offsets[${v + 1}] = ${ho[v + 1]} < offsets[${v}] = ${ho[v]}`);
  if (hp) for (let i = 0; i < count; i++) if (!(hp[i] >= 0 && hp[i] < count)) fail(op, `positions[${i}] = ${hp[i]} is out of range [0, ${count})`);
  if (count === 0) return E.filled([vocab, dim], "f32", 0);
  return csrBackward(E, op, offsets, positions, g, vocab, dim);
}

export function embeddingBackward(E: Engine, idx: TensorData, g: TensorData, vocab: number): HeliosTensor {
  const op = "embeddingBackward";
  if (!Number.isInteger(vocab) || vocab <= 0) fail(op, `vocabSize ${vocab} must be a positive integer`);
  checkIndices(op, idx, vocab, "indices");
  const dim = g.shape[g.shape.length - 1] ?? 0;
  const count = size(idx.shape);
  if (size(g.shape) !== count * dim) fail(op, `gradOutput ${fmt(g.shape)} must be [...${fmt(idx.shape)}, dim]`);
  const outDtype: Dtype = "f32";
  if (dim === 0) return E.alloc([vocab, dim], outDtype);
  if (count === 0) return E.filled([vocab, dim], outDtype, 0);
  const host = hostIndices(idx);
  if (host) {
    // indices range-checked above: per-row position lists, uploaded for this dispatch only (a
    // plain object would stay resident until collected)
    const { offsets, positions } = indexCsr(op, host, vocab);
    const offT = E.fromHost([vocab + 1], "i32", offsets);
    const posT = E.fromHost([count], "i32", positions);
    const r = csrBackward(E, op, offT, posT, g, vocab, dim);
    E.release(offT);
    E.release(posT);
    return r;
  }
  const out = E.alloc([vocab, dim], outDtype);
  const span = embeddingBwdSpan(vocab, dim);
  run(E, op, { embBwd: g.dtype }, () => embeddingBwdKernel(g.dtype), EMB_BWD_PUSH, { count, dim, vocab, span },
    [idx, g], [out], grid1d(dim * Math.ceil(vocab / span)), [E.indexFlag()]);
  return out;
}
