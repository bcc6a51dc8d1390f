// Small sample kernels that exercise the IR: registered so the spirv-val sweep covers them until
// the real kernel families replace them.
import {
  coopmat, exp, f16, f32, kernel, max, u32,
  type CoopMatType, type KernelDesc,
} from "../ts/ir/index.js";
import type { KernelVariant } from "./kernel-variant.js";
import { coop2MatmulSample, coopMatmulSample } from "./ir-samples-coop.js";

/** out[i] = a[i] + b[i] for i < n. */
export function addKernel(): KernelDesc {
  const k = kernel("sample_add_f32", { workgroup: [256] });
  const a = k.buffer("a", f32, "read");
  const b = k.buffer("b", f32, "read");
  const out = k.buffer("out", f32, "write");
  const { n } = k.push({ n: u32 });
  const i = k.let(k.globalId.x, "i");
  k.if(i.lt(n), () => out.store(i, a.load(i).add(b.load(i))));
  return k.finish();
}

/** A fused elementwise chain with vec4 loads: out = exp(max(a*b + c, 0)) * s. */
export function fusedKernel(): KernelDesc {
  const k = kernel("sample_fused_f32x4", { workgroup: [256] });
  const a = k.buffer("a", f32, "read");
  const b = k.buffer("b", f32, "read");
  const c = k.buffer("c", f32, "read");
  const out = k.buffer("out", f32, "write");
  const { n4, s } = k.push({ n4: u32, s: f32 });
  const i = k.let(k.globalId.x, "i");
  k.if(i.lt(n4), () => {
    const x = a.loadVec(i, 4).mul(b.loadVec(i, 4)).add(c.loadVec(i, 4));
    out.store(i, exp(max(x, 0)).mul(s));
  });
  return k.finish();
}

/** Row sums with a shared-memory tree reduction then a subgroup reduction. */
export function rowSumKernel(): KernelDesc {
  const k = kernel("sample_rowsum_f32", { workgroup: ["WG"] });
  const WG = k.spec("WG", u32, 64);
  const x = k.buffer("x", f32, "read");
  const out = k.buffer("out", f32, "write");
  const { cols } = k.push({ cols: u32 });
  const sh = k.shared("partial", f32, 64);
  const row = k.let(k.workgroupId.x, "row");
  const t = k.let(k.localIndex, "t");
  const acc = k.var(f32, 0, "acc");
  k.for(t, cols, (c) => acc.set(acc.get().add(x.load(row.mul(cols).add(c)))), { step: WG });
  const total = k.sgReduce("add", acc.get());
  k.if(k.subgroupInvocation.eq(0), () => sh.store(k.subgroupId, total));
  k.barrier();
  k.if(t.eq(0), () => {
    const sum = k.var(f32, 0, "sum");
    k.for(0, k.numSubgroups, (j) => sum.set(sum.get().add(sh.load(j))));
    out.store(row, sum.get());
  });
  return k.finish();
}

/** One 16x16x16 f16 tile product per subgroup with f32 accumulation (shapes from DeviceCaps). */
export function coopTileKernel(): KernelDesc {
  const k = kernel("sample_coopmat_f16_16x16x16", { workgroup: [32] });
  const A = k.buffer("a", f16, "read");
  const B = k.buffer("b", f16, "read");
  const C = k.buffer("c", f32, "write");
  const ta: CoopMatType = coopmat("a", f16, 16, 16);
  const tb: CoopMatType = coopmat("b", f16, 16, 16);
  const tc: CoopMatType = coopmat("acc", f32, 16, 16);
  const acc = k.var(tc, k.cmFill(tc, 0), "acc");
  const sa = k.shared("sa", f16, 256);
  k.for(0, 256 / 32, (j) => {
    const e = k.let(j.mul(32).add(k.localIndex), "e");
    sa.store(e, A.load(e));
  });
  k.barrier();
  const a = sa.cmLoad(ta, 0, 16, "row");
  const b = B.cmLoad(tb, 0, 16, "row");
  acc.set(k.cmMulAdd(a, b, acc.get()));
  C.cmStore(acc.get().mul(2), 0, 16, "row");
  return k.finish();
}

export function irSamples(): KernelVariant[] {
  return [
    { id: "sample/add_f32", needs: [], build: addKernel },
    { id: "sample/fused_f32x4", needs: [], build: fusedKernel },
    { id: "sample/rowsum_f32", needs: ["subgroup"], build: rowSumKernel },
    { id: "sample/coopmat_f16", needs: ["coopmat", "f16"], build: coopTileKernel },
    { id: "sample/coop_matmul_f16_f32", needs: ["coopmat", "f16"], build: () => coopMatmulSample({ elem: "f16", acc: "f32" }) },
    { id: "sample/coop_matmul_f16_f16", needs: ["coopmat", "f16"], build: () => coopMatmulSample({ elem: "f16", acc: "f16" }) },
    { id: "sample/coop_matmul_bf16_f32", needs: ["coopmat", "bf16"], build: () => coopMatmulSample({ elem: "bf16", acc: "f32" }) },
    { id: "sample/coop2_matmul_tensor_f16_f32", needs: ["coopmat2", "f16"], build: coop2MatmulSample },
  ];
}
