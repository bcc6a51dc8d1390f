// Variants of per-step kernels whose per-step scalars come from a small device tensor instead
// of push constants, so a captured training step replays with new values (ts/exec/capture.ts).
//
// adamw_device: bindings p, m, v (readwrite), g, hyper (read f32 [5]). Push {n, beta1, beta2,
//   eps, wd}. hyper = [lr, bc1, bc2, gradScale, skip]. Same math and order of operations as
//   adamw (kernels/optim.ts), but in place: a capture binds the parameter buffers once, so they
//   must keep their identity. skip != 0 leaves p, m and v untouched (the non-finite guard).
//   Dispatch grid1d(n).
// dropout_mask_at: bindings counter (read i32 [1]), out (write f32). Push {n, seed, threshold,
//   keep}. As dropout_mask with counter = counter[0] + offset, the offset folded into the seed
//   on the host (seed + offset*2654435761 wraps the same as the sum). Dispatch grid1d(n).
import { f32, i32, kernel, lit, select, u32, type KernelDesc } from "../ir/index.js";
import type { Dtype } from "../types.js";
import { WG, flatIndex, fromF32, storageOf } from "./common.js";
import { adamwElement } from "./optim.js";

export const ADAMW_DEVICE_PUSH = { n: "u32", beta1: "f32", beta2: "f32", eps: "f32", wd: "f32" } as const;

/** Elements of the hyper tensor adamw_device reads. */
export const ADAMW_HYPER = 5;

export function adamwDeviceKernel(pDtype: Dtype, gDtype: Dtype): KernelDesc {
  const k = kernel(`adamw_device_${pDtype}_${gDtype}`, { workgroup: [WG] });
  const p = k.buffer("p", storageOf(pDtype), "readwrite");
  const g = k.buffer("g", storageOf(gDtype), "read");
  const m = k.buffer("m", f32, "readwrite");
  const v = k.buffer("v", f32, "readwrite");
  const hyper = k.buffer("hyper", f32, "read");
  const pc = k.push(ADAMW_DEVICE_PUSH);
  const i = flatIndex(k);
  k.if(i.ge(pc.n), () => k.return());
  const skip = k.let(hyper.load(lit(u32, 4)), "skip");
  k.if(skip.ne(0), () => k.return());
  const lr = k.let(hyper.load(lit(u32, 0)), "lr");
  const bc1 = k.let(hyper.load(lit(u32, 1)), "bc1");
  const bc2 = k.let(hyper.load(lit(u32, 2)), "bc2");
  const s = { lr, beta1: pc.beta1, beta2: pc.beta2, eps: pc.eps, wd: pc.wd, bc1, bc2 };
  const r = adamwElement(k, s, {
    p: () => p.load(i), g: () => g.load(i), m: () => m.load(i), v: () => v.load(i), gradScale: () => hyper.load(lit(u32, 3)),
  });
  p.store(i, fromF32(r.p, pDtype));
  m.store(i, r.m);
  v.store(i, r.v);
  return k.finish();
}

export const DROPOUT_AT_PUSH = { n: "u32", seed: "u32", threshold: "u32", keep: "f32" } as const;

export function dropoutMaskAtKernel(): KernelDesc {
  const k = kernel("dropout_mask_at", { workgroup: [WG] });
  const counter = k.buffer("counter", i32, "read");
  const out = k.buffer("out", f32, "write");
  const pc = k.push(DROPOUT_AT_PUSH);
  const i = flatIndex(k);
  k.if(i.ge(pc.n), () => k.return());
  const c = k.let(counter.load(lit(u32, 0)).cast(u32), "c");
  const h0 = k.let(pc.seed.add(c.mul(lit(u32, 2654435761))).add(i.mul(lit(u32, 2246822519))), "h0");
  const h1 = k.let(h0.bxor(h0.shr(16)).mul(lit(u32, 0x85ebca6b)), "h1");
  const h2 = k.let(h1.bxor(h1.shr(13)).mul(lit(u32, 0xc2b2ae35)), "h2");
  const h = k.let(h2.bxor(h2.shr(16)), "h");
  out.store(i, select(h.gt(pc.threshold), pc.keep, lit(f32, 0)));
  return k.finish();
}
