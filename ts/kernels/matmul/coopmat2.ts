// Workgroup-scope cooperative matrices (VK_NV_cooperative_matrix2): the whole workgroup owns one
// BM×BN accumulator and multiplies BM×BK by BK×BN tiles loaded straight from global memory; the
// driver chooses the staging. Written to answer issue 5's question (does the driver reach Hopper's
// warpgroup MMA this way?), so it stays minimal: aligned shapes (M % BM, N % BN, K % BK == 0), plain
// epilogue, f16/bf16 inputs.
//
// Contract
//   bindings  0 A (read), 1 B (read), 2 C (write; f32 workspace under split-K)
//   push      PUSH_FIELDS (common.ts)
//   dispatch  [N/BN, M/BM, batch·splits], workgroup `threads`
import { coopmat, kernel, type CoopMatType, type KernelDesc } from "../../ir/index.js";
import { PUSH_FIELDS, read, tileOrigin } from "./common.js";
import type { NormalizedProblem } from "./problem.js";

export interface Coop2Config {
  bm: number;
  bn: number;
  bk: number;
  threads: number;
}

export function coop2Name(p: NormalizedProblem, c: Coop2Config, split: boolean): string {
  const t = `${p.transA ? "T" : "N"}${p.transB ? "T" : "N"}`;
  return `mm_cm2_${p.dtype}_${p.accF16 ? "acc16" : "acc32"}_${split ? "f32" : p.outDtype}_${c.bm}x${c.bn}x${c.bk}_t${c.threads}_${t}${split ? "_split" : ""}`;
}

export function coop2Kernel(p: NormalizedProblem, c: Coop2Config, split: boolean): KernelDesc {
  if (p.dtype === "f32") throw new Error("coopmat2 variant: 16-bit inputs only");
  const elem = p.dtype;
  const accElem = p.accF16 ? "f16" : "f32";
  const outElem = split ? "f32" : p.outDtype;
  const tA: CoopMatType = coopmat("a", elem, c.bm, c.bk, "workgroup");
  const tB: CoopMatType = coopmat("b", elem, c.bk, c.bn, "workgroup");
  const tC: CoopMatType = coopmat("acc", accElem, c.bm, c.bn, "workgroup");
  const tO: CoopMatType = coopmat("acc", outElem, c.bm, c.bn, "workgroup");
  const k = kernel(coop2Name(p, c, split), { workgroup: [c.threads] });
  const A = k.buffer("a", elem, "read");
  const B = k.buffer("b", elem, "read");
  const C = k.buffer("c", outElem, "write");
  const pc = k.push(PUSH_FIELDS);
  const wg = k.let(k.workgroupId, "wg");
  const z = k.let(wg.z, "z");
  const bt = k.let(z.div(pc.splits), "bt");
  const sp = k.let(z.rem(pc.splits), "sp");
  const kBeg = k.let(sp.mul(pc.kChunk), "kbeg");
  const kEnd = k.let(kBeg.add(pc.kChunk).min(pc.k), "kend");
  const { row0, col0 } = tileOrigin(k, wg, c.bm, c.bn);
  const aBase = k.let(bt.mul(pc.strideA), "abase");
  const bBase = k.let(bt.mul(pc.strideB), "bbase");
  const acc = k.var(tC, k.cmFill(tC, 0), "acc");
  k.for(kBeg, kEnd, (kk) => {
    const a = p.transA
      ? A.cmLoad(tA, aBase.add(kk.mul(pc.m)).add(row0), pc.m, "col")
      : A.cmLoad(tA, aBase.add(row0.mul(pc.k)).add(kk), pc.k, "row");
    const b = p.transB
      ? B.cmLoad(tB, bBase.add(col0.mul(pc.k)).add(kk), pc.k, "col")
      : B.cmLoad(tB, bBase.add(kk.mul(pc.n)).add(col0), pc.n, "row");
    acc.set(k.cmMulAdd(a, b, read(acc)));
  }, { step: c.bk, name: "kk" });
  const cBase = k.let(split ? sp.mul(pc.batch).add(bt).mul(pc.strideC) : bt.mul(pc.strideC), "cbase");
  C.cmStore(read(acc).cast(tO), cBase.add(row0.mul(pc.n)).add(col0), pc.n, "row");
  return k.finish();
}
