// Cross-entropy over rows of logits [N, C] with i32 targets [N].
//
// xent_rows: bindings logits, targets (read), loss (write, f32 [N]). Push {classes}. One
//   workgroup per row: loss[r] = logsumexp(row) - row[target]. The mean over rows is a
//   reduce_rows pass with scale 1/N (a second dispatch; deterministic, no atomics).
// xent_bwd: bindings logits, targets, g (read; g is the scalar upstream gradient), dlogits
//   (write). Push {classes, invN}. One workgroup per row:
//   dlogits = (softmax(row) - onehot(target)) * g * invN.
// xent_rows4 / xent_bwd4: the same contracts for C % 4 == 0, reading 4-wide vectors and with
//   the log-sum-exp in one pass (per thread a running max and a sum rescaled as the max grows,
//   then a max and a sum across the workgroup): the row is read once for the loss and twice
//   for the gradient (the scalar forms read it twice and three times).
// xent_fused_s<S>_w<W>[_sg][_u]_<dtype>: xent_rows' loss and xent_bwd's dlogits from one read of
//   the logits. Bindings logits, targets, g (read), loss (write, f32 [N]), dlogits (write). Push
//   XENT_BWD_PUSH. Dispatch gridRows(N), W invocations (planXentFused: S = ceil(C / (V * W)), V =
//   elements per 16 bytes). Invocation t holds the vectors t, t + W, ..., t + (S-1)W of its row
//   in registers (f32x4; 16-bit data as u32x4, converted at each use), all S loads issued at
//   clamped indices before any is used and masked after; the max and the sum of exp come from the
//   registers, and dlogits is written from them: the row is read once and written once. The
//   max is the row's own (not a running one), so the sum needs no rescaling; loss and dlogits
//   equal xent_rows4's and xent_bwd4's to rounding.
//   _u: C % V != 0, so rows are not 16-byte aligned: the vectors are gathered and scattered
//   element by element, each checked against C.
// Targets outside [0, C) are clamped on the device; the backend checks host-visible
// targets before dispatch and reports them as errors.
import { exp, f32, i32, kernel, log, max, min, packHalves, select, lit, u32, unpackHalves, vecOf, type Buffer, type BufferView, type Expr, type KernelBuilder, type KernelDesc } from "../ir/index.js";
import type { Dtype } from "../types.js";
import { ROW_WG, clampIndex, fromF32, rowIndex, storageBytes, storageOf, toF32, wgReduce, wgReduceSg } from "./common.js";
import { hsum, splat, tree } from "./rows4.js";

export const XENT_PUSH = { rows: "u32", classes: "u32" } as const;
export const XENT_BWD_PUSH = { rows: "u32", classes: "u32", invN: "f32" } as const;

function rowLse(k: KernelBuilder, x: Buffer, base: Expr, t: Expr, classes: Expr): Expr {
  const sh = k.shared("partial", f32, ROW_WG);
  const m = k.var(f32, -Infinity, "m");
  k.for(t, classes, (j) => m.set(max(m.get(), toF32(x.load(base.add(j))))), { step: ROW_WG });
  const mx = k.let(wgReduce(k, sh, t, m.get(), (a, b) => max(a, b)), "mx");
  const s = k.var(f32, 0, "s");
  k.for(t, classes, (j) => s.set(s.get().add(exp(toF32(x.load(base.add(j))).sub(mx)))), { step: ROW_WG });
  const sum = wgReduce(k, sh, t, s.get(), (a, b) => a.add(b));
  return k.let(log(sum).add(mx), "lse");
}

function target(k: KernelBuilder, tg: Buffer, row: Expr, classes: Expr, flag: Buffer): Expr {
  return clampIndex(k, tg.load(row), classes, flag, "tgt");
}

