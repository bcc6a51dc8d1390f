#!/usr/bin/env node
// The `helios` command (package bin). `helios bench --suite=cuda ...`; see USAGE in args.ts.
import { ArgError, parseBenchArgs, USAGE } from "./args.js";
import { CheckFailed, formatTable, runCudaSuite } from "./suite-cuda.js";
import { nativeMatmulRuntime } from "./native-runtime.js";

export async function main(argv: string[]): Promise<number> {
  const [cmd, ...rest] = argv;
  if (cmd === undefined || cmd === "--help" || cmd === "-h" || cmd === "help") {
    process.stdout.write(USAGE + "\n");
    return cmd === undefined ? 2 : 0;
  }
  if (cmd !== "bench") {
    process.stderr.write(`helios: unknown command '${cmd}'\n${USAGE}\n`);
    return 2;
  }
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

const isMain = process.argv[1] !== undefined && import.meta.url === new URL(`file://${process.argv[1]}`).href;
if (isMain || process.argv[1]?.endsWith("/helios") || process.argv[1]?.endsWith("cli.js")) {
  main(process.argv.slice(2)).then((code) => { process.exitCode = code; });
}
