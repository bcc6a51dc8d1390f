// Writes the kernel description (the JSON handed to the native compiler) of every shipped kernel
// variant, keyed by variant and problem, so a refactor of the kernel tables or generators can be
// shown to leave what ships byte-identical: run it before and after and compare the files.
//   node dist/__test__/support/dump-shipped-kernels.js <out.json>
// Shipped matmul variants are found, not listed: every variant the tuner races (candidateVariants)
// or the planner defaults to (defaultVariant) over a sweep of problems, devices and plan options,
// plus the winners in the shipped tuning data. Each is then planned over a fixed set of problems
// (every dtype mode, layout, epilogue, aligned and edge shapes, the plan options' A/B paths) and
// every step's description recorded. Flash attention: the kernels `auto` picks (FLASH_AUTO) and the
// backward kernels the backend runs (tensor-core dQ split and not, every dK/dV form; the SIMT
// kernels), in the [BH, T, D] layout and (keys ending |rows) the rows layout of the trainer's fused
// head layout.
// Each description is recorded as its name and the SHA-256 of its JSON. Run with no HELIOS_MATMUL_*
// variable set (the planner reads them once) and a large heap (--max-old-space-size=12000: the
// planner memoizes every description).
import { createHash } from "node:crypto";
import { readFileSync, writeFileSync } from "node:fs";
import { candidateVariants, defaultVariant, planMatmul, unsupported, type MatmulCaps, type PlanOptions } from "../../ts/kernels/matmul/plan.js";
import { normalize, type MatmulProblem } from "../../ts/kernels/matmul/problem.js";
import { VARIANTS } from "../../ts/kernels/matmul/variants.js";
import { FLASH_AUTO, FLASH_FWD } from "../../ts/kernels/attention-variants.js";
import { flashBwdDqCmKernel } from "../../ts/kernels/attention-cm-bwd.js";
import { FLASH_BWD_DKDV, flashBwdDkDvCmKernel } from "../../ts/kernels/attention-cm-bwd-kv.js";
import { flashBwdDkDvKernel, flashBwdDkDvVec4Kernel, flashBwdDqKernel, flashBwdDqVec4Kernel } from "../../ts/kernels/attention.js";
import type { Dtype } from "../../ts/types.js";
import type { KernelDesc } from "../../ts/ir/index.js";

const out = process.argv[2] ?? "/tmp/shipped-kernels.json";

const BASE: MatmulCaps = { coopMatSupported: true, coopMat2Supported: true, bf16Supported: true, f16Supported: true, subgroupSize: 32, maxSharedMemoryBytes: 49152, computeUnits: 132 };
/** Devices for the search of shipped variants: an H100/H200, fewer SMs, less or more shared memory, no bf16, no f16 accumulators, no tensor cores. */
const SEARCH_CAPS: Record<string, MatmulCaps> = {
  h100: BASE,
  sm66: { ...BASE, computeUnits: 66 },
  sm8: { ...BASE, computeUnits: 8 },
  shm32k: { ...BASE, maxSharedMemoryBytes: 32768 },
  shm64k: { ...BASE, maxSharedMemoryBytes: 65536 },
  nobf16: { ...BASE, bf16Supported: false },
  acc32only: { ...BASE, coopMatShapes: ["f16", "bf16"].map((t) => ({ m: 16, n: 16, k: 16, a: t, b: t, c: "f32", result: "f32" })) },
  simt: { ...BASE, coopMatSupported: false, coopMat2Supported: false },
};

type Mode = Pick<MatmulProblem, "dtype" | "outDtype" | "accF16">;
const MODES: Mode[] = [
  { dtype: "f16" }, { dtype: "f16", accF16: true }, { dtype: "f16", outDtype: "f32" },
  { dtype: "bf16" }, { dtype: "bf16", outDtype: "f32" }, { dtype: "f32" },
];
const LAYOUTS = [[false, false], [false, true], [true, false], [true, true]] as const;

function searchShipped(): Set<string> {
  const names = new Set<string>();
  const sizes = [17, 128, 384, 1024, 2048, 3072, 4096, 8192];
  const ks = [64, 768, 3072, 16384];
  // options only take candidates away; they change what the default picks
  const defaultOpts: PlanOptions[] = [{}, { presplit: false }, { streamK: false }];
  for (const caps of Object.values(SEARCH_CAPS)) {
    for (const mode of MODES) {
      for (const [transA, transB] of LAYOUTS) {
        for (const m of sizes) for (const n of sizes) for (const k of ks) {
          for (const epilogue of [undefined, { bias: true, act: "gelu" as const }]) {
            for (const batch of [1, 4]) {
              const p = normalize({ m, n, k, batch, transA, transB, epilogue, ...mode });
              for (const opts of defaultOpts) {
                try {
                  names.add(defaultVariant(p, caps, opts).name);
                } catch {
                  // bf16 without bf16 tensor cores: no default
                }
              }
              for (const v of candidateVariants(p, caps)) names.add(v.name);
            }
          }
        }
      }
    }
  }
  return names;
}

/** Problems each shipped matmul variant is planned over. */
function dumpProblems(): MatmulProblem[] {
  // whole tiles; edges with odd sizes; N % 4 but not % 8; a partial last wave (stream-K); batches
  const shapes: Omit<MatmulProblem, "dtype">[] = [
    { m: 1024, n: 1024, k: 1024 },
    { m: 17, n: 33, k: 65 },
    { m: 130, n: 260, k: 72 },
    { m: 3072, n: 3072, k: 3072 },
    { m: 512, n: 256, k: 192, batch: 3, broadcastB: true },
  ];
  const epi = { bias: true, act: "gelu" as const, residual: true, scale: 0.5 };
  const out: MatmulProblem[] = [];
  for (const mode of MODES) for (const [transA, transB] of LAYOUTS) {
    for (const s of shapes) out.push({ ...s, transA, transB, ...mode });
    for (const s of shapes.slice(0, 2)) out.push({ ...s, transA, transB, epilogue: epi, ...mode });
  }
  return out;
}

