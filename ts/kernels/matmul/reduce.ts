// Split-K reduction: sums the f32 partial products of every split and applies the epilogue.
//
// Contract
//   bindings  0 workspace (read, f32 [splits][batch][M][N]), 1 C (write, output dtype),
//             then the epilogue's bias, residual and preact (read; common.ts epilogueRoles)
//   push      PUSH_FIELDS (common.ts)
//   dispatch  [min(ceil(batch·M·N / 256), 65535), 1, 1], workgroup 256; grid-stride loop
import { f32, kernel, type Expr, type KernelDesc } from "../../ir/index.js";
import { applyEpilogue, finishBindings, read, epilogueTag } from "./common.js";
import type { NormalizedProblem } from "./problem.js";

export const REDUCE_THREADS = 256;

export function reduceName(p: NormalizedProblem): string {
  const epi = epilogueTag(p);
  return `mm_splitk_reduce_${p.outDtype}${epi}`;
}

export function reduceKernel(p: NormalizedProblem): KernelDesc {
  const k = kernel(reduceName(p), { workgroup: [REDUCE_THREADS] });
  const { ws, C, pc, refs } = finishBindings(k, p, "f32");
  const total = k.let(pc.batch.mul(pc.strideC), "total");
  const stride = k.let(k.numWorkgroups.x.mul(REDUCE_THREADS), "stride");
  k.for(k.globalId.x, total, (i: Expr) => {
    const acc = k.var(f32, 0, "acc");
    k.for(0, pc.splits, (s: Expr) => {
      const v = ws.load(s.mul(total).add(i));
      acc.set(read(acc).add(v));
    }, { name: "s" });
    const col = k.let(i.rem(pc.n), "col");
    const y = applyEpilogue(k, p, refs, read(acc), col, i);
    C.store(i, y.cast(p.outDtype));
  }, { step: stride, name: "i" });
  return k.finish();
}
