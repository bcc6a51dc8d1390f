// Cross-entropy over rows of logits [N, C] with i32 targets [N].
//
// xent_rows: bindings logits, targets (read), loss (write, f32 [N]). Push {classes}. One
//   workgroup per row: loss[r] = logsumexp(row) - row[target]. The mean over rows is a
//   reduce_rows pass with scale 1/N (a second dispatch; deterministic, no atomics).
// xent_bwd: bindings logits, targets, g (read; g is the scalar upstream gradient), dlogits
//   (write). Push {classes, invN}. One workgroup per row:
//   dlogits = (softmax(row) - onehot(target)) * g * invN.
// Targets outside [0, C) are clamped on the device; the backend checks host-visible
// targets before dispatch and reports them as errors.
import { exp, f32, i32, kernel, log, max, min, select, lit, u32, type Buffer, type Expr, type KernelBuilder, type KernelDesc } from "../ir/index.js";
import type { Dtype } from "../types.js";
import { ROW_WG, clampIndex, fromF32, rowIndex, storageOf, toF32, wgReduce } from "./common.js";

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
