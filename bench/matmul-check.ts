// The correctness sweep of every matmul variant (run on the GPU host by bench/matmul-gpu.ts, and
// on lavapipe for the SIMT variants by the tests): odd shapes, batches, transposes, epilogues.
import type { MatmulRuntime } from "../ts/kernels/matmul/device.js";
import { MatmulFixture } from "../ts/kernels/matmul/fixture.js";
import { candidateVariants, isLowPrecision, planMatmul, unsupported, type MatmulCaps } from "../ts/kernels/matmul/plan.js";
import { normalize, type MatmulProblem } from "../ts/kernels/matmul/problem.js";
import { tolerance } from "../ts/kernels/matmul/reference.js";
import { precompilePlans, runPlan } from "../ts/kernels/matmul/run.js";
import { VARIANTS, variantByName, type VariantSpec } from "../ts/kernels/matmul/variants.js";
import { F32TC_TILE } from "../lab/matmul-variants.js";

export interface CheckCase {
  name: string;
  problem: Omit<MatmulProblem, "dtype" | "accF16">;
  /** Full fp64 comparison (small) or sampled (large). */
  full: boolean;
  /** Only for stream-K twins (streamk.ts): whole tiles over more than two waves of 132 workgroups. */
  streamK?: boolean;
}

export const CHECK_CASES: CheckCase[] = [
  { name: "1x1x1", problem: { m: 1, n: 1, k: 1 }, full: true },
  { name: "17x33x65", problem: { m: 17, n: 33, k: 65 }, full: true },
  { name: "1000x1000x1000", problem: { m: 1000, n: 1000, k: 1000 }, full: false },
  { name: "128x128x128", problem: { m: 128, n: 128, k: 128 }, full: true },
  { name: "batched3_70x50x40", problem: { m: 70, n: 50, k: 40, batch: 3 }, full: true },
  { name: "broadcastB_4x33x31x29", problem: { m: 33, n: 31, k: 29, batch: 4, broadcastB: true }, full: true },
  { name: "NT_65x47x33", problem: { m: 65, n: 47, k: 33, transB: true }, full: true },
  { name: "TN_65x47x33", problem: { m: 65, n: 47, k: 33, transA: true }, full: true },
  { name: "TT_64x48x96", problem: { m: 64, n: 48, k: 96, transA: true, transB: true }, full: true },
  { name: "bias_gelu_77x129x96", problem: { m: 77, n: 129, k: 96, epilogue: { bias: true, act: "gelu" } }, full: true },
  { name: "scale_relu_res_64x64x80", problem: { m: 64, n: 64, k: 80, epilogue: { scale: 0.25, act: "relu", residual: true } }, full: true },
  { name: "bias_silu_T_40x72x2048", problem: { m: 40, n: 72, k: 2048, transA: true, epilogue: { bias: true, act: "silu" } }, full: true },
  // whole tiles for every tile up to 256x256x64: the unchecked loads and, for f32, the two-block presplit operands
  { name: "aligned_TN_batched_256x256x128", problem: { m: 256, n: 256, k: 128, batch: 2, transA: true }, full: true },
  { name: "aligned_NT_bias_256x512x256", problem: { m: 256, n: 512, k: 256, transB: true, epilogue: { bias: true } }, full: true },
  // NN on whole tiles: the parity suites' layout, where the pair forms and two-stage twins run
  { name: "aligned_NN_gelu_512x256x192", problem: { m: 512, n: 256, k: 192, epilogue: { act: "gelu" } }, full: true },
  // stream-K: two waves of data-parallel tiles, then the remaining 25 tiles of 256×256 (50 of
  // 128×256) shared out; a grid under one wave where every tile is split (96 / 48 tiles)
  { name: "streamk_bias_gelu_4352x4352x320", problem: { m: 4352, n: 4352, k: 320, epilogue: { bias: true, act: "gelu" } }, full: false, streamK: true },
  { name: "streamk_NT_batched3_res_1024x1024x512", problem: { m: 1024, n: 1024, k: 512, batch: 3, transB: true, epilogue: { residual: true } }, full: false, streamK: true },
];

/**
 * Whether case c checks v: stream-K cases are for the stream-K twins, and a twin is checked only
 * where it runs as stream-K (elsewhere it is its plain tile, checked as that).
 */
function checks(v: VariantSpec, c: CheckCase, prob: MatmulProblem, caps: MatmulCaps): boolean {
  const own = v.kind === "presplit" ? v.inner : v;
  if (own.kind !== "coop" || !own.cfg.streamK) return !c.streamK;
  try {
    return planMatmul(prob, caps, { variant: v.name }).steps.some((st) => st.desc.name.startsWith("mm_streamk_fixup"));
  } catch {
    return true;
  }
}

export interface DtypeMode {
  name: string;
  dtype: "f16" | "bf16" | "f32";
  accF16?: boolean;
}

export const DTYPE_MODES: DtypeMode[] = [
  { name: "f16", dtype: "f16" },
  { name: "bf16", dtype: "bf16" },
  { name: "f32", dtype: "f32" },
  { name: "f16acc16", dtype: "f16", accF16: true },
];

export interface CheckRow {
  variant: string;
  mode: string;
  case: string;
  relErr: number | null;
  tolerance: number;
  pass: boolean;
  skipped?: string;
  error?: string;
  ms?: number;
}

