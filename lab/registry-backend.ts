// The backend's kernel variants for the registry (lab/registry.ts: the spirv-val sweep, the
// driver-statistics benchmark): every family in every storage dtype, plus representative
// fused-elementwise programs.
import type { Dtype } from "../ts/types.js";
import type { KernelVariant } from "./kernel-variant.js";
import { planFused } from "../ts/fusion/plan.js";
import type { Expr } from "../ts/fusion/expr.js";
import type { Lease } from "../ts/exec/lease.js";
import { generateFused } from "../ts/kernels/elementwise.js";
import { colsumKernel } from "../ts/kernels/colsum.js";
import { reduceRowsKernel, reduceStridedKernel, softmaxRowsKernel, softmaxStridedKernel, softmaxRowsCachedKernel, type ReduceFn } from "../ts/kernels/reduce.js";
import { layerNormBwdDx4Kernel, layerNormFwd4Kernel, softmaxRows4Kernel } from "../ts/kernels/rows4.js";
import { layerNormBwdFusedKernel } from "../ts/kernels/layernorm-bwd.js";
import { FLASH_FWD } from "../ts/kernels/attention-variants.js";
import { flashFwdCmSlKernel } from "../ts/kernels/attention-cm-acc.js";
import { flashBwdDqCmKernel } from "../ts/kernels/attention-cm-bwd.js";
import { FLASH_BWD_DKDV, flashBwdDkDvCmKernel, flashBwdDkDvSplit } from "../ts/kernels/attention-cm-bwd-kv.js";
import {
  LN_COLS_UNROLL, LN_DX_PLAIN, layerNormBwdColsKernel, layerNormFwdKernel, layerNormFwdCachedKernel, layerNormBwdDxKernel, layerNormBwdDwDbKernel,
  lnDxTag, lnGradTag, type LnDxOpts,
} from "../ts/kernels/norm.js";
import { xentRowsKernel, xentBwdKernel, xentRows4Kernel, xentBwd4Kernel, xentFusedKernel } from "../ts/kernels/loss.js";
import { embeddingFwdKernel, embeddingBwdKernel, embeddingBwdCsrKernel, gatherKernel, argmaxKernel, topkKernel } from "../ts/kernels/gather.js";
import { copyStridedKernel, copyStridedV128Kernel, causalMaskKernel, dropoutMaskKernel } from "../ts/kernels/copy.js";
import { adamwKernel } from "../ts/kernels/optim.js";
import { adamwDeviceKernel, dropoutMaskAtKernel } from "../ts/kernels/step.js";
import {
  ADAMW_MULTI_MAX, CAST_T_MULTI_MAX, SUMSQ_MULTI_MAX, adamwMultiKernel, castTransposeMultiKernel, sumsqMultiKernel,
} from "../ts/kernels/multi-tensor.js";
import { matmulKernel } from "../ts/kernels/matmul.js";
import { presplitKernel } from "../ts/kernels/matmul/presplit.js";
import { flashFwdKernel, flashFwdVec4Kernel, flashBwdDqVec4Kernel, flashBwdDkDvVec4Kernel, flashBwdDqKernel, flashBwdDkDvKernel } from "../ts/kernels/attention.js";

const FLOATS: Dtype[] = ["f32", "f16"];

function needs(d: Dtype): KernelVariant["needs"] {
  return d === "f16" ? ["f16"] : [];
}

/** LayerNorm backward's dx options for x of `d`: an f32 residual with the f16 copy, x's own residual, and (f32) the copy alone. */
function lnDxOptionSets(d: Dtype): LnDxOpts[] {
  return [{ res: "f32", copy16: true }, { res: d, copy16: false }, ...(d === "f32" ? [{ res: null, copy16: true }] : [])];
}

