// SIMT tiled matmul (the portable path; the tensor-core path is issue 5's).
//
// matmul_simt: bindings a, b (read), out (write). Push {M, N, K, strideA, strideB}.
//   out[z] = op(a[z]) x op(b[z]) where op transposes when the variant says the operand is
//   stored transposed (transA: a is [K, M]; transB: b is [N, K]); strideA/strideB are the
//   element offsets between batches (0 broadcasts). Output [batch, M, N] contiguous.
// Dispatch: [ceil(N/tile), ceil(M/tile), batch]; 256 threads, each a (tile/16)^2 register
//   tile (rows ty + 16r, cols tx + 16c: conflict-free shared reads); 16-deep k tiles staged
//   in shared memory with loads mapped so consecutive threads read consecutive addresses.
//   tile is 64 (4x4 per thread) or 128 (8x8 per thread, for large outputs).
// Numerics: f32 accumulation for every input dtype; edges handled in-kernel (zero fill).
import { f32, fma, kernel, lit, u32, type Expr, type KernelDesc } from "../ir/index.js";
import type { Dtype } from "../types.js";
import { fromF32, storageOf, toF32, uvar } from "./common.js";

export const MM_TILE = 64;
export type MatmulTile = 64 | 128;
const BK = 16;
const THREADS = 256;

export const MATMUL_PUSH = { M: "u32", N: "u32", K: "u32", strideA: "u32", strideB: "u32" } as const;

export interface MatmulVariant {
  readonly aDtype: Dtype;
  readonly bDtype: Dtype;
  readonly outDtype: Dtype;
  readonly transA: boolean;
  readonly transB: boolean;
  readonly tile: MatmulTile;
}

export function matmulKernel(v: MatmulVariant): KernelDesc {
  const MM_TILE = v.tile;
  const TR = MM_TILE / 16;
  const name = `matmul_simt${MM_TILE}_${v.aDtype}${v.transA ? "t" : ""}_${v.bDtype}${v.transB ? "t" : ""}`;
  const k = kernel(name, { workgroup: [THREADS] });
  const A = k.buffer("a", storageOf(v.aDtype), "read");
  const B = k.buffer("b", storageOf(v.bDtype), "read");
  const C = k.buffer("out", storageOf(v.outDtype), "write");
  const pc = k.push(MATMUL_PUSH);
  const As = k.shared("As", f32, BK * MM_TILE);
  const Bs = k.shared("Bs", f32, BK * MM_TILE);
  const wg = k.workgroupId;
  const n0 = k.let(wg.x.mul(MM_TILE), "n0");
  const m0 = k.let(wg.y.mul(MM_TILE), "m0");
  const z = k.let(wg.z, "z");
  const aOff = k.let(z.mul(pc.strideA), "aoff");
  const bOff = k.let(z.mul(pc.strideB), "boff");
  const tid = k.let(k.localIndex, "tid");
  const tx = k.let(tid.rem(16), "tx");
  const ty = k.let(tid.div(16), "ty");
  const acc: { get(): Expr; set(v: Expr): void }[] = [];
  for (let i = 0; i < TR * TR; i++) acc.push(k.var(f32, 0, `acc${i}`));

  k.for(lit(u32, 0), pc.K, (k0) => {
    for (let q = 0; q < (BK * MM_TILE) / THREADS; q++) {
      const e = k.let(tid.add(q * THREADS), "e");
      // A tile element (row mm, depth kk); mapping keeps global reads contiguous per thread run.
      const mm = k.let(v.transA ? e.rem(MM_TILE) : e.div(BK), "mm");
      const kk = k.let(v.transA ? e.div(MM_TILE) : e.rem(BK), "kk");
      const gm = k.let(m0.add(mm), "gm");
      const gk = k.let(k0.add(kk), "gk");
      const inA = gm.lt(pc.M).and(gk.lt(pc.K));
      const aIdx = v.transA ? gk.mul(pc.M).add(gm) : gm.mul(pc.K).add(gk);
      const av = uvar(k, f32, 0, "av");
      k.if(inA, () => av.set(toF32(A.load(aOff.add(aIdx)))));
      As.store(kk.mul(MM_TILE).add(mm), av.get());
      const nn = k.let(v.transB ? e.div(BK) : e.rem(MM_TILE), "nn");
      const kb = k.let(v.transB ? e.rem(BK) : e.div(MM_TILE), "kb");
      const gn = k.let(n0.add(nn), "gn");
      const gkb = k.let(k0.add(kb), "gkb");
      const inB = gn.lt(pc.N).and(gkb.lt(pc.K));
      const bIdx = v.transB ? gn.mul(pc.K).add(gkb) : gkb.mul(pc.N).add(gn);
      const bv = uvar(k, f32, 0, "bv");
      k.if(inB, () => bv.set(toF32(B.load(bOff.add(bIdx)))));
      Bs.store(kb.mul(MM_TILE).add(nn), bv.get());
    }
    k.barrier();
    k.for(lit(u32, 0), lit(u32, BK), (kk) => {
      const row = k.let(kk.mul(MM_TILE), "rowk");
      const idx = Array.from({ length: TR }, (_, r) => r);
      const a = idx.map((r) => As.load(row.add(ty.add(16 * r))));
      const b = idx.map((c) => Bs.load(row.add(tx.add(16 * c))));
      for (let r = 0; r < TR; r++) for (let c = 0; c < TR; c++) acc[r * TR + c].set(fma(a[r], b[c], acc[r * TR + c].get()));
    }, { unroll: true });
    k.barrier();
  }, { step: BK });

  const cOff = k.let(z.mul(pc.M).mul(pc.N), "coff");
  for (let r = 0; r < TR; r++) {
    const gm = k.let(m0.add(ty.add(16 * r)), "om");
    for (let c = 0; c < TR; c++) {
      const gn = k.let(n0.add(tx.add(16 * c)), "on");
      k.if(gm.lt(pc.M).and(gn.lt(pc.N)), () => {
        C.store(cOff.add(gm.mul(pc.N)).add(gn), fromF32(acc[r * TR + c].get(), v.outDtype));
      });
    }
  }
  return k.finish();
}
