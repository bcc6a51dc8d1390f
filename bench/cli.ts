#!/usr/bin/env node
// The `helios` command (package bin). `helios bench --suite=cuda ...` (matmul parity with
// cuBLAS), `helios bench --suite=train ...` (GPT-2 training against PyTorch; see USAGE in
// args.ts) and `helios warmup ...` (bakes the caches for a model: train/warmup.ts). `main` is callable as a function so Alpha's CLI can delegate to it.
import { ArgError, parseBenchArgs, USAGE } from "./args.js";
import { parseTrainSuiteArgs, trainSuiteCommand } from "./train/suite.js";
import { takeGpus } from "../train/dist.js";
import { CheckFailed, formatTable, runCudaSuite } from "./suite-cuda.js";
import { nativeMatmulRuntime } from "./native-runtime.js";
import { parseWarmupArgs, runWarmup, WARMUP_USAGE } from "../train/warmup.js";
import { launch, LaunchArgError, LAUNCH_USAGE, parseLaunchArgs } from "../ts/distributed/launch.js";

export async function main(argv: string[]): Promise<number> {
  const [cmd, ...rest] = argv;
  if (cmd === undefined || cmd === "--help" || cmd === "-h" || cmd === "help") {
    process.stdout.write(`${USAGE}\n${WARMUP_USAGE}\n${LAUNCH_USAGE}\n`);
    return cmd === undefined ? 2 : 0;
  }
  if (cmd === "warmup") return warmup(rest);
  if (cmd === "launch") return launchCmd(rest);
  if (cmd !== "bench") {
    process.stderr.write(`helios: unknown command '${cmd}'\n${USAGE}\n${WARMUP_USAGE}\n`);
    return 2;
  }
  const suite = suiteOf(rest);
  if (suite === "train") return trainSuite(rest.filter((a, i) => !isSuiteArg(rest, i)));
  let opts;
  try {
    opts = parseBenchArgs(rest);
  } catch (err) {
    if (err instanceof ArgError) {
      process.stderr.write(`helios bench: ${err.message}\n${USAGE}\n`);
      return 2;
    }
    throw err;
  }
  try {
    const report = await runCudaSuite(opts, { runtime: await nativeMatmulRuntime() });
    process.stdout.write(formatTable(report.rows) + "\n");
    if (report.meta.note) process.stdout.write(`note: ${report.meta.note}\n`);
    if (opts.out) process.stdout.write(`wrote ${opts.out}\n`);
    return 0;
  } catch (err) {
    if (err instanceof CheckFailed) {
      process.stderr.write(`helios bench: ${err.message}\n`);
      return 1;
    }
    const detail = err instanceof Error ? (process.env.HELIOS_DEBUG ? err.stack ?? err.message : err.message) : String(err);
    process.stderr.write(`helios bench: ${detail}\n`);
    return 1;
  }
}

/** The value of --suite (`--suite=x` or `--suite x`), or undefined. */
function suiteOf(args: string[]): string | undefined {
  for (let i = 0; i < args.length; i++) {
    if (args[i].startsWith("--suite=")) return args[i].slice(8);
    if (args[i] === "--suite") return args[i + 1];
  }
  return undefined;
}

/** Whether args[i] is part of the --suite option (its `--suite=x`, or `--suite` and its value). */
function isSuiteArg(args: string[], i: number): boolean {
  return args[i].startsWith("--suite=") || args[i] === "--suite" || (i > 0 && args[i - 1] === "--suite");
}

/** `helios bench --suite=train [...]`: bench/train/suite.ts; 1 when the parity check failed. */
async function trainSuite(args: string[]): Promise<number> {
  try {
    parseTrainSuiteArgs(takeGpus(args).rest);
  } catch (err) {
    process.stderr.write(`helios bench --suite=train: ${(err as Error).message}\n${USAGE}\n`);
    return 2;
  }
  try {
    return await trainSuiteCommand(args);
  } catch (err) {
    process.stderr.write(`helios bench --suite=train: ${err instanceof Error ? err.message : String(err)}\n`);
    return 1;
  }
}

/** `helios launch --gpus=N <script> [args]`: ts/distributed/launch.ts; 2 on a bad option. */
async function launchCmd(args: string[]): Promise<number> {
  try {
    return await launch(parseLaunchArgs(args));
  } catch (err) {
    if (err instanceof LaunchArgError) {
      process.stderr.write(`helios launch: ${err.message}\n${LAUNCH_USAGE}\n`);
      return 2;
    }
    throw err;
  }
}

/** `helios warmup [...]`: train/warmup.ts; 2 on a bad option, 1 when the run failed. */
function warmup(args: string[]): number {
  let o;
  try {
    o = parseWarmupArgs(args);
  } catch (err) {
    process.stderr.write(`helios warmup: ${(err as Error).message}\n${WARMUP_USAGE}\n`);
    return 2;
  }
  try {
    runWarmup({ ...o, log: (s) => process.stdout.write(s + "\n") });
    return 0;
  } catch (err) {
    const detail = err instanceof Error ? (process.env.HELIOS_DEBUG ? err.stack ?? err.message : err.message) : String(err);
    process.stderr.write(`helios warmup: ${detail}\n`);
    return 1;
  }
}

const isMain = process.argv[1] !== undefined && import.meta.url === new URL(`file://${process.argv[1]}`).href;
if (isMain || process.argv[1]?.endsWith("/helios") || process.argv[1]?.endsWith("cli.js")) {
  main(process.argv.slice(2)).then((code) => { process.exitCode = code; });
}
