// bench/kernel-stats: what the driver made of each kernel — register count, spills, shared
// memory, as reported by VK_KHR_pipeline_executable_properties (NVIDIA reports these). Evidence
// for tile and occupancy choices (issue 5): a kernel that spills or needs 255 registers cannot
// keep enough warps resident, whatever its tile says.
//
//   HELIOS_PIPELINE_STATS=1 node dist/bench/kernel-stats.js [--match=REGEX] [--out=perf/kernel-stats.json]
import { createRequire } from "node:module";
import { mkdirSync, writeFileSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import { allKernelVariants, type KernelNeed } from "../lab/registry.js";
import { spillOf } from "./pipeline-stats.js";

const require = createRequire(import.meta.url);
const root = resolve(new URL(".", import.meta.url).pathname, "..", "..");
// eslint-disable-next-line @typescript-eslint/no-explicit-any
const native: any = require(join(root, "native", "index.cjs"));

const args = new Map(process.argv.slice(2).map((a) => a.replace(/^--/, "").split("=") as [string, string]));
// Default: the f16 matmul tiles (f32 and f16 accumulation), coopmat2, bf16x3 f32, flash
// attention, the row kernels and a vec4 fused elementwise kernel.
const DEFAULT_MATCH = String.raw`^(mm_cm_f16_acc32_f32_\w+_NN_v44|mm_cm_f16_acc16_f16_\w+_NN_v44_relu|mm_cm2_f16_acc32_f32_\w+_NN|mm_cm_f32bf16x3_\w+_NN_v44|mm_simt_f32_f32_\w+_NN\w*|backend/flash_\w+/(f16_)?d64|backend/(softmax_rows4|layernorm_fwd4)/f32_\w+|backend/fused/all_ops_flat_v4)$`;
const match = new RegExp(args.get("match") ?? DEFAULT_MATCH);
const outPath = args.get("out") ?? "perf/kernel-stats.json";

process.env.HELIOS_PIPELINE_STATS ??= "1";
const info = native.initDevice({});
const has: Record<KernelNeed, boolean> = {
  f16: !!info.f16Supported,
  bf16: !!info.bf16Supported,
  coopmat: !!info.coopMatSupported,
  coopmat2: !!info.coopMat2Supported,
  subgroup: true,
  atomicFloat: true,
};

interface Row { id: string; stats: Record<string, number>; error?: string }
const rows: Row[] = [];
for (const v of allKernelVariants()) {
  if (!match.test(v.id) || !v.needs.every((n) => has[n])) continue;
  try {
    const pipeline = native.compileKernel(JSON.stringify(v.build()));
    const stats: Record<string, number> = {};
    for (const s of native.pipelineStatistics(pipeline) as { name: string; value: number }[]) stats[s.name] = s.value;
    rows.push({ id: v.id, stats });
  } catch (e) {
    rows.push({ id: v.id, stats: {}, error: (e as Error).message.slice(0, 200) });
  }
}

mkdirSync(dirname(outPath), { recursive: true });
writeFileSync(outPath, JSON.stringify({ device: info.deviceName, driver: info.driverVersion, rows }, null, 1));
// The columns NVIDIA reports vary by driver: print every statistic whose name mentions registers,
// spills, stack, shared memory or occupancy-related limits, and "spill" = the sum of those named
// spill or stack. Not NVIDIA's "Local Memory Size": it is no spill count (2^36 for every dK/dV
// kernel of the H200 race in session 21, whose Stack Size was 0); the JSON keeps it.
const keyOf = (n: string) => /regist|spill|shared|stack|thread|binary/i.test(n);
const names = [...new Set(rows.flatMap((r) => Object.keys(r.stats).filter(keyOf)))];
console.log(`device: ${info.deviceName}, ${rows.length} kernels matching ${match}`);
console.log(["kernel", "spill", ...names].join(" | "));
for (const r of rows) console.log([r.id, r.error ? "" : String(spillOf(r.stats)), ...names.map((n) => String(r.stats[n] ?? "")), r.error ?? ""].join(" | "));
native.destroy();
