// The GPU-host matmul run (issue 5): correctness of every variant, then the CUDA parity suite for
// f16 / bf16 / f32 (+ f16 accumulation, + f32 on tensor cores), fused vs unfused bias+gelu, and
// the per-variant timings behind the tuner's choices. Everything lands as JSON under $OUT (or
// argv[2]); progress on stderr. Exit code 1 if any variant fails its correctness gate.
//   node dist/bench/matmul-gpu.js [outDir] [--phase=check|perf|fused|all] [--quick]
//     [--variants=a,b --baseline=c,d --checkBudget=SECONDS]
// --variants: the check phase gates only those (a quick case set, modes f16, f16-acc, bf16, f32, cut
// after --checkBudget seconds) and sweeps them plus --baseline (already gated; each timed row is
// still spot-checked) at 2048³/4096³/8192³ f16 and 4096³/8192³ f16 accumulation.
import { mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { parseBenchArgs } from "./args.js";
import { warmFor } from "./profiling.js";
import { CHECK_CASES, checkVariants, type CheckRow, type DtypeMode } from "./matmul-check.js";
import { runCudaSuite } from "./suite-cuda.js";
import { summarize, tflops } from "./stats.js";
import { capsOf, chooseMatmul } from "../ts/kernels/matmul/autotune.js";
import type { MatmulRuntime } from "../ts/kernels/matmul/device.js";
import { MatmulFixture } from "../ts/kernels/matmul/fixture.js";
import { planMatmul } from "../ts/kernels/matmul/plan.js";
import { decode, relFrobenius, tolerance } from "../ts/kernels/matmul/reference.js";
import { inBatch, pipelinesOf, recordPlan, runPlan, timePlan } from "../ts/kernels/matmul/run.js";
import { candidateVariants, unsupported } from "../ts/kernels/matmul/plan.js";
import { variantByName, type VariantSpec } from "../ts/kernels/matmul/variants.js";
import { normalize, type MatmulProblem } from "../ts/kernels/matmul/problem.js";
import { biasActKernel } from "./bias-act.js";
import { nativeMatmulRuntime } from "./native-runtime.js";
import { F32TC_TILE } from "../lab/matmul-variants.js";

export interface GpuRunOptions {
  outDir: string;
  /** Fewer shapes (about half the time). */
  quick?: boolean;
  /** check = correctness + variant sweep; perf = parity suites + fused; all = both. */
  /** fused: only the fused-epilogue comparison (step 4 of perf). */
  phase?: "check" | "perf" | "fused" | "all";
  /** Test mode: tiny shapes everywhere, subset of checks (for the CPU interpreter). */
  tiny?: boolean;
  checks?: Parameters<typeof checkVariants>[2];
  torch?: boolean;
  /** Gate and sweep only these variants (see the file comment). */
  variants?: string[];
  /** Swept beside `variants`, not gated. */
  baseline?: string[];
  /** Time budget of the gate (default 200 s, 100 s with `variants`). */
  checkBudgetMs?: number;
}

// The quick gate of --variants: every staging path (unaligned fallback, 128-bit with edges, 64-bit
// B, transposes, batches, epilogues, long K, whole tiles in three layouts) in nine cases.
const QUICK_CASES = CHECK_CASES.filter((c) => ["17x33x65", "1000x1000x1000", "batched3_70x50x40", "TT_64x48x96", "bias_gelu_77x129x96", "bias_silu_T_40x72x2048", "aligned_TN_batched_256x256x128", "aligned_NT_bias_256x512x256", "aligned_NN_gelu_512x256x192"].includes(c.name));

/** More than 16 f32 accumulators per subgroup spill: such tiles are f16-accumulation only. */
function fitsMode(v: VariantSpec, accF16: boolean): boolean {
  const cfg = v.kind === "presplit" ? v.inner.cfg : v.kind === "coop" ? v.cfg : undefined;
  return accF16 || !cfg || cfg.sm * cfg.sn <= 16;
}

/** The --variants gate: f16, then f16 accumulation, bf16 and f32, under one time budget. */
function gateVariants(rt: MatmulRuntime, caps: ReturnType<typeof capsOf>, names: string[], budgetMs: number, cases = QUICK_CASES): CheckRow[] {
  const deadline = performance.now() + budgetMs;
  const rows: CheckRow[] = [];
  const specs = names.map(variantByName);
  for (const mode of [{ name: "f16", dtype: "f16" }, { name: "f16acc16", dtype: "f16", accF16: true }, { name: "bf16", dtype: "bf16" }, { name: "f32", dtype: "f32" }] as DtypeMode[]) {
    const vs = specs.filter((v) => fitsMode(v, !!mode.accF16));
    rows.push(...checkVariants(rt, caps, { variants: vs, modes: [mode], cases, log, budgetMs: Math.max(0, deadline - performance.now()) }));
  }
  return rows;
}

let t0 = Date.now();
let outDir = "perf/gpu";
const log = (m: string) => process.stderr.write(`[matmul-gpu +${((Date.now() - t0) / 1000).toFixed(1)}s] ${m}\n`);
const save = (name: string, data: unknown) => writeFileSync(join(outDir, name), JSON.stringify(data, null, 1) + "\n");

/** The whole GPU-host run; returns 0 when every gate passed. */
export async function runMatmulGpu(rt: MatmulRuntime, o: GpuRunOptions): Promise<number> {
  t0 = Date.now();
  outDir = o.outDir;
  mkdirSync(outDir, { recursive: true });
  const quick = !!o.quick;
  const tiny = !!o.tiny;
  const info = rt.initDevice();
  save("device.json", info);
  log(`device ${info.deviceName}, coopmat ${info.coopMatSupported}, subgroup ${info.subgroupSize}, shared ${info.maxSharedMemoryBytes}`);
  const caps = capsOf(info);
  let failed = false;

  const phase = o.phase ?? "all";
  const summary: Record<string, unknown> = { device: info.deviceName, driver: info.driverInfo ?? info.driverVersion, phase };
  if (phase === "check" || phase === "all") {
    // 1. correctness of every variant
    // Modes in order of importance, so a slow driver compile eats into the least important last.
    const checks = o.variants
      ? gateVariants(rt, caps, o.variants, o.checkBudgetMs ?? 100_000, o.checks?.cases)
      : checkVariants(rt, caps, { log, budgetMs: tiny ? undefined : o.checkBudgetMs ?? 200_000, ...o.checks });
    save("check.json", { summary: summarizeChecks(checks), rows: checks });
    if (checks.some((r) => !r.pass)) failed = true;
    summary.checks = summarizeChecks(checks);
    log(`checks: ${JSON.stringify(summarizeChecks(checks))}`);

    // 2. per-variant timings (the evidence behind tile choices)
    try {
      const only = o.variants ? [...o.variants, ...(o.baseline ?? [])] : undefined;
      const sweep = variantSweep(rt, caps, quick, tiny, only);
      save("variant-sweep.json", sweep);
      summary.sweepBest = bestOfSweep(sweep);
    } catch (err) {
      failed = true;
      log(`variant sweep failed: ${String(err)}`);
    }
  }
  if (phase === "check") {
    save("summary.json", summary);
    log(`done in ${((Date.now() - t0) / 1000).toFixed(0)} s`);
    return failed ? 1 : 0;
  }

  // 3. parity suites
  const shapes = tiny ? "32x48x64" : quick ? "2048x2048x2048,4096x4096x4096" : "2048x2048x2048,3072x3072x3072,4096x4096x4096,8192x8192x8192";
  const suites: [string, string[]][] = [
    ["f16", ["--dtype=float16"]],
    ["bf16", ["--dtype=bfloat16"]],
    ["f32", ["--dtype=float32"]],
    ["f16acc16", ["--dtype=float16", "--accF16=true"]],
    ["f32tc", ["--dtype=float32", `--variant=${F32TC_TILE}`]],
  ];
  for (const [name, extra] of phase === "fused" ? [] : suites) {
    const so = parseBenchArgs([
      "--suite=cuda", tiny ? "--iters=2" : "--iters=40", tiny ? "--warmup=1" : "--warmup=8", `--shapes=${shapes}`, "--check=true",
      tiny ? "--checkShape=24x40x32" : "--checkShape=384x384x384", `--torch=${o.torch ?? true}`,
      `--out=${join(outDir, `suite-${name}.json`)}`, `--plot=${join(outDir, `suite-${name}.svg`)}`, ...extra,
    ]);
    try {
      const rep = await runCudaSuite(so, { runtime: rt, log });
      summary[`suite_${name}`] = rep.rows.map((r) => ({ shape: r.shape, tflops: +r.heliosTflops.toFixed(1), cudaTflops: r.cudaTflops === null ? null : +r.cudaTflops.toFixed(1), ratio: r.ratio === null ? null : +r.ratio.toFixed(3), variant: r.variant }));
      log(`suite ${name}: ${rep.rows.map((r) => `${r.shape} ${r.heliosTflops.toFixed(0)} TF (${r.variant}) ratio ${r.ratio?.toFixed(2) ?? "-"}`).join("; ")}`);
    } catch (err) {
      failed = true;
      log(`suite ${name} failed: ${err instanceof Error ? err.message : String(err)}`);
      save(`suite-${name}.error.json`, { error: String(err) });
    }
  }

  // 4. fused matmul+bias+gelu vs matmul then bias-gelu
  const fused = fusedVsUnfused(rt, quick, tiny);
  save("fused.json", fused);
  summary.fused = fused;
  save("summary.json", summary);
  log(`summary: ${JSON.stringify(summary)}`);
  log(`done in ${((Date.now() - t0) / 1000).toFixed(0)} s`);
  return failed ? 1 : 0;
}

function bestOfSweep(rows: unknown[]): Record<string, { variant: string; tflops: number }> {
  const best: Record<string, { variant: string; tflops: number }> = {};
  for (const r of rows as { problem: MatmulProblem; variant: string; tflops?: number; pass?: boolean }[]) {
    if (r.tflops === undefined || !r.pass) continue;
    const key = `${r.problem.m}x${r.problem.n}x${r.problem.k}${r.problem.accF16 ? "_acc16" : ""}`;
    if (!best[key] || best[key].tflops < r.tflops) best[key] = { variant: r.variant, tflops: +r.tflops.toFixed(1) };
  }
  return best;
}

function summarizeChecks(rows: ReturnType<typeof checkVariants>) {
  return {
    ran: rows.filter((r) => !r.skipped).length,
    skipped: rows.filter((r) => r.skipped).length,
    notRunForTime: rows.filter((r) => r.skipped?.startsWith("time budget")).length,
    failed: rows.filter((r) => !r.pass).map((r) => `${r.variant}/${r.mode}/${r.case}: ${r.error ?? r.relErr}`),
  };
}

function variantSweep(rt: MatmulRuntime, caps: ReturnType<typeof capsOf>, quick: boolean, tiny: boolean, only?: string[]) {
  const out: unknown[] = [];
  const cube = (s: number, accF16 = false): MatmulProblem => ({ m: s, n: s, k: s, dtype: "f16", accF16 });
  const probs: MatmulProblem[] = tiny ? [{ m: 32, n: 32, k: 64, dtype: "f16", accF16: !!only }] : only ? [
    cube(2048), cube(4096), cube(8192), cube(4096, true), cube(8192, true),
  ] : [
    { m: 4096, n: 4096, k: 4096, dtype: "f16" },
    { m: 4096, n: 4096, k: 4096, dtype: "f16", accF16: true },
    ...(quick ? [] : [{ m: 2048, n: 2048, k: 2048, dtype: "f16" } as MatmulProblem, { m: 4096, n: 512, k: 14336, dtype: "f16" } as MatmulProblem]),
  ];
  for (const prob of probs) {
    const np = normalize(prob);
    const cands = only
      ? only.map(variantByName).filter((v) => fitsMode(v, np.accF16) && !unsupported(v, np, caps))
      : candidateVariants(np, caps);
    if (cands.length === 0) continue;
    const fx = new MatmulFixture(rt, np, 9);
    try {
      for (const v of cands) {
        try {
          const plan = planMatmul(prob, caps, { variant: v.name });
          const bufs = fx.buffers(plan);
          fx.poisonC();
          runPlan(rt, plan, bufs);
          const relErr = fx.spotError(64);
          const s = summarize(timePlan(rt, plan, bufs, tiny ? { warmup: 0, iters: 1, repeats: 1 } : { warmup: 5, iters: 20, repeats: 3 }));
          const row = { problem: prob, variant: v.name, ms: s.ms, cv: s.cv, tflops: tflops(np.m, np.n, np.k, s.ms), relErr, pass: relErr <= tolerance(np, false) };
          out.push(row);
          log(`sweep ${np.m}x${np.n}x${np.k}${np.accF16 ? " acc16" : ""} ${v.name}: ${row.tflops.toFixed(1)} TF/s, err ${relErr.toExponential(2)}`);
        } catch (err) {
          out.push({ problem: prob, variant: v.name, error: err instanceof Error ? err.message : String(err) });
        }
      }
    } finally {
      fx.destroy();
    }
  }
  return out;
}

function fusedVsUnfused(rt: MatmulRuntime, quick: boolean, tiny: boolean) {
  const out: unknown[] = [];
  // the squares, and GPT-2 124M's MLP up-projection at B=16, T=1024 (16384×3072×768: the
  // product the fused epilogue serves in training, where K is short and the output large)
  const shapes = tiny ? [[32, 32, 32]] : quick ? [[4096, 4096, 4096]] : [[2048, 2048, 2048], [4096, 4096, 4096], [8192, 8192, 8192], [16384, 3072, 768]];
  for (const [m, n, k] of shapes) {
    const size = m === n && n === k ? m : `${m}x${n}x${k}`;
    // f16 in and out; f16 in with f32 out (Alpha's trainer: f16 operands, f32 activations, so
    // the unfused passes move twice the bytes); f32
    for (const [dtype, outDtype] of [["f16", "f16"], ["f16", "f32"], ["f32", "f32"]] as const) {
      const label = dtype === outDtype ? dtype : `${dtype}->${outDtype}`;
      const fusedProb: MatmulProblem = { m, n, k, dtype, outDtype, epilogue: { bias: true, act: "gelu" } };
      const plainProb: MatmulProblem = { m, n, k, dtype, outDtype };
      try {
        // each side as a user gets it: the tuned winner of its own shape class (HELIOS_AUTOTUNE,
        // HELIOS_MATMUL_VARIANT apply), so neither side times a tile the tuner would not pick
        // (the tiny interpreter run takes the cache or the default: tuning there times nothing real)
        const fusedChoice = chooseMatmul(rt, fusedProb, { tune: !tiny });
        const plainChoice = chooseMatmul(rt, plainProb, { tune: !tiny });
        const [fused, plain] = [fusedChoice.plan, plainChoice.plan];
        // what the tuner timed for each side (variant → ms; null: failed the gate or did not run)
        const raced = (c: typeof fusedChoice) => c.record && Object.fromEntries(c.record.candidates.map((x) => [x.variant, x.ms]));
        const fx = new MatmulFixture(rt, fused.problem, 21);
        try {
          // the two plans may need different scratch (a stream-K or split-K workspace on one side
          // only); fetched after both have grown the fixture's scratch, so neither handle is stale
          fx.buffers(fused);
          const plainBufs = fx.buffers(plain);
          const bufs = fx.buffers(fused);
          fx.poisonC();
          runPlan(rt, fused, bufs);
          const relErr = fx.spotError(64);
          // Every timing starts from ~400 ms of the same work, as the parity suites do: the fixture
          // of a new size keeps the GPU idle long enough to drop its clock, and a short warm-up
          // then times the first variant measured at a low clock (sessions 6 and 8: 4096³ fused
          // 1.0-1.3 ms against 0.49 in session 5, where a long SIMT row came just before).
          const warmMs = tiny ? 0 : 400;
          const tf = summarize(timePlan(rt, fused, bufs, { warmup: tiny ? 1 : 5, iters: tiny ? 2 : 20, repeats: tiny ? 1 : 3, warmMs }));
          // unfused: plain matmul into C, then (a) one bias+gelu kernel, (b) a bias kernel and a gelu kernel
          pipelinesOf(rt, plain);
          const n2 = m * n;
          const outBytes = n2 * (outDtype === "f32" ? 4 : 2);
          const c2 = rt.createBuffer(outBytes);
          const c3 = rt.createBuffer(outBytes);
          const push = new Uint32Array([n2, n]);
          const one = biasActKernel(outDtype, "gelu");
          const biasOnly = biasActKernel(outDtype, "none");
          const geluOnly = biasActKernel(outDtype, "gelu", false);
          const [pOne, pBias, pGelu] = [one, biasOnly, geluOnly].map((x) => rt.compileKernel(JSON.stringify(x.desc)));
          const g = one.groups(n2);
          const variants: [string, () => void, number][] = [
            ["product", () => recordPlan(rt, plain, plainBufs), plain.steps.length],
            ["oneKernel", () => { recordPlan(rt, plain, plainBufs); rt.recordDispatch(pOne, [bufs.C as number, bufs.bias as number, c2], g, push); }, plain.steps.length + 1],
            ["twoKernels", () => {
              recordPlan(rt, plain, plainBufs);
              rt.recordDispatch(pBias, [bufs.C as number, bufs.bias as number, c2], g, push);
              rt.recordDispatch(pGelu, [c2, bufs.bias as number, c3], g, push);
            }, plain.steps.length + 2],
          ];
          const unfused: Record<string, number> = {};
          for (const [name, record, per] of variants) {
            // inBatch: a record that throws still closes its batch, so the next row can begin one
            const iters = tiny ? 2 : 20;
            inBatch(rt, undefined, () => { for (let i = 0; i < (tiny ? 1 : 5); i++) record(); });
            warmFor(warmMs, () => inBatch(rt, undefined, () => { for (let i = 0; i < 5; i++) record(); }));
            const reps: number[][] = [];
            for (let r = 0; r < (tiny ? 1 : 3); r++) {
              const tl = inBatch(rt, { profile: true }, () => { for (let i = 0; i < iters; i++) record(); });
              const prof = rt.batchProfile(tl);
              if (prof.length !== iters * per) throw new Error(`batchProfile: ${prof.length} entries for ${iters * per} dispatches`);
              const ms: number[] = [];
              for (let i = 0; i < iters; i++) {
                let ns = 0;
                for (let s = 0; s < per; s++) ns += prof[i * per + s].gpuNs;
                ms.push(ns / 1e6);
              }
              reps.push(ms);
            }
            unfused[name] = summarize(reps).ms;
          }
          // the baselines compute what the fused kernel does: c3 holds gelu(C + bias) from the
          // two-kernel path; the fused plan writes C (an f16 intermediate rounds: 1e-2)
          runPlan(rt, fused, bufs);
          const fusedOut = decode(rt.readBuffer(bufs.C as number), outDtype, n2);
          const unfusedErr = relFrobenius(decode(rt.readBuffer(c3), outDtype, n2), fusedOut);
          if (!(unfusedErr <= 1e-2)) throw new Error(`unfused bias+gelu differs from the fused epilogue: relative error ${unfusedErr}`);
          rt.destroyBuffer(c2);
          rt.destroyBuffer(c3);
          const row = {
            size, dtype: label, variant: fused.variant, plainVariant: plain.variant, fusedMs: tf.ms, productMs: unfused.product,
            unfusedOneKernelMs: unfused.oneKernel, unfusedTwoKernelsMs: unfused.twoKernels,
            speedupVsOne: unfused.oneKernel / tf.ms, speedupVsTwo: unfused.twoKernels / tf.ms, fusedRelErr: relErr, unfusedVsFusedErr: unfusedErr,
            tuning: { fused: { source: fusedChoice.source, raced: raced(fusedChoice) }, plain: { source: plainChoice.source, raced: raced(plainChoice) } },
          };
          out.push(row);
          log(`fused ${typeof size === "number" ? `${size}³` : size} ${label}: fused ${tf.ms.toFixed(4)} ms (${fused.variant}), product alone ${unfused.product.toFixed(4)} ms (${plain.variant}), unfused ${unfused.oneKernel.toFixed(4)} / ${unfused.twoKernels.toFixed(4)} ms, speedup ${row.speedupVsOne.toFixed(2)}x / ${row.speedupVsTwo.toFixed(2)}x, err ${relErr.toExponential(2)}`);
        } finally {
          fx.destroy();
        }
      } catch (err) {
        out.push({ size, dtype: label, error: err instanceof Error ? err.message : String(err) });
        log(`fused ${size} ${label} failed: ${String(err)}`);
      }
    }
  }
  return out;
}

async function main(): Promise<number> {
  const args = process.argv.slice(2);
  const dir = args.find((a) => !a.startsWith("--")) ?? process.env.OUT ?? "perf/gpu";
  process.env.HELIOS_CACHE_DIR ??= join(dir, "cache");
  const phaseArg = args.find((a) => a.startsWith("--phase="))?.slice(8) ?? "all";
  if (phaseArg !== "check" && phaseArg !== "perf" && phaseArg !== "fused" && phaseArg !== "all") throw new Error(`--phase=${phaseArg}: expected check, perf, fused or all`);
  const list = (flag: string) => {
    const v = args.find((a) => a.startsWith(`--${flag}=`))?.slice(flag.length + 3);
    return v ? v.split(",").filter(Boolean).map((n) => variantByName(n).name) : undefined; // unknown names throw here
  };
  const budget = args.find((a) => a.startsWith("--checkBudget="))?.slice(14);
  if (budget !== undefined && !(Number(budget) >= 0)) throw new Error(`--checkBudget=${budget}: expected seconds`);
  // names are checked before the device starts: a typo fails at once
  const opts = {
    outDir: dir, quick: args.includes("--quick"), phase: phaseArg,
    variants: list("variants"), baseline: list("baseline"), checkBudgetMs: budget === undefined ? undefined : Number(budget) * 1000,
  } as const;
  return runMatmulGpu(await nativeMatmulRuntime(), opts);
}

const invoked = process.argv[1] ?? "";
if (invoked.endsWith("matmul-gpu.js") || invoked.endsWith("matmul-gpu.ts")) {
  main().then((code) => { process.exitCode = code; }, (err) => {
    process.stderr.write(`matmul-gpu: ${err instanceof Error ? err.stack : String(err)}\n`);
    process.exitCode = 1;
  });
}