/** Every shipped base variant, split-K on one SIMT and two coopmat tiles, and the f32tc suite's lab tile. */
export function defaultCheckVariants(): VariantSpec[] {
  const extra = new Set(["simt_64x64_4x4_sk4", "cm_64x64x32_w2x2_sk4", "cm_128x128x32_w2x2_v128_s1_sk4"]);
  return [...[...VARIANTS.values()].filter((v) => v.splits === 1 || extra.has(v.name)), variantByName(F32TC_TILE)];
}

/** Variants whose kernels the check compiles together (see precompilePlans). */
const PRECOMPILE = 8;

function precompile(rt: MatmulRuntime, caps: MatmulCaps, variants: VariantSpec[], mode: DtypeMode, cases: CheckCase[]): void {
  const plans = [];
  for (const v of variants) {
    for (const c of cases) {
      const prob: MatmulProblem = { ...c.problem, dtype: mode.dtype, accF16: mode.accF16 };
      if (!checks(v, c, prob, caps) || unsupported(v, normalize(prob), caps)) continue;
      try {
        plans.push(planMatmul(prob, caps, { variant: v.name }));
      } catch {
        // reported by the check itself
      }
    }
  }
  try {
    precompilePlans(rt, plans);
  } catch {
    // a kernel that fails to compile fails its own check below
  }
}

/** Runs `variants × modes × cases`; never throws (failures are rows). */
export function checkVariants(
  rt: MatmulRuntime,
  caps: MatmulCaps,
  opts: { variants?: VariantSpec[]; modes?: DtypeMode[]; cases?: CheckCase[]; log?: (m: string) => void; budgetMs?: number } = {},
): CheckRow[] {
  const rows: CheckRow[] = [];
  const deadline = performance.now() + (opts.budgetMs ?? Infinity);
  const variants = opts.variants ?? defaultCheckVariants();
  const modes = opts.modes ?? DTYPE_MODES;
  // Order, so that a time budget cuts the least important: first, in every mode, the variants the
  // tuner or the perf suites can pick (candidates at the suite shapes, and the forced f32tc tile);
  // then the rest, mode by mode.
  const picks = (mode: DtypeMode): Set<string> => {
    const s = new Set<string>(mode.dtype === "f32" ? [F32TC_TILE] : []);
    for (const size of [2048, 4096, 8192]) {
      const np = normalize({ m: size, n: size, k: size, dtype: mode.dtype, accF16: mode.accF16 });
      for (const v of candidateVariants(np, caps)) s.add(v.name);
    }
    return s;
  };
  const passes: [DtypeMode, VariantSpec[]][] = [];
  for (const mode of modes) { const pk = picks(mode); passes.push([mode, variants.filter((v) => pk.has(v.name))]); }
  for (const mode of modes) { const pk = picks(mode); passes.push([mode, variants.filter((v) => !pk.has(v.name))]); }
  const cases = opts.cases ?? CHECK_CASES;
  for (const [mode, group] of passes) {
    if (group.length === 0) continue;
    for (const [vi, v] of group.entries()) {
      // the driver compile dominates a check (0.2-1 s per coopmat kernel): compile the next
      // PRECOMPILE variants' kernels for every case at once, on several threads
      if (vi % PRECOMPILE === 0 && performance.now() < deadline) precompile(rt, caps, group.slice(vi, vi + PRECOMPILE), mode, cases);
      for (const c of cases) {
        const prob: MatmulProblem = { ...c.problem, dtype: mode.dtype, accF16: mode.accF16 };
        if (!checks(v, c, prob, caps)) continue;
        const np = normalize(prob);
        const why = unsupported(v, np, caps);
        const tol = tolerance(np, isLowPrecision(v, np));
        if (why) {
          rows.push({ variant: v.name, mode: mode.name, case: c.name, relErr: null, tolerance: tol, pass: true, skipped: why });
          continue;
        }
        if (performance.now() > deadline) {
          rows.push({ variant: v.name, mode: mode.name, case: c.name, relErr: null, tolerance: tol, pass: true, skipped: "time budget exhausted (not run)" });
          continue;
        }
        const t0 = performance.now();
        let fx: MatmulFixture | undefined;
        try {
          const plan = planMatmul(prob, caps, { variant: v.name });
          fx = new MatmulFixture(rt, plan.problem, 17);
          fx.poisonC();
          runPlan(rt, plan, fx.buffers(plan));
          const relErr = c.full ? fx.fullError() : fx.spotError(256);
          const pass = relErr <= tol;
          rows.push({ variant: v.name, mode: mode.name, case: c.name, relErr, tolerance: tol, pass, ms: performance.now() - t0 });
          if (!pass) opts.log?.(`FAIL ${v.name} ${mode.name} ${c.name}: ${relErr}`);
        } catch (err) {
          rows.push({ variant: v.name, mode: mode.name, case: c.name, relErr: null, tolerance: tol, pass: false, error: err instanceof Error ? err.message : String(err) });
          opts.log?.(`ERROR ${v.name} ${mode.name} ${c.name}: ${err instanceof Error ? err.message : String(err)}`);
        } finally {
          fx?.destroy();
        }
      }
    }
    opts.log?.(`checked mode ${mode.name}: ${rows.filter((r) => r.mode === mode.name && !r.skipped && r.pass).length} pass, ${rows.filter((r) => r.mode === mode.name && !r.pass).length} fail`);
  }
  return rows;
}
