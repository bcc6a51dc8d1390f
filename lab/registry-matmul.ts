// Matmul variants for the spirv-val sweep (lab/registry.ts): every kernel family × a
// spread of layouts, dtypes, epilogues and alignment cases, so each code path is assembled.
import type { KernelVariant, KernelNeed } from "./kernel-variant.js";
import { planMatmul, type MatmulCaps } from "../ts/kernels/matmul/plan.js";
import type { MatmulProblem } from "../ts/kernels/matmul/problem.js";
import { VARIANTS } from "../ts/kernels/matmul/variants.js";

const CAPS: MatmulCaps = {
  coopMatSupported: true,
  coopMat2Supported: true,
  bf16Supported: true,
  f16Supported: true,
  subgroupSize: 32,
  maxSharedMemoryBytes: 49152,
};

const WIDE_REP = "cm_128x256x16_w2x4_v128_pf2";
const PRESPLIT_REPS = new Set(["cm_64x64x32_w2x2", "cm_128x256x32_w2x4_v128_s1"]);

function problems(): MatmulProblem[] {
  const out: MatmulProblem[] = [];
  for (const dtype of ["f16", "bf16", "f32"] as const) {
    out.push({ m: 512, n: 512, k: 512, dtype });
    out.push({ m: 17, n: 33, k: 65, dtype, transA: true, transB: true });
    out.push({ m: 100, n: 96, k: 64, dtype, transB: true, batch: 3, epilogue: { bias: true, act: "gelu", residual: true, scale: 0.5 } });
    out.push({ m: 64, n: 64, k: 4096, dtype, transA: true, epilogue: { bias: true, act: "silu" } });
  }
  out.push({ m: 512, n: 512, k: 512, dtype: "f16", accF16: true, epilogue: { act: "relu" } });
  out.push({ m: 128, n: 128, k: 128, dtype: "f16", outDtype: "f32" });
  // K too short to split: a split-K variant must fall back to a plain kernel with f16 stores
  out.push({ m: 64, n: 64, k: 8, dtype: "f16" });
  out.push({ m: 256, n: 256, k: 256, dtype: "f16", transB: true });
  out.push({ m: 256, n: 256, k: 4096, dtype: "bf16", outDtype: "f32", transA: true });
  // whole f32 tiles with each operand K-contiguous or not: the fused presplit products' lo tiles
  out.push({ m: 256, n: 256, k: 256, dtype: "f32", transA: true });
  out.push({ m: 256, n: 256, k: 256, dtype: "f32", transB: true });
  // the trainer's linear layers (HeliosBackend.linear): f16 out with an f32 bias (qkv, fc; edge
  // tiles), f32 out with f32 bias and residual (the projections; whole tiles)
  out.push({ m: 100, n: 96, k: 64, dtype: "f16", epilogue: { bias: true, biasDtype: "f32" } });
  out.push({ m: 256, n: 256, k: 256, dtype: "f16", outDtype: "f32", epilogue: { bias: true, residual: true } });
  // the MLP backward's dy·W ⊙ gelu'(f) (linear's geluGradOf): f16 (matmul16) on edge tiles and
  // whole ones (the fragment epilogue, stream-K fixups, split-K reduces), f32 (SIMT, presplit);
  // with every other term once
  out.push({ m: 100, n: 96, k: 64, dtype: "f16", epilogue: { geluGrad: true } });
  out.push({ m: 256, n: 256, k: 256, dtype: "f16", epilogue: { geluGrad: true } });
  out.push({ m: 256, n: 256, k: 256, dtype: "f32", epilogue: { geluGrad: true } });
  out.push({ m: 100, n: 96, k: 64, dtype: "f16", outDtype: "f32", epilogue: { scale: 0.5, bias: true, act: "relu", geluGrad: true, residual: true } });
  // whole f16 tiles with every term: the gate and the residual at the 16-byte lane stores
  out.push({ m: 256, n: 256, k: 256, dtype: "f16", epilogue: { bias: true, act: "gelu", geluGrad: true, residual: true } });
  return out;
}

export function matmulKernelVariants(): KernelVariant[] {
  const seen = new Set<string>();
  const out: KernelVariant[] = [];
  for (const p of problems()) {
    for (const v of VARIANTS.values()) {
      if (v.splits > 2) continue;
      // 128-bit staging variants: split-K (only the epilogue differs) and f32 inputs (f32x4
      // chunks, as the older tiles) are covered by one of them, to keep CI's sweep short
      if (v.kind === "coop" && v.cfg.wide && (v.splits > 1 || p.dtype === "f32") && v.base !== WIDE_REP) continue;
      if (v.kind === "simt" && p.dtype === "bf16") continue;
      // presplit f32: the split kernels plus two representative inner tiles, and every fused tile
      if (v.kind === "presplit" && (v.splits > 2 || (!v.fused && (v.splits > 1 || !PRESPLIT_REPS.has(v.inner.base))))) continue;
      let plan;
      try {
        plan = planMatmul(p, CAPS, { variant: v.name });
      } catch {
        continue; // unsupported combination (e.g. shared memory)
      }
      for (const s of plan.steps) {
        if (seen.has(s.desc.name)) continue;
        seen.add(s.desc.name);
        const needs: KernelNeed[] = [];
        const split3 = v.kind === "coop" && !!v.cfg.split3;
        const presplit = v.kind === "presplit";
        const splitKernel = s.desc.name.startsWith("mm_presplit");
        if (p.dtype === "f16" || p.outDtype === "f16" || (v.kind === "coop" && p.dtype === "f32" && !split3)) needs.push("f16");
        if (p.dtype === "bf16" || p.outDtype === "bf16" || split3 || presplit) needs.push("bf16");
        if ((v.kind === "coop" || presplit) && !s.desc.name.includes("reduce") && !splitKernel) needs.push("coopmat", "subgroup");
        const desc = s.desc;
        out.push({ id: desc.name, needs, build: () => desc });
      }
    }
  }
  return out;
}
