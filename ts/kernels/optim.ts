// AdamW step, Alpha's argument list and order of operations.
//
// adamw: bindings p, g, m, v (read), p2, m2, v2 (write). Push {n, lr, beta1, beta2, eps, wd,
//   bc1, bc2, gradScale}. Thread per element:
//     g' = g * gradScale; p -= lr*wd*p (only when wd > 0, as Alpha); m = b1*m + (1-b1)*g';
//     v = b2*v + (1-b2)*g'^2; p -= lr * (m/bc1) / (sqrt(v/bc2) + eps).
//   Out of place: the backend rebinds the tensors to the new buffers, so pending readers
//   of the old values still see them (program order). Dispatch grid1d(n).
import { f32, kernel, select, sqrt, type KernelDesc } from "../ir/index.js";
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
  const gs = k.let(toF32(g.load(i)).mul(pc.gradScale), "gs");
  const p0 = k.let(toF32(p.load(i)), "p0");
  const pd = k.let(select(pc.wd.gt(0), p0.sub(pc.lr.mul(pc.wd).mul(p0)), p0), "pd");
  const mn = k.let(pc.beta1.mul(m.load(i)).add(pc.beta1.neg().add(1).mul(gs)), "mn");
  const vn = k.let(pc.beta2.mul(v.load(i)).add(pc.beta2.neg().add(1).mul(gs).mul(gs)), "vn");
  const upd = pc.lr.mul(mn.div(pc.bc1)).div(sqrt(vn.div(pc.bc2)).add(pc.eps));
  p2.store(i, fromF32(pd.sub(upd), pDtype));
  m2.store(i, mn);
  v2.store(i, vn);
  return k.finish();
}