export function xentRowsKernel(dtype: Dtype): KernelDesc {
  const k = kernel(`xent_rows_${dtype}`, { workgroup: [ROW_WG] });
  const x = k.buffer("logits", storageOf(dtype), "read");
  const tg = k.buffer("targets", i32, "read");
  const loss = k.buffer("loss", f32, "write");
  const flag = k.buffer("clamped", u32, "write");
  const pc = k.push(XENT_PUSH);
  const row = rowIndex(k, pc.rows);
  const t = k.let(k.localIndex, "t");
  const base = k.let(row.mul(pc.classes), "base");
  const lse = rowLse(k, x, base, t, pc.classes);
  k.if(t.eq(0), () => {
    const tgt = target(k, tg, row, pc.classes, flag);
    loss.store(row, lse.sub(toF32(x.load(base.add(tgt)))));
  });
  return k.finish();
}

export function xentBwdKernel(dtype: Dtype, gDtype: Dtype): KernelDesc {
  const k = kernel(`xent_bwd_${dtype}`, { workgroup: [ROW_WG] });
  const x = k.buffer("logits", storageOf(dtype), "read");
  const tg = k.buffer("targets", i32, "read");
  const g = k.buffer("g", storageOf(gDtype), "read");
  const dx = k.buffer("dlogits", storageOf(dtype), "write");
  const flag = k.buffer("clamped", u32, "write");
  const pc = k.push(XENT_BWD_PUSH);
  const row = rowIndex(k, pc.rows);
  const t = k.let(k.localIndex, "t");
  const base = k.let(row.mul(pc.classes), "base");
  const lse = rowLse(k, x, base, t, pc.classes);
  const tgt = target(k, tg, row, pc.classes, flag);
  const coef = k.let(toF32(g.load(0)).mul(pc.invN), "coef");
  k.for(t, pc.classes, (j) => {
    const p = exp(toF32(x.load(base.add(j))).sub(lse));
    const r = p.sub(select(j.eq(tgt), lit(f32, 1), lit(f32, 0))).mul(coef);
    dx.store(base.add(j), fromF32(r, dtype));
  }, { step: ROW_WG });
  return k.finish();
}

/** Log-sum-exp of a row of dim4 4-wide vectors at vector `base4`, in one pass over memory (wg invocations). */
function rowLse4(k: KernelBuilder, xv: BufferView, base4: Expr, t: Expr, dim4: Expr, sg: boolean, wg = ROW_WG): Expr {
  const sh = k.shared("partial", f32, wg);
  const red = (v: Expr, fn: "add" | "max") =>
    sg ? wgReduceSg(k, sh, v, fn) : wgReduce(k, sh, t, v, fn === "max" ? (a, b) => max(a, b) : (a, b) => a.add(b), wg);
  const m = k.var(f32, -Infinity, "m");
  const s = k.var(f32, 0, "s");
  k.for(t, dim4, (c) => {
    const v = k.let(xv.load(base4.add(c)).cast("f32x4"), "xv");
    const mNew = k.let(max(m.get(), max(max(v.x, v.y), max(v.z, v.w))), "mnew");
    const e = k.let(exp(v.sub(vecOf("f32x4", mNew))), "ev");
    s.set(s.get().mul(exp(m.get().sub(mNew))).add(e.x.add(e.y).add(e.z.add(e.w))));
    m.set(mNew);
  }, { step: wg });
  const mx = k.let(red(m.get(), "max"), "mx");
  // a thread that saw no element has m = -inf and s = 0: its term is 0 * exp(-inf) = 0
  const sum = red(select(s.get().gt(0), s.get().mul(exp(m.get().sub(mx))), lit(f32, 0)), "add");
  return k.let(log(sum).add(mx), "lse");
}