const hash = (s: string) => createHash("sha256").update(s).digest("hex");
/** A description is recorded as its name and the SHA-256 of its JSON (the whole set is gigabytes). */
const described = (ds: KernelDesc[]) => ds.map((d) => `${d.name} ${hash(JSON.stringify(d))}`).join("\n");

function dumpMatmul(names: string[], entries: Record<string, string>): number {
  const optsList: [string, PlanOptions][] = [
    ["", {}], ["coopmat", { outStore: "coopmat" }], ["staged4", { outStore: "staged4" }], ["unaligned", { aligned: false }],
    ["onestage", { twoStage: false }], ["nostk", { streamK: false }],
  ];
  const capsList: [string, MatmulCaps][] = [["h100", BASE], ["acc32only", SEARCH_CAPS.acc32only]];
  let n = 0;
  for (const name of names) {
    const v = VARIANTS.get(name);
    if (!v) throw new Error(`shipped variant ${name} is not in VARIANTS`);
    for (const [cn, caps] of capsList) {
      for (const [i, problem] of dumpProblems().entries()) {
        if (unsupported(v, normalize(problem), caps)) continue;
        for (const [on, opts] of optsList) {
          // the A/B options on the first caps only, whole and edge tiles without epilogue
          if (on && (cn !== "h100" || i % 7 > 1)) continue;
          const key = `mm|${name}|${cn}|p${i}|${on}`;
          try {
            const plan = planMatmul(problem, caps, { ...opts, variant: name });
            entries[key] = plan.steps.map((s) => `${s.desc.name} ${hash(JSON.stringify(s.desc))}`).join("\n");
          } catch (err) {
            entries[key] = `error: ${(err as Error).message}`;
          }
          n++;
        }
      }
    }
  }
  return n;
}

function dumpFlash(entries: Record<string, string>): void {
  const dev = { coopMatSupported: true, subgroupSize: 32, maxSharedMemoryBytes: 49152 };
  const auto = new Set<string>(FLASH_AUTO);
  for (const layout of ["bhtd", "rows"] as const) {
    const key = layout === "rows" ? "|rows" : "";
    const lv = layout === "rows" ? { layout } : {};
    for (const name of auto) {
      const c = FLASH_FWD[name as keyof typeof FLASH_FWD];
      for (const dtype of ["f16", "f32"] as Dtype[]) for (const D of [8, 16, 24, 32, 48, 64, 128]) for (const softCap of [false, true]) {
        if (!c.applies(dev, dtype, 1024, D) && name !== "simt") continue;
        entries[`fwd|${name}|${dtype}|d${D}|${softCap}${key}`] = described([layout === "rows" ? c.build(dtype, D, softCap, layout) : c.build(dtype, D, softCap)]);
      }
    }
    for (const split of [false, true]) for (const D of [16, 32, 48, 64]) for (const softCap of [false, true]) {
      const v = { D, split, softCap, ...lv };
      entries[`bwd|cm|${split}|d${D}|${softCap}${key}`] = described([flashBwdDqCmKernel(v)]);
    }
    for (const form of FLASH_BWD_DKDV) for (const D of [16, 32, 48, 64]) for (const softCap of [false, true]) {
      entries[`bwd|cm-dkdv|${form}|d${D}|${softCap}${key}`] = described([flashBwdDkDvCmKernel({ D, form, softCap, ...lv })]);
    }
    for (const dtype of ["f16", "f32"] as Dtype[]) for (const D of [8, 24, 32, 64, 128]) for (const softCap of [false, true]) {
      const v = { dtype, D, softCap, ...lv };
      const k = [flashBwdDqKernel(v), flashBwdDkDvKernel(v), ...(D % 4 === 0 ? [flashBwdDqVec4Kernel(v), flashBwdDkDvVec4Kernel(v)] : [])];
      entries[`bwd|simt|${dtype}|d${D}|${softCap}${key}`] = described(k);
    }
  }
}

const t0 = performance.now();
const found = searchShipped();
const tuning = JSON.parse(readFileSync(new URL("../../../data/matmul-tuning.json", import.meta.url), "utf8")) as { entries: Record<string, { variant: string }> };
const winners = new Set(Object.values(tuning.entries).map((e) => e.variant));
const notFound = [...winners].filter((w) => !found.has(w));
const names = [...new Set([...found, ...winners])].sort();
const entries: Record<string, string> = {};
const plans = dumpMatmul(names, entries);
dumpFlash(entries);
const descs = Object.values(entries).flatMap((e) => e.split("\n"));
writeFileSync(out, JSON.stringify({ matmulVariants: names, winnersNotRaced: notFound, entries }, null, 1));
const summary = {
  matmulVariants: names.length,
  matmulBases: new Set(names.map((n) => VARIANTS.get(n)!.base)).size,
  winners: winners.size,
  winnersNotRaced: notFound,
  matmulPlans: plans,
  flashFwdKernels: FLASH_AUTO.length,
  entries: Object.keys(entries).length,
  uniqueDescs: new Set(descs).size,
  digest: hash(JSON.stringify(entries)).slice(0, 16),
  seconds: +((performance.now() - t0) / 1000).toFixed(1),
};
process.stdout.write(`${JSON.stringify(summary)}\n`);