/** LayerNorm backward with an f16 g beside an f32 x (norm.ts lnGradTag): every kernel that reads g, plain and with the dx options. */
function lnF16GradVariants(): KernelVariant[] {
  const v: KernelVariant[] = [];
  const n16 = needs("f16");
  const gt = lnGradTag("f32", "f16");
  v.push({ id: `backend/layernorm_bwd_dwdb/f32${gt}`, needs: n16, build: () => layerNormBwdDwDbKernel("f32", "f32", "f16") });
  for (const [vec, tx] of [[4, 16], [1, 64]]) {
    v.push({ id: `backend/layernorm_bwd_dwdb_cols/f32${gt}_v${vec}_tx${tx}`, needs: n16, build: () => layerNormBwdColsKernel("f32", "f32", vec, tx, LN_COLS_UNROLL, "f16") });
  }
  for (const o of [LN_DX_PLAIN, ...lnDxOptionSets("f32")]) {
    const tag = `${gt}${lnDxTag(o)}`;
    v.push({ id: `backend/layernorm_bwd_dx/f32${tag}`, needs: n16, build: () => layerNormBwdDxKernel("f32", "f32", o, "f16") });
    for (const v4 of [1, 4]) for (const sg of [false, true]) {
      const n = sg ? [...n16, "subgroup" as const] : n16;
      const at = `f32_${v4}${sg ? "_sg" : ""}`;
      v.push({ id: `backend/layernorm_bwd_dx4/${at}${tag}`, needs: n, build: () => layerNormBwdDx4Kernel("f32", "f32", v4, sg, o, "f16") });
      for (const [slots, pf] of [[1, false], [4, true]] as const) {
        v.push({ id: `backend/layernorm_bwd4_dwdb/${at}_s${slots}${pf ? "_pf" : ""}${tag}`, needs: n, build: () => layerNormBwdFusedKernel("f32", "f32", "f32", v4, slots, sg, pf, o, "f16") });
      }
    }
  }
  return v;
}

/**
 * LayerNorm backward in ln4Shape's narrow rows (GPT-2's 768: 64 threads × 3 vectors; 64: 64 × 1;
 * 1028: 128 × 3): dx4 and the fused pass in 1 to 16 slots, with and without subgroups, the dx
 * options, f16 partials from one workgroup, and the trainer's f16 g beside an f32 x.
 */
function lnBwdNarrowVariants(): KernelVariant[] {
  const v: KernelVariant[] = [];
  const sgNeeds = (n: KernelVariant["needs"], sg: boolean): KernelVariant["needs"] => (sg ? [...n, "subgroup" as const] : n);
  const fused = (d: Dtype, part: Dtype, v4: number, wg: number, slots: number, sg: boolean, pf: boolean, o: LnDxOpts, g: Dtype, n: KernelVariant["needs"]) => {
    const desc = () => layerNormBwdFusedKernel(d, d, part, v4, slots, sg, pf, o, g, wg);
    v.push({ id: `backend/${desc().name}`, needs: sgNeeds(n, sg), build: desc });
  };
  const dx4 = (d: Dtype, v4: number, wg: number, sg: boolean, o: LnDxOpts, g: Dtype, n: KernelVariant["needs"]) => {
    const desc = () => layerNormBwdDx4Kernel(d, d, v4, sg, o, g, wg);
    v.push({ id: `backend/${desc().name}`, needs: sgNeeds(n, sg), build: desc });
  };
  for (const d of FLOATS) for (const sg of [false, true]) {
    for (const o of [LN_DX_PLAIN, ...lnDxOptionSets(d)]) {
      const n = needs(o.copy16 ? "f16" : d);
      dx4(d, 3, 64, sg, o, d, n);
      fused(d, "f32", 3, 64, 8, sg, true, o, d, n);
    }
    for (const [slots, pf] of [[1, true], [16, false]] as const) fused(d, "f32", 3, 64, slots, sg, pf, LN_DX_PLAIN, d, needs(d));
    fused(d, "f32", 1, 64, 16, sg, true, LN_DX_PLAIN, d, needs(d));
    fused(d, "f32", 3, 128, 4, sg, true, LN_DX_PLAIN, d, needs(d));
    dx4(d, 3, 128, sg, LN_DX_PLAIN, d, needs(d));
    if (d === "f16") fused(d, d, 3, 64, 1, sg, true, LN_DX_PLAIN, d, needs(d));
  }
  for (const o of [LN_DX_PLAIN, ...lnDxOptionSets("f32")]) for (const sg of [false, true]) {
    dx4("f32", 3, 64, sg, o, "f16", needs("f16"));
    fused("f32", "f32", 3, 64, 8, sg, true, o, "f16", needs("f16"));
  }
  return v;
}

