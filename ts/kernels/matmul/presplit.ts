// f32 products on bf16 tensor cores through the tuned 16-bit kernels: each f32 operand is split
// once into bf16 high and low parts (x = hi + lo to ~2^-16 relative), laid out so that one bf16
// product over K' = 3K computes A_hi·B_hi + A_hi·B_lo + A_lo·B_hi in f32 accumulators:
//   A' = [A_hi | A_hi | A_lo] and B' = [B_hi ; B_lo ; B_hi], concatenated along K.
// The dropped A_lo·B_lo term is ~2^-16 relative, so the result passes the exact-f32 gate (1e-4)
// like the in-kernel split (cm3_*, which splits while staging and runs ~2x slower).
//
// Contract of the split kernel (mm_presplit_*):
//   bindings  0 src (read, f32, n elements), 1 dst (write, bf16, 3n elements)
//   push      {n, seg}: element i = q·seg + r of src lands at dst[q·3·seg + s·seg + r] for
//             s = 0, 1, 2: the low part in block `lo` (a kernel parameter: 2 for A, 1 for B), the
//             high part in the other two. seg = K
//             concatenates along the contiguous dim (row-major A, transposed B), seg = K·(rows)
//             stacks whole blocks (transposed A, row-major B: K is the row index there).
//             The x4 form counts 4-element chunks (n and seg divisible by 4).
//   dispatch  [min(ceil(n / 256), 65535), 1, 1] (x4: n / 4), workgroup 256; grid-stride loop
//   The two-block form (`blocks` = 2, lo = 1; the split flash attention's [hi | lo] operands)
//   writes dst[q·2·seg + s·seg + r] for s = 0, 1 (2n elements).
import { f32, kernel, toBf16, type Expr, type KernelBuilder, type KernelDesc } from "../../ir/index.js";
import { ceilDiv } from "./common.js";
import type { NormalizedProblem } from "./problem.js";

export const SPLIT_PUSH = { n: "u32", seg: "u32" } as const;
export const SPLIT_THREADS = 256;

/**
 * The split of f32 value x (f32x4 with `vec4`): hi = x rounded to bf16, lo = (x − hi) rounded, both
 * to nearest in integer arithmetic (toBf16: the device's conversion may truncate). Every kernel
 * that writes operand splits (this one, the fused elementwise and cross-entropy split outputs)
 * rounds through here, so the splits they write are the same bits.
 */
export function bf16HiLo(k: KernelBuilder, x: Expr, vec4: boolean): { hi: Expr; lo: Expr } {
  const hi = k.let(toBf16(x), "hi");
  const lo = k.let(toBf16(x.sub(hi.cast(vec4 ? "f32x4" : "f32"))), "lo");
  return { hi, lo };
}

/** The split kernel's name: it names the layout the kernel writes (split-ahead keys use it too). */
export function presplitName(vec4: boolean, lo: 1 | 2, blocks: 2 | 3): string {
  return `mm_presplit_f32_bf16${vec4 ? "x4" : ""}_lo${lo}${blocks === 3 ? "" : `_b${blocks}`}`;
}

export function presplitKernel(vec4: boolean, lo: 1 | 2, blocks: 2 | 3 = 3): KernelDesc {
  if (lo >= blocks) throw new Error(`mm_presplit: low block ${lo} outside ${blocks} blocks`);
  const k = kernel(presplitName(vec4, lo, blocks), { workgroup: [SPLIT_THREADS] });
  const src = k.buffer("src", f32, "read");
  const dstBuf = k.buffer("dst", "bf16", "write");
  const pc = k.push(SPLIT_PUSH);
  const dst = vec4 ? dstBuf.as("bf16", 4) : dstBuf;
  const stride = k.let(k.numWorkgroups.x.mul(SPLIT_THREADS), "stride");
  k.for(k.globalId.x, pc.n, (i: Expr) => {
    const x = vec4 ? src.loadVec(i, 4) : src.load(i);
    const { hi, lo: low } = bf16HiLo(k, x, vec4);
    const q = k.let(i.div(pc.seg), "q");
    const base = k.let(q.mul(pc.seg).mul(blocks).add(i.sub(q.mul(pc.seg))), "base");
    for (let s = 0; s < blocks; s++) {
      dst.store(base.add(pc.seg.mul(s)), s === lo ? low : hi);
    }
  }, { step: stride, name: "i" });
  return k.finish();
}

/** One operand's split: which kernel, its push values and grid. */
export interface SplitJob {
  vec4: boolean;
  lo: 1 | 2;
  blocks: 2 | 3;
  push: { n: number; seg: number };
  groups: [number, number, number];
  /** Bytes of the bf16 result. */
  bytes: number;
}

/**
 * The splits of A and B for problem p. Three blocks: A's low part goes in the third K block, B's
 * in the second. Two blocks (the kernel maps K' thirds to blocks, CoopConfig.kSeg2): [hi | lo]
 * for both. K is the contiguous dim of row-major A and transposed B, the row index otherwise.
 */
export function splitJobs(p: NormalizedProblem, blocks: 2 | 3 = 3): { a: SplitJob; b: SplitJob } {
  const aLen = p.batch * p.m * p.k;
  const bLen = (p.broadcastB ? 1 : p.batch) * p.k * p.n;
  return {
    a: splitJob(aLen, p.transA ? p.k * p.m : p.k, blocks === 3 ? 2 : 1, blocks),
    b: splitJob(bLen, p.transB ? p.k : p.k * p.n, 1, blocks),
  };
}

/** The split of `len` f32 elements in segments of `seg` (vectorized where seg % 4 == 0). */
export function splitJob(len: number, seg: number, lo: 1 | 2, blocks: 2 | 3): SplitJob {
  const vec4 = seg % 4 === 0;
  const n = vec4 ? len / 4 : len;
  return {
    vec4,
    lo,
    blocks,
    push: { n, seg: vec4 ? seg / 4 : seg },
    groups: [Math.max(1, Math.min(65535, ceilDiv(n, SPLIT_THREADS))), 1, 1],
    bytes: Math.ceil((blocks * len * 2) / 4) * 4,
  };
}

/** Why the presplit layout cannot hold p (element offsets of the tripled operands past 2^32). */
export function presplitLimit(p: NormalizedProblem): string | null {
  const big = Math.max(p.batch * p.m * p.k, (p.broadcastB ? 1 : p.batch) * p.k * p.n) * 3;
  return big >= 2 ** 32 ? `the split operands would hold ${big} elements (limit 2^32)` : null;
}
