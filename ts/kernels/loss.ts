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
// xent_fused_w<W>[_sg]_<dtype>: xent_rows4's loss and xent_bwd4's dlogits in one dispatch (C % 4
//   == 0), W invocations per row (xentFusedWorkgroup). Bindings logits, targets, g (read), loss
//   (write, f32 [N]), dlogits (write). Push XENT_BWD_PUSH. The row is read twice and written once
//   (xent_rows4 + xent_bwd4 read it three times).
//   The split form (`_split{r}{w}`, f32 only; HeliosBackend.splitOperand's layouts) also writes
//   dlogits' bf16 hi/lo split for the x3 products: bindings after `clamped`, rows (bf16 [N, 2C]:
//   each row's hi then lo) and/or whole (bf16 [2·N·C]: every hi, then every lo), rounded as
//   kernels/matmul/presplit.ts rounds (2·N·C < 2^32).
// Targets outside [0, C) are clamped on the device; the backend checks host-visible
// targets before dispatch and reports them as errors.
import { exp, f32, i32, kernel, log, max, select, lit, u32, vecOf, type Buffer, type BufferView, type Expr, type KernelBuilder, type KernelDesc } from "../ir/index.js";
import type { Dtype } from "../types.js";
import { bf16HiLo } from "./matmul/presplit.js";
import { ROW_WG, clampIndex, fromF32, rowIndex, storageOf, toF32, wgReduce, wgReduceSg } from "./common.js";

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
 * Invocations per row of xent_fused: the most up to 1024 the device allows (a power of two). H200
 * (bench/xent, GPT-2's 16384 × 50304 f16 logits): 1147 µs at 1024, 1197 at 512, 1213 at 256,
 * against 1580 for xent_rows4 + xent_bwd4. Fewer rows in flight per SM leave more of each row
 * (100 KB) in L2 for its second read. A form holding the row in registers (7 16-byte vectors per
 * invocation, read once) took 4622 µs there: removed (git history, bench/RESULTS.md).
 */
export function xentFusedWorkgroup(maxWorkgroupSize = ROW_WG): number {
  return 2 ** Math.floor(Math.log2(Math.max(ROW_WG, Math.min(1024, maxWorkgroupSize))));
}

/**
 * crossEntropyWithGrad's kernel (C % 4 == 0): xent_bwd4 that also writes the row's loss, with `wg`
 * invocations per row. Bindings: logits, targets, g (read), loss (f32 [N]), dlogits, clamped
 * (write); push as xent_bwd. The row is read twice (the log-sum-exp, then the gradient) and written once.
 */
/** Which bf16 hi/lo layouts of dlogits the fused kernel writes besides dlogits itself. */
export interface XentSplit {
  rows: boolean;
  whole: boolean;
}

export function xentFusedKernel(dtype: Dtype, gDtype: Dtype, wg: number, sg: boolean, split?: XentSplit): KernelDesc {
  if (split && dtype !== "f32") throw new Error("helios: internal error: xent split outputs are for f32 logits");
  const forms = split ? `_split${split.rows ? "r" : ""}${split.whole ? "w" : ""}` : "";
  return xentGrad4(`xent_fused_w${wg}${sg ? "_sg" : ""}_${dtype}${forms}`, dtype, gDtype, sg, wg, true, split);
}

function xentGrad4(name: string, dtype: Dtype, gDtype: Dtype, sg: boolean, wg: number, withLoss: boolean, split?: XentSplit): KernelDesc {
  const k = kernel(name, { workgroup: [wg] });
  const x = k.buffer("logits", storageOf(dtype), "read");
  const tg = k.buffer("targets", i32, "read");
  const g = k.buffer("g", storageOf(gDtype), "read");
  const loss = withLoss ? k.buffer("loss", f32, "write") : null;
  const dx = k.buffer("dlogits", storageOf(dtype), "write");
  const flag = k.buffer("clamped", u32, "write");
  const rowsOut = split?.rows ? k.buffer("split_rows", "bf16", "write").as("bf16", 4) : null;
  const wholeOut = split?.whole ? k.buffer("split_whole", "bf16", "write").as("bf16", 4) : null;
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
    const d = k.let(p.sub(hot).mul(vecOf("f32x4", coef)), "d");
    dv.store(base4.add(c), d.cast(vtype));
    if (rowsOut || wholeOut) {
      const { hi, lo } = bf16HiLo(k, d, true);
      // in 4-element vectors: row r's hi at r·2·dim4 + c, its lo dim4 after; whole: hi at base4 + c, lo rows·dim4 after
      if (rowsOut) {
        const at = k.let(base4.add(base4).add(c), "ra");
        rowsOut.store(at, hi);
        rowsOut.store(at.add(dim4), lo);
      }
      if (wholeOut) {
        wholeOut.store(base4.add(c), hi);
        wholeOut.store(pc.rows.mul(dim4).add(base4).add(c), lo);
      }
    }
  }, { step: wg });
  return k.finish();
}