/** Representative fused programs: every unary/binary op, broadcasting, f16 in/out. */
function fusedSamples(): KernelVariant[] {
  const fake = {} as Lease;
  const leaf = (shape: number[], dtype: Dtype): Expr => ({ k: "leaf", lease: { ...fake } as Lease, shape, dtype });
  const un = (op: string, x: Expr, params: number[] = []): Expr => ({ k: "un", op: op as never, x, params, shape: [4, 5] });
  const bin = (op: string, a: Expr, b: Expr, params: number[] = []): Expr => ({ k: "bin", op: op as never, a, b, params, shape: [4, 5] });
  const x = leaf([4, 5], "f32"), y = leaf([5], "f32"), h = leaf([4, 1], "f16");
  const unary = ["copy", "neg", "exp", "log", "sqrt", "relu", "gelu", "silu", "sigmoid", "tanh", "scale", "addScalar", "pow", "clamp", "softCap"];
  const binary = ["add", "sub", "mul", "div", "geluBwd", "reluBwd", "siluBwd", "siluMul", "clampBwd", "softCapBwd", "maskedFill"];
  let e: Expr = x;
  for (const op of unary) e = un(op, e, [0.5, 2]);
  for (const op of binary) e = bin(op, e, op === "maskedFill" ? h : y, [0.5, 2]);
  const out: KernelVariant[] = [];
  const s = leaf([1], "f32"), hf = leaf([4, 5], "f16");
  let ef: Expr = bin("mul", x, s);
  for (const op of unary) ef = un(op, ef, [0.5, 2]);
  for (const op of binary) ef = bin(op, ef, op === "maskedFill" ? hf : s, [0.5, 2]);
  for (const [id, expr, dt] of [["all_ops_f32", e, "f32"], ["all_ops_flat", ef, "f32"], ["bcast_f16_out", bin("mul", un("gelu", h), x), "f16"], ["i32_out", un("copy", x), "i32"]] as const) {
    const plan = planFused(expr, [4, 5], dt);
    const strided = plan.inputs.some((i) => i.mode === "strided");
    for (const vec4 of strided ? [false] : [false, true]) {
      out.push({
        id: `backend/fused/${id}${vec4 ? "_v4" : ""}`,
        needs: plan.inputs.some((i) => i.dtype === "f16") || dt === "f16" ? ["f16"] : [],
        build: () => generateFused({
          signature: plan.signature, inputs: plan.inputs.map((i) => ({ dtype: i.dtype, mode: i.mode })),
          rank: strided ? plan.dims.length : 0, program: plan.program, nParams: plan.params.length, outDtype: plan.outDtype, vec4,
        }),
      });
    }
  }
  // split outputs (HeliosBackend.splitOperand): bias + GELU over [4, 8] with the bias strided, and a flat copy
  const xs = leaf([4, 8], "f32"), bs = leaf([8], "f32");
  const gel: Expr = { k: "un", op: "gelu", x: { k: "bin", op: "add", a: xs, b: bs, params: [], shape: [4, 8] }, params: [], shape: [4, 8] };
  const copy: Expr = { k: "un", op: "copy", x: xs, params: [], shape: [4, 8] };
  for (const [id, expr] of [["split_gelu_bias", gel], ["split_copy", copy]] as const) {
    const plan = planFused(expr, [4, 8], "f32");
    const strided = plan.inputs.some((i) => i.mode === "strided");
    for (const split of [{ f32: false, rows: true, whole: true }, { f32: true, rows: true, whole: false }, { f32: false, rows: false, whole: true }]) {
      for (const vec4 of [false, true]) {
        const forms = `${+split.f32}${+split.rows}${+split.whole}`;
        out.push({
          id: `backend/fused/${id}_${forms}${vec4 ? "_v4" : ""}`,
          needs: ["bf16"],
          build: () => generateFused({
            signature: plan.signature,
            inputs: plan.inputs.map((i) => ({ dtype: i.dtype, mode: i.mode, ...(vec4 && i.mode === "strided" ? { inner: i.strides[i.strides.length - 1] as 0 | 1 } : {}) })),
            rank: strided ? plan.dims.length : 0, program: plan.program, nParams: plan.params.length, outDtype: plan.outDtype, vec4, split,
          }),
        });
      }
    }
  }
  return out;
}