export function xentRows4Kernel(dtype: Dtype, sg: boolean): KernelDesc {
  const k = kernel(`xent_rows4${sg ? "_sg" : ""}_${dtype}`, { workgroup: [ROW_WG] });
  const x = k.buffer("logits", storageOf(dtype), "read");
  const tg = k.buffer("targets", i32, "read");
  const loss = k.buffer("loss", f32, "write");
  const flag = k.buffer("clamped", u32, "write");
  const pc = k.push(XENT_PUSH);
  const row = rowIndex(k, pc.rows);
  const t = k.let(k.localIndex, "t");
  const dim4 = k.let(pc.classes.shr(2), "dim4");
  const lse = rowLse4(k, x.as(storageOf(dtype), 4), k.let(row.mul(dim4), "base4"), t, dim4, sg);
  k.if(t.eq(0), () => {
    const tgt = target(k, tg, row, pc.classes, flag);
    loss.store(row, lse.sub(toF32(x.load(row.mul(pc.classes).add(tgt)))));
  });
  return k.finish();
}

export function xentBwd4Kernel(dtype: Dtype, gDtype: Dtype, sg: boolean): KernelDesc {
  return xentGrad4(`xent_bwd4${sg ? "_sg" : ""}_${dtype}`, dtype, gDtype, sg, ROW_WG, false);
}

/**
 * xent_fused's streaming form (bindings and push as xent_fused): xent_bwd4 that also writes the
 * row's loss, with `wg` invocations per row. The row is read twice; with few rows in flight per SM
 * (wg = 1024) the second read can come from L2 (a GPT-2 row is 100 KB).
 */
export function xentFusedStreamKernel(dtype: Dtype, gDtype: Dtype, wg: number, sg: boolean): KernelDesc {
  return xentGrad4(`xent_fused_stream_w${wg}${sg ? "_sg" : ""}_${dtype}`, dtype, gDtype, sg, wg, true);
}

function xentGrad4(name: string, dtype: Dtype, gDtype: Dtype, sg: boolean, wg: number, withLoss: boolean): KernelDesc {
  const k = kernel(name, { workgroup: [wg] });
  const x = k.buffer("logits", storageOf(dtype), "read");
  const tg = k.buffer("targets", i32, "read");
  const g = k.buffer("g", storageOf(gDtype), "read");
  const loss = withLoss ? k.buffer("loss", f32, "write") : null;
  const dx = k.buffer("dlogits", storageOf(dtype), "write");
  const flag = k.buffer("clamped", u32, "write");
  const pc = k.push(XENT_BWD_PUSH);
  const row = rowIndex(k, pc.rows);
  const t = k.let(k.localIndex, "t");
  const dim4 = k.let(pc.classes.shr(2), "dim4");
  const base4 = k.let(row.mul(dim4), "base4");
  const xv = x.as(storageOf(dtype), 4), dv = dx.as(storageOf(dtype), 4);
  const lse = rowLse4(k, xv, base4, t, dim4, sg, wg);
  const tgt = target(k, tg, row, pc.classes, flag);
  if (loss) k.if(t.eq(0), () => loss.store(row, lse.sub(toF32(x.load(row.mul(pc.classes).add(tgt))))));
  const coef = k.let(toF32(g.load(0)).mul(pc.invN), "coef");
  const vtype = dtype === "f32" || dtype === "f64" ? "f32x4" : "f16x4";
  k.for(t, dim4, (c) => {
    const p = exp(xv.load(base4.add(c)).cast("f32x4").sub(vecOf("f32x4", lse)));
    const j0 = c.shl(2);
    const hot = vecOf("f32x4", ...[0, 1, 2, 3].map((e) => select(j0.add(e).eq(tgt), lit(f32, 1), lit(f32, 0))));
    dv.store(base4.add(c), p.sub(hot).mul(vecOf("f32x4", coef)).cast(vtype));
  }, { step: wg });
  return k.finish();
}

/**
 * 16-byte vectors an invocation of xent_fused holds: 8 are 32 registers of row per invocation.
 * At W = 1024 an NVIDIA SM's 64K registers leave an invocation 64, so the row takes half and the
 * reductions, exp temporaries and addresses the rest; more would spill to local memory, a second
 * trip through the memory system the kernel exists to avoid. GPT-2's f16 rows (50304 classes)
 * take 7 slots at W = 1024; its f32 rows (13) take xent_rows4 + xent_bwd4.
 */
