// Data movement and generated masks.
//
// copy_strided: bindings src (read), dst (readwrite: only the addressed elements change).
//   Push {n, d0..d5, s0..s5, t0..t5, srcBase, dstBase}: thread i < n unravels i over dims d
//   (row-major, unused trailing dims = 1) and copies src[srcBase + sum c*s] to
//   dst[dstBase + sum c*t]. One kernel serves transpose, slice, cat, scatterSlice,
//   sliceQkv and broadcast. Raw element copy: no conversion. Dispatch grid1d(n).
// copy_strided_*_v128: the same over 16-byte chunks (push in chunk units) when the innermost
//   dim is contiguous on both sides and chunk-aligned.
// causal_mask: binding out (write f32). Push {n, size}. out[i*size+j] = j > i ? -inf : 0.
// dropout_mask: binding out (write f32). Push {n, seed, counter, threshold, keep}.
//   h = seed + counter*2654435761 + i*2246822519 (u32 wrap), then the two multiply-xorshift
//   rounds of Alpha's DropoutRng; kept when h > threshold = floor(p * 2^32), which is
//   exactly Alpha's test h/2^32 > p. Bit-identical to Alpha for i*2246822519 < 2^53
//   (about 4M elements per mask): past that Alpha's float64 arithmetic rounds.
import { f32, kernel, lit, select, u32, type Buffer, type Expr, type KernelBuilder, type KernelDesc } from "../ir/index.js";
import type { Dtype } from "../types.js";
import { WG, flatIndex, storageOf } from "./common.js";

export const COPY_RANK = 6;

export const COPY_PUSH = (() => {
  const spec: Record<string, "u32"> = { n: "u32" };
  for (const p of ["d", "s", "t"]) for (let i = 0; i < COPY_RANK; i++) spec[`${p}${i}`] = "u32";
  spec.srcBase = "u32";
  spec.dstBase = "u32";
  return spec;
})();

export function copyStridedKernel(dtype: Dtype): KernelDesc {
  return stridedCopy(dtype, "", (src, dst, so, dO) => dst.store(dO, src.load(so)));
}

/**
 * copy_strided over 16-byte chunks (u32x4 views of the same bindings, raw bits): the host uses
 * it when the innermost dim is contiguous on both sides and every size, stride and base there
 * is a multiple of one chunk (ts/ops/layout.ts), with the push in chunk units. One thread moves
 * 8 halves or 4 words, so the index arithmetic (a division per dim) is paid once per 16 bytes.
 */
export function copyStridedV128Kernel(dtype: Dtype): KernelDesc {
  return stridedCopy(dtype, "_v128", (src, dst, so, dO) => dst.as("u32", 4).store(dO, src.as("u32", 4).load(so)));
}

/** Thread i < n moves element (or chunk) i: `move` gets the source and destination offsets. */
function stridedCopy(dtype: Dtype, suffix: string, move: (src: Buffer, dst: Buffer, so: Expr, dO: Expr) => void): KernelDesc {
  const k = kernel(`copy_strided_${storageOf(dtype)}${suffix}`, { workgroup: [WG] });
  const src = k.buffer("src", storageOf(dtype), "read");
  const dst = k.buffer("dst", storageOf(dtype), "readwrite");
  const pc = k.push(COPY_PUSH);
  const i = flatIndex(k);
  k.if(i.ge(pc.n), () => k.return());
  const { so, dO } = unravel(k, i, pc);
  move(src, dst, so, dO);
  return k.finish();
}

/** Source and destination offsets of flat index i over COPY_PUSH's dims and strides. */
function unravel(k: KernelBuilder, i: Expr, pc: Record<string, Expr>): { so: Expr; dO: Expr } {
  const rem = k.var(u32, i, "rem");
  const so = k.var(u32, pc.srcBase, "so");
  const dO = k.var(u32, pc.dstBase, "do");
  for (let d = COPY_RANK - 1; d >= 0; d--) {
    const r = rem.get();
    const c = k.let(r.rem(pc[`d${d}`]), "c");
    rem.set(r.div(pc[`d${d}`]));
    so.set(so.get().add(c.mul(pc[`s${d}`])));
    dO.set(dO.get().add(c.mul(pc[`t${d}`])));
  }
  return { so: so.get(), dO: dO.get() };
}

export const CAUSAL_PUSH = { n: "u32", size: "u32" } as const;

export function causalMaskKernel(): KernelDesc {
  const k = kernel("causal_mask", { workgroup: [WG] });
  const out = k.buffer("out", f32, "write");
  const pc = k.push(CAUSAL_PUSH);
  const i = flatIndex(k);
  k.if(i.ge(pc.n), () => k.return());
  const r = i.div(pc.size);
  const c = i.rem(pc.size);
  out.store(i, select(c.gt(r), lit(f32, "-inf"), lit(f32, 0)));
  return k.finish();
}

export const DROPOUT_PUSH = { n: "u32", seed: "u32", counter: "u32", threshold: "u32", keep: "f32" } as const;

export function dropoutMaskKernel(): KernelDesc {
  const k = kernel("dropout_mask", { workgroup: [WG] });
  const out = k.buffer("out", f32, "write");
  const pc = k.push(DROPOUT_PUSH);
  const i = flatIndex(k);
  k.if(i.ge(pc.n), () => k.return());
  const h0 = k.let(pc.seed.add(pc.counter.mul(lit(u32, 2654435761))).add(i.mul(lit(u32, 2246822519))), "h0");
  const h1 = k.let(h0.bxor(h0.shr(16)).mul(lit(u32, 0x85ebca6b)), "h1");
  const h2 = k.let(h1.bxor(h1.shr(13)).mul(lit(u32, 0xc2b2ae35)), "h2");
  const h = k.let(h2.bxor(h2.shr(16)), "h");
  out.store(i, select(h.gt(pc.threshold), pc.keep, lit(f32, 0)));
  return k.finish();
}