export function backendVariants(): KernelVariant[] {
  const v: KernelVariant[] = [...fusedSamples(), ...lnF16GradVariants(), ...lnBwdNarrowVariants()];
  for (const d of FLOATS) {
    for (const fn of ["sum", "sumsq", "nonfinite", "flag"] as ReduceFn[]) {
      v.push({ id: `backend/reduce_rows/${fn}_${d}`, needs: needs(d), build: () => reduceRowsKernel(d, fn === "sum" ? d : "f32", fn) });
    }
    v.push({ id: `backend/reduce_strided/${d}`, needs: needs(d), build: () => reduceStridedKernel(d) });
    v.push({ id: `backend/reduce_strided_from_f32/${d}`, needs: needs(d), build: () => reduceStridedKernel("f32", d) });
    // column sums: the 16-byte form (8 halves / 4 words) and the scalar form at their widest and
    // narrowest workgroup shapes, f32 results (partials, sumF32) and the input's dtype; k2 folds
    // LayerNorm's two partials; LayerNorm's dw/db as a column sum
    const wide = d === "f16" ? 8 : 4;
    for (const [vec, tx] of [[wide, 16], [wide, 1], [1, d === "f16" ? 128 : 64], [1, 1]]) {
      for (const out of d === "f32" ? (["f32", "f16"] as Dtype[]) : (["f16", "f32"] as Dtype[])) {
        v.push({ id: `backend/colsum/${d}_${out}_v${vec}_tx${tx}`, needs: needs(d === "f16" || out === "f16" ? "f16" : d), build: () => colsumKernel(d, out, vec, tx) });
      }
      v.push({ id: `backend/layernorm_bwd_dwdb_cols/${d}_v${vec}_tx${tx}`, needs: needs(d), build: () => layerNormBwdColsKernel(d, "f32", vec, tx) });
      if (d === "f32") v.push({ id: `backend/colsum_k2/f32_v${vec}_tx${tx}`, needs: [], build: () => colsumKernel("f32", "f32", vec, tx, 2) });
    }
    for (const log of [false, true]) {
      v.push({ id: `backend/softmax_rows/${log ? "log_" : ""}${d}`, needs: needs(d), build: () => softmaxRowsKernel(d, log) });
      v.push({ id: `backend/softmax_strided/${log ? "log_" : ""}${d}`, needs: needs(d), build: () => softmaxStridedKernel(d, log) });
    }
    v.push({ id: `backend/layernorm_fwd/${d}`, needs: needs(d), build: () => layerNormFwdKernel(d, d) });
    for (const vpt of [1, 16]) for (const sg of [false, true]) {
      const n = sg ? [...needs(d), "subgroup" as const] : needs(d);
      const tag = `${d}_${vpt}${sg ? "_sg" : ""}`;
      v.push({ id: `backend/layernorm_fwd_cached/${tag}`, needs: n, build: () => layerNormFwdCachedKernel(d, d, vpt, sg) });
      for (const log of [false, true]) v.push({ id: `backend/softmax_rows_cached/${log ? "log_" : ""}${tag}`, needs: n, build: () => softmaxRowsCachedKernel(d, log, vpt, sg) });
    }
    for (const v4 of [1, 4]) for (const sg of [false, true]) {
      const n = sg ? [...needs(d), "subgroup" as const] : needs(d);
      const tag = `${d}_${v4}${sg ? "_sg" : ""}`;
      v.push({ id: `backend/layernorm_fwd4/${tag}`, needs: n, build: () => layerNormFwd4Kernel(d, d, v4, sg) });
      v.push({ id: `backend/layernorm_bwd_dx4/${tag}`, needs: n, build: () => layerNormBwdDx4Kernel(d, d, v4, sg) });
      // the fused dx + dw/db partials (f32, or dw/db in w's dtype from one workgroup): 1 and 4 slots, prefetch on and off
      for (const [slots, pf] of [[1, true], [4, true], [4, false]] as const) {
        v.push({ id: `backend/layernorm_bwd4_dwdb/${tag}_s${slots}${pf ? "_pf" : ""}`, needs: n, build: () => layerNormBwdFusedKernel(d, d, "f32", v4, slots, sg, pf) });
      }
      if (d === "f16") v.push({ id: `backend/layernorm_bwd4_dwdb/${tag}_s1_pf_f16`, needs: n, build: () => layerNormBwdFusedKernel(d, d, d, v4, 1, sg, true) });
      for (const log of [false, true]) v.push({ id: `backend/softmax_rows4/${log ? "log_" : ""}${tag}`, needs: n, build: () => softmaxRows4Kernel(d, log, v4, sg) });
    }
    // f32 rows written as f16 (the trainer's LayerNorm into a matmul operand)
    if (d === "f32") {
      const n = [...needs("f16"), "subgroup" as const];
      v.push({ id: "backend/layernorm_fwd/f32_out_f16", needs: needs("f16"), build: () => layerNormFwdKernel(d, d, "f16") });
      v.push({ id: "backend/layernorm_fwd_cached/f32_16_sg_out_f16", needs: n, build: () => layerNormFwdCachedKernel(d, d, 16, true, "f16") });
      v.push({ id: "backend/layernorm_fwd4/f32_4_sg_out_f16", needs: n, build: () => layerNormFwd4Kernel(d, d, 4, true, "f16") });
      // GPT-2's rows on 64 threads (ln4Shape), with and without subgroups
      for (const sg of [false, true]) {
        v.push({ id: `backend/layernorm_fwd4/f32_3_w64${sg ? "_sg" : ""}_out_f16`, needs: sg ? n : needs("f16"), build: () => layerNormFwd4Kernel(d, d, 3, sg, "f16", 64) });
      }
    }
    v.push({ id: `backend/layernorm_bwd_dx/${d}`, needs: needs(d), build: () => layerNormBwdDxKernel(d, d) });
    v.push({ id: `backend/layernorm_bwd_dwdb/${d}`, needs: needs(d), build: () => layerNormBwdDwDbKernel(d, d) });
    // layerNormBackward's dx options (norm.ts LnDxOpts: residual added in, f16 copy) in all three dx kernels
    for (const o of lnDxOptionSets(d)) {
      const nf = needs(o.copy16 ? "f16" : d);
      v.push({ id: `backend/layernorm_bwd_dx/${d}${lnDxTag(o)}`, needs: nf, build: () => layerNormBwdDxKernel(d, d, o) });
      for (const v4 of [1, 4]) for (const sg of [false, true]) {
        const n = sg ? [...nf, "subgroup" as const] : nf;
        const tag = `${d}_${v4}${sg ? "_sg" : ""}`;
        v.push({ id: `backend/layernorm_bwd_dx4/${tag}${lnDxTag(o)}`, needs: n, build: () => layerNormBwdDx4Kernel(d, d, v4, sg, o) });
        for (const [slots, pf] of [[1, false], [4, true]] as const) {
          v.push({ id: `backend/layernorm_bwd4_dwdb/${tag}_s${slots}${pf ? "_pf" : ""}${lnDxTag(o)}`, needs: n, build: () => layerNormBwdFusedKernel(d, d, "f32", v4, slots, sg, pf, o) });
        }
      }
    }
    v.push({ id: `backend/xent_rows/${d}`, needs: needs(d), build: () => xentRowsKernel(d) });
    v.push({ id: `backend/xent_bwd/${d}`, needs: needs(d), build: () => xentBwdKernel(d, "f32") });
    for (const sg of [false, true]) {
      const more = sg ? [...needs(d), "subgroup" as const] : needs(d);
      v.push({ id: `backend/xent_rows4${sg ? "_sg" : ""}/${d}`, needs: more, build: () => xentRows4Kernel(d, sg) });
      v.push({ id: `backend/xent_bwd4${sg ? "_sg" : ""}/${d}`, needs: more, build: () => xentBwd4Kernel(d, "f32", sg) });
      // crossEntropyWithGrad's pass at the workgroups xentFusedWorkgroup gives
      for (const wg of [256, 512, 1024]) v.push({ id: `backend/xent_fused${sg ? "_sg" : ""}/${d}_w${wg}`, needs: more, build: () => xentFusedKernel(d, d, wg, sg) });
      // with dlogits' split outputs (f32; HeliosBackend.crossEntropyWithGrad's splitGrad)
      if (d === "f32") {
        for (const split of [{ rows: true, whole: true }, { rows: true, whole: false }, { rows: false, whole: true }]) {
          v.push({ id: `backend/xent_fused${sg ? "_sg" : ""}/f32_w1024_split${+split.rows}${+split.whole}`, needs: [...more, "bf16"], build: () => xentFusedKernel("f32", "f32", 1024, sg, split) });
        }
      }
    }
    v.push({ id: `backend/embedding_fwd/${d}`, needs: needs(d), build: () => embeddingFwdKernel(d) });
    v.push({ id: `backend/embedding_bwd/${d}`, needs: needs(d), build: () => embeddingBwdKernel(d) });
    v.push({ id: `backend/embedding_bwd_csr/${d}`, needs: needs(d), build: () => embeddingBwdCsrKernel(d) });
    v.push({ id: `backend/gather/${d}`, needs: needs(d), build: () => gatherKernel(d) });
    v.push({ id: `backend/argmax/${d}`, needs: needs(d), build: () => argmaxKernel(d) });
    v.push({ id: `backend/topk/${d}`, needs: needs(d), build: () => topkKernel(d) });
    v.push({ id: `backend/adamw/${d}`, needs: needs(d), build: () => adamwKernel(d, d) });
    for (const tA of [false, true]) for (const tB of [false, true]) for (const tile of [64, 128] as const) {
      v.push({ id: `backend/matmul_simt${tile}/${d}_${tA ? "t" : "n"}${tB ? "t" : "n"}`, needs: needs(d), build: () => matmulKernel({ aDtype: d, bDtype: d, outDtype: d, transA: tA, transB: tB, tile }) });
    }
    // both head layouts (the rows kernels: heads side by side in [B*T, ...] rows)
    for (const D of [64, 8]) for (const softCap of [false, true]) for (const layout of ["bhtd", "rows"] as const) {
      const fv = { dtype: d, D, softCap, ...(layout === "rows" ? { layout } : {}) };
      const tag = `${d}_d${D}${softCap ? "_cap" : ""}${layout === "rows" ? "_rows" : ""}`;
      v.push({ id: `backend/flash_fwd/${tag}`, needs: needs(d), build: () => flashFwdKernel(fv) });
      v.push({ id: `backend/flash_fwd_v4/${tag}`, needs: needs(d), build: () => flashFwdVec4Kernel(fv) });
      v.push({ id: `backend/flash_bwd_dq_v4/${tag}`, needs: needs(d), build: () => flashBwdDqVec4Kernel(fv) });
      v.push({ id: `backend/flash_bwd_dkdv_v4/${tag}`, needs: needs(d), build: () => flashBwdDkDvVec4Kernel(fv) });
      v.push({ id: `backend/flash_bwd_dq/${tag}`, needs: needs(d), build: () => flashBwdDqKernel(fv) });
      v.push({ id: `backend/flash_bwd_dkdv/${tag}`, needs: needs(d), build: () => flashBwdDkDvKernel(fv) });
    }
  }
  for (const D of [16, 32, 64]) for (const softCap of [false, true]) for (const layout of ["bhtd", "rows"] as const) {
    // every tensor-core flash forward the backend can pick (HELIOS_FLASH_VARIANT), in both head layouts
    for (const c of Object.values(FLASH_FWD)) {
      if (c.name.startsWith("acc-")) {
        const name = c.build("f16", D, softCap, layout).name.replace(/^flash_fwd_cmacc_f16_/, "");
        v.push({ id: `backend/flash_fwd_cmacc/${name}`, needs: ["coopmat", "f16", "subgroup"], build: () => c.build("f16", D, softCap, layout) });
      } else if (c.name.startsWith("x3-")) {
        const name = c.build("f32", D, softCap, layout).name.replace(/^flash_fwd_cmacc_/, "");
        v.push({ id: `backend/flash_fwd_cmacc/${name}`, needs: ["coopmat", "bf16", "subgroup"], build: () => c.build("f32", D, softCap, layout) });
      }
    }
    // the f16 kernel through the shared-memory P path (where the accumulator and A layouts differ)
    const fo = { D, softCap, pShared: true, ...(layout === "rows" ? { layout } : {}) };
    v.push({ id: `backend/flash_fwd_cmacc/${flashFwdCmSlKernel(fo).name.replace(/^flash_fwd_cmacc_f16_/, "")}`, needs: ["coopmat", "f16", "subgroup"], build: () => flashFwdCmSlKernel(fo) });
  }
  // the tensor-core flash backward: dQ and every dK/dV form (attention-cm-bwd-kv.ts), f16 and the
  // split (x3) form for f32, in both head layouts, soft-capped or not, also through the
  // shared-memory P/dS path
  for (const D of [16, 32, 64]) for (const softCap of [false, true]) for (const pShared of [false, true]) for (const layout of ["bhtd", "rows"] as const) {
    const lv = layout === "rows" ? { layout } : {};
    for (const split of [false, true]) {
      const bv = { D, pShared, split, softCap, ...lv };
      const name = flashBwdDqCmKernel(bv).name.replace(/^flash_bwd_dq_cm_(f16_)?/, "");
      v.push({ id: `backend/flash_bwd_dq_cm/${name}`, needs: ["coopmat", split ? "bf16" : "f16", "subgroup"], build: () => flashBwdDqCmKernel(bv) });
    }
    for (const form of FLASH_BWD_DKDV) {
      const kv = { D, pShared, softCap, form, ...lv };
      const name = flashBwdDkDvCmKernel(kv).name.replace(/^flash_bwd_dkdv_cm_(f16_)?/, "");
      v.push({ id: `backend/flash_bwd_dkdv_cm/${name}`, needs: ["coopmat", flashBwdDkDvSplit(form) ? "bf16" : "f16", "subgroup"], build: () => flashBwdDkDvCmKernel(kv) });
    }
  }
  // the split form's operands: f32 -> bf16 [hi | lo] (ts/ops/attention.ts splitHiLo)
  for (const vec4 of [false, true]) {
    v.push({ id: `backend/attn_split_hilo${vec4 ? "_x4" : ""}`, needs: ["bf16"], build: () => presplitKernel(vec4, 1, 2) });
  }
  for (const d of ["f32", "f16", "i32"] as Dtype[]) {
    v.push({ id: `backend/copy_strided/${d}`, needs: needs(d), build: () => copyStridedKernel(d) });
    v.push({ id: `backend/copy_strided_v128/${d}`, needs: needs(d), build: () => copyStridedV128Kernel(d) });
  }
  // integer sums over a long axis (sum of i32 keeps i32)
  for (const vec of [4, 1]) v.push({ id: `backend/colsum/i32_i32_v${vec}_tx16`, needs: [], build: () => colsumKernel("i32", "i32", vec, 16) });
  v.push({ id: "backend/causal_mask", needs: [], build: causalMaskKernel });
  v.push({ id: "backend/dropout_mask", needs: [], build: dropoutMaskKernel });
  for (const d of FLOATS) v.push({ id: `backend/adamw_device/${d}`, needs: needs(d), build: () => adamwDeviceKernel(d, d) });
  v.push({ id: "backend/dropout_mask_at", needs: [], build: dropoutMaskAtKernel });
  // the multi-tensor optimizer kernels: one and the most tensors per dispatch, mixed dtypes
  const mixed: Dtype[] = ["f32", "f16", "f32"];
  for (const ds of [["f32"], Array<Dtype>(SUMSQ_MULTI_MAX).fill("f32"), mixed] as Dtype[][]) {
    v.push({ id: `backend/${sumsqMultiKernel(ds).name}`, needs: ds.includes("f16") ? ["f16"] : [], build: () => sumsqMultiKernel(ds) });
  }
  for (const hyper of ["push", "device"] as const) {
    const types = [[{ p: "f32", g: "f32" }], Array(ADAMW_MULTI_MAX).fill({ p: "f32", g: "f32" }), mixed.map((d, j) => ({ p: mixed[2 - j], g: d }))];
    for (const ts of types as { p: Dtype; g: Dtype }[][]) {
      for (const vec4 of [false, true]) {
        const name = adamwMultiKernel(ts, hyper, vec4).name;
        v.push({ id: `backend/${name}`, needs: ts.some((t) => t.p === "f16" || t.g === "f16") ? ["f16"] : [], build: () => adamwMultiKernel(ts, hyper, vec4) });
      }
    }
  }
  // the trainer's f16 weight copies (one and the most matrices per dispatch), mixed inputs, f32 copies
  for (const [ds, out] of [[["f32"], "f16"], [Array<Dtype>(CAST_T_MULTI_MAX).fill("f32"), "f16"], [mixed, "f32"]] as [Dtype[], Dtype][]) {
    const name = castTransposeMultiKernel(ds, out).name;
    v.push({ id: `backend/${name}`, needs: ds.includes("f16") || out === "f16" ? ["f16"] : [], build: () => castTransposeMultiKernel(ds, out) });
  }
  return v;
}