export const XENT_FUSED_MAX_SLOTS = 8;
/** Smallest workgroup: whole subgroups on every device we run on. */
const XENT_FUSED_MIN_WG = 64;

export interface XentFusedPlan {
  /** Invocations per workgroup (a power of two, at most 1024 and the device's limit). */
  wg: number;
  /** 16-byte vectors per invocation. */
  slots: number;
  /** C is a multiple of the vector width: rows are 16-byte aligned. */
  aligned: boolean;
}

/** The fused kernel's shape for rows of `classes`, or null where a row does not fit its registers. */
export function planXentFused(classes: number, dtype: Dtype, maxWorkgroupSize = ROW_WG): XentFusedPlan | null {
  const vw = 16 / storageBytes(dtype);
  const vecs = Math.ceil(classes / vw);
  const maxWg = 2 ** Math.floor(Math.log2(Math.min(1024, maxWorkgroupSize)));
  if (classes < 1 || maxWg < XENT_FUSED_MIN_WG) return null;
  const slots = Math.ceil(vecs / maxWg);
  if (slots > XENT_FUSED_MAX_SLOTS) return null;
  // the smallest power of two that still covers the row in `slots` vectors per invocation
  const wg = Math.max(XENT_FUSED_MIN_WG, 2 ** Math.ceil(Math.log2(Math.ceil(vecs / slots))));
  return { wg, slots, aligned: classes % vw === 0 };
}

/** One invocation's vector of the row: its f32x4 groups (1, or 2 for 16-bit data) and where they go. */
interface Slot {
  /** First element's column. */
  col: Expr;
  groups: Expr[];
  /** Per group, added to it: 0 on the row, -inf past its end (max and exp then ignore those lanes). */
  masks: Expr[];
  /** Writes the gradient's groups (f32x4) back where the vector came from. */
  store: (rs: Expr[]) => void;
}

const NEG_INF = lit(f32, "-inf");

function halvesToF32(words: Expr): Expr[] {
  const h = unpackHalves(words).map((p) => p.cast("f32x2"));
  return [vecOf("f32x4", h[0].x, h[0].y, h[1].x, h[1].y), vecOf("f32x4", h[2].x, h[2].y, h[3].x, h[3].y)];
}

function f32ToHalves(rs: Expr[]): Expr {
  const h = rs.map((r) => r.cast("f16x4"));
  return packHalves(h.flatMap((v) => [v.swz("xy"), v.swz("zw")]));
}

