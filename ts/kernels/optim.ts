// AdamW step, Alpha's argument list and order of operations.
//
// adamw: bindings p, g, m, v (read), p2, m2, v2 (write). Push {n, lr, beta1, beta2, eps, wd,
//   bc1, bc2, gradScale}. Thread per element:
//     g' = g * gradScale; p -= lr*wd*p (only when wd > 0, as Alpha); m = b1*m + (1-b1)*g';
//     v = b2*v + (1-b2)*g'^2; p -= lr * (m/bc1) / (sqrt(v/bc2) + eps).
//   Out of place: the backend rebinds the tensors to the new buffers, so pending readers
//   of the old values still see them (program order). Dispatch grid1d(n).
import { f32, kernel, select, sqrt, type Expr, type KernelBuilder, type KernelDesc } from "../ir/index.js";
import type { Dtype } from "../types.js";
import { WG, flatIndex, fromF32, storageOf, toF32 } from "./common.js";

export const ADAMW_PUSH = {
  n: "u32", lr: "f32", beta1: "f32", beta2: "f32", eps: "f32", wd: "f32", bc1: "f32", bc2: "f32", gradScale: "f32",
} as const;

export function adamwKernel(pDtype: Dtype, gDtype: Dtype): KernelDesc {
  const k = kernel(`adamw_${pDtype}_${gDtype}`, { workgroup: [WG] });
  const p = k.buffer("p", storageOf(pDtype), "read");
  const g = k.buffer("g", storageOf(gDtype), "read");
  const m = k.buffer("m", f32, "read");
  const v = k.buffer("v", f32, "read");
  const p2 = k.buffer("p2", storageOf(pDtype), "write");
  const m2 = k.buffer("m2", f32, "write");
  const v2 = k.buffer("v2", f32, "write");
  const pc = k.push(ADAMW_PUSH);
  const i = flatIndex(k);
  k.if(i.ge(pc.n), () => k.return());
  const r = adamwElement(k, pc, { p: () => p.load(i), g: () => g.load(i), m: () => m.load(i), v: () => v.load(i), gradScale: () => pc.gradScale });
  p2.store(i, fromF32(r.p, pDtype));
  m2.store(i, r.m);
  v2.store(i, r.v);
  return k.finish();
}

/** The f32 scalars of one AdamW update, as expressions (push constants or loads from a device tensor). */
export interface AdamwScalars {
  lr: Expr; beta1: Expr; beta2: Expr; eps: Expr; wd: Expr; bc1: Expr; bc2: Expr;
}

/**
 * One element's update in the order of operations above, shared by every AdamW kernel (adamw,
 * adamw_device, adamw_multi) so that they round alike. `load` reads the element's p, g, m and v
 * and gradScale (each called once, where the value is first needed); returns the new values in f32 (the caller
 * converts p to its storage type).
 */
export function adamwElement(
  k: KernelBuilder, s: AdamwScalars, load: { p(): Expr; g(): Expr; m(): Expr; v(): Expr; gradScale(): Expr },
): { p: Expr; m: Expr; v: Expr } {
  const gs = k.let(toF32(load.g()).mul(load.gradScale()), "gs");
  const p0 = k.let(toF32(load.p()), "p0");
  const pd = k.let(select(s.wd.gt(0), p0.sub(s.lr.mul(s.wd).mul(p0)), p0), "pd");
  const mn = k.let(s.beta1.mul(load.m()).add(s.beta1.neg().add(1).mul(gs)), "mn");
  const vn = k.let(s.beta2.mul(load.v()).add(s.beta2.neg().add(1).mul(gs).mul(gs)), "vn");
  const upd = s.lr.mul(mn.div(s.bc1)).div(sqrt(vn.div(s.bc2)).add(s.eps));
  return { p: pd.sub(upd), m: mn, v: vn };
}
