// Generated random tensors.
//
// randn_<dtype>: binding out (write). Push {n, key0, key1}. Thread i < n draws two 32-bit words
//   from a counter-based generator — murmur3's fmix32 applied twice, keyed by key0 and key1,
//   to the counters 2i and 2i+1 — turns them into u1 in (0, 1] and u2 in [0, 1) (24 bits each)
//   and stores the Box-Muller normal sqrt(-2 ln u1) cos(2 pi u2). Keys come from the backend's
//   seeded host generator, one pair per call, so a seed gives the same tensors in the same order.
//   Dispatch grid1d(n).
import { cos, f32, kernel, lit, log, sqrt, u32, type Expr, type KernelBuilder, type KernelDesc } from "../ir/index.js";
import type { Dtype } from "../types.js";
import { WG, flatIndex, fromF32, storageOf } from "./common.js";

export const RANDN_PUSH = { n: "u32", key0: "u32", key1: "u32" } as const;

/** murmur3's 32-bit finalizer: a bijection on u32 with full avalanche. */
function fmix32(k: KernelBuilder, h: Expr, name: string): Expr {
  const a = k.let(h.bxor(h.shr(16)).mul(lit(u32, 0x85ebca6b)), `${name}a`);
  const b = k.let(a.bxor(a.shr(13)).mul(lit(u32, 0xc2b2ae35)), `${name}b`);
  return k.let(b.bxor(b.shr(16)), name);
}

export function randnKernel(dtype: Dtype): KernelDesc {
  const k = kernel(`randn_${dtype}`, { workgroup: [WG] });
  const out = k.buffer("out", storageOf(dtype), "write");
  const pc = k.push(RANDN_PUSH);
  const i = flatIndex(k);
  k.if(i.ge(pc.n), () => k.return());
  const c = k.let(i.mul(lit(u32, 2)), "c");
  const x1 = fmix32(k, fmix32(k, c.bxor(pc.key0), "p1").bxor(pc.key1), "x1");
  const x2 = fmix32(k, fmix32(k, c.add(lit(u32, 1)).bxor(pc.key0), "p2").bxor(pc.key1), "x2");
  const scale = 1 / 16777216;
  const u1 = k.let(x1.shr(8).cast(f32).add(1).mul(scale), "u1");
  const u2 = k.let(x2.shr(8).cast(f32).mul(scale), "u2");
  const z = k.let(sqrt(log(u1).mul(-2)).mul(cos(u2.mul(2 * Math.PI))), "z");
  out.store(i, fromF32(z, dtype));
  return k.finish();
}