/** The S vectors of invocation t: every load is issued (clamped) before any value is used. */
function loadSlots(k: KernelBuilder, x: Buffer, dx: Buffer, dtype: Dtype, p: XentFusedPlan, row: Expr, t: Expr, classes: Expr): Slot[] {
  const half = storageBytes(dtype) === 2;
  const vw = half ? 8 : 4;
  const vecIdx = Array.from({ length: p.slots }, (_, s) => k.let(t.add(s * p.wg), "vi"));
  const cols = vecIdx.map((v) => k.let(v.mul(vw), "col"));
  if (p.aligned) {
    const dim = k.let(classes.shr(Math.log2(vw)), "dimv");
    const base = k.let(row.mul(dim), "basev");
    const last = k.let(dim.sub(1), "lastv");
    const xv = half ? x.as("u32", 4) : x.as(f32, 4), dv = half ? dx.as("u32", 4) : dx.as(f32, 4);
    const raws = vecIdx.map((v) => k.let(xv.load(base.add(min(v, last))), "xr"));
    return raws.map((raw, s) => {
      const ok = k.let(vecIdx[s].lt(dim), "ok");
      const groups = half ? halvesToF32(raw) : [raw];
      const m = splat(select(ok, lit(f32, 0), NEG_INF));
      const store = (rs: Expr[]) => k.if(ok, () => dv.store(base.add(vecIdx[s]), half ? f32ToHalves(rs) : rs[0]));
      return { col: cols[s], groups, masks: groups.map(() => m), store };
    });
  }
  const base = k.let(row.mul(classes), "base");
  const last = k.let(classes.sub(1), "last");
  const raws = cols.map((c) => {
    const xs = Array.from({ length: vw }, (_, j) => x.load(base.add(min(c.add(j), last))));
    if (!half) return k.let(vecOf("f32x4", ...xs), "xr");
    return k.let(packHalves([0, 2, 4, 6].map((j) => vecOf("f16x2", xs[j], xs[j + 1]))), "xr");
  });
  return raws.map((raw, s) => {
    const ok = Array.from({ length: vw }, (_, j) => k.let(cols[s].add(j).lt(classes), "ok"));
    const groups = half ? halvesToF32(raw) : [raw];
    const masks = groups.map((_, gi) => vecOf("f32x4", ...[0, 1, 2, 3].map((c) => select(ok[gi * 4 + c], lit(f32, 0), NEG_INF))));
    const store = (rs: Expr[]) => rs.forEach((r, gi) => ["x", "y", "z", "w"].forEach((c, e) => {
      const j = gi * 4 + e;
      k.if(ok[j], () => dx.store(base.add(cols[s]).add(j), fromF32(r.swz(c), dtype)));
    }));
    return { col: cols[s], groups, masks, store };
  });
}

export function xentFusedKernel(dtype: Dtype, gDtype: Dtype, p: XentFusedPlan, sg: boolean): KernelDesc {
  const k = kernel(`xent_fused_s${p.slots}_w${p.wg}${sg ? "_sg" : ""}${p.aligned ? "" : "_u"}_${dtype}`, { workgroup: [p.wg] });
  const x = k.buffer("logits", storageOf(dtype), "read");
  const tg = k.buffer("targets", i32, "read");
  const g = k.buffer("g", storageOf(gDtype), "read");
  const loss = k.buffer("loss", f32, "write");
  const dx = k.buffer("dlogits", storageOf(dtype), "write");
  const flag = k.buffer("clamped", u32, "write");
  const pc = k.push(XENT_BWD_PUSH);
  const row = rowIndex(k, pc.rows);
  const t = k.let(k.localIndex, "t");
  const slots = loadSlots(k, x, dx, dtype, p, row, t, pc.classes);
  const sh = k.shared("partial", f32, p.wg);
  const red = (v: Expr, fn: "add" | "max") =>
    sg ? wgReduceSg(k, sh, v, fn) : wgReduce(k, sh, t, v, fn === "max" ? (a, b) => max(a, b) : (a, b) => a.add(b), p.wg);
  const masked = slots.flatMap((s) => s.groups.map((v, gi) => v.add(s.masks[gi])));
  const localMax = tree(masked.map((v) => max(max(v.x, v.y), max(v.z, v.w))), (a, b) => max(a, b));
  const mx = k.let(red(localMax, "max"), "mx");
  const localSum = tree(masked.map((v) => hsum(exp(v.sub(splat(mx))))), (a, b) => a.add(b));
  const lse = k.let(log(red(localSum, "add")).add(mx), "lse");
  const tgt = clampIndex(k, tg.load(row), pc.classes, flag, "tgt");
  k.if(t.eq(0), () => loss.store(row, lse.sub(toF32(x.load(row.mul(pc.classes).add(tgt))))));
  const coef = k.let(toF32(g.load(0)).mul(pc.invN), "coef");
  const lv = k.let(splat(lse), "lsev");
  for (const s of slots) {
    s.store(s.groups.map((v, gi) => {
      const hot = vecOf("f32x4", ...[0, 1, 2, 3].map((e) => select(s.col.add(gi * 4 + e).eq(tgt), lit(f32, 1), lit(f32, 0))));
      return exp(v.sub(lv)).sub(hot).mul(splat(coef));
    }));
  }
  return k.finish();
}
