// Refreshes the package's shipped matmul tuning data from tuning cache files:
//   node dist/bench/tuning-export.js CACHE.json [CACHE2.json ...] [--out=data/matmul-tuning.json]
// Each cache's winners are merged in under their device, driver family and shape class
// (ts/kernels/matmul/shipped.ts: a new class is added, a known one replaced by a newer tuning).
// On the GPU host the cache is $HELIOS_CACHE_DIR/matmul-tune-v1.json after `helios warmup` or a
// tuned run; commit the updated data file.
import { readFileSync, writeFileSync } from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { mergeShipped, parseShipped, SHIPPED_VERSION, type ShippedData } from "../ts/kernels/matmul/shipped.js";
import type { TuneRecord } from "../ts/kernels/matmul/autotune.js";

export const DEFAULT_OUT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..", "..", "data", "matmul-tuning.json");

export interface ExportResult {
  out: string;
  added: number;
  replaced: number;
  entries: number;
}

/** Merges `caches` (tuning cache files) into the shipped data file `out` (created if absent). */
export function exportTuning(caches: string[], out = DEFAULT_OUT): ExportResult {
  if (caches.length === 0) throw new Error("tuning-export: name at least one tuning cache file (matmul-tune-v1.json)");
  let data: ShippedData = { version: SHIPPED_VERSION, entries: {} };
  try {
    data = parseShipped(readFileSync(out, "utf8"), out);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== "ENOENT") throw err;
  }
  let added = 0, replaced = 0;
  for (const file of caches) {
    const cache = JSON.parse(readFileSync(file, "utf8")) as Record<string, TuneRecord>;
    if (!cache || typeof cache !== "object" || Array.isArray(cache)) throw new Error(`tuning-export: ${file} is not a tuning cache (an object of records)`);
    const r = mergeShipped(data, cache);
    data = r.data;
    added += r.added;
    replaced += r.replaced;
  }
  writeFileSync(out, JSON.stringify(data, null, 1) + "\n");
  return { out, added, replaced, entries: Object.keys(data.entries).length };
}

function main(argv: string[]): number {
  const out = argv.find((a) => a.startsWith("--out="))?.slice(6);
  const files = argv.filter((a) => !a.startsWith("--"));
  const unknown = argv.filter((a) => a.startsWith("--") && !a.startsWith("--out="));
  if (unknown.length > 0 || files.length === 0) {
    process.stderr.write(`usage: node dist/bench/tuning-export.js CACHE.json [CACHE2.json ...] [--out=${path.relative(process.cwd(), DEFAULT_OUT)}]\n`);
    return 2;
  }
  try {
    const r = exportTuning(files, out ? path.resolve(out) : DEFAULT_OUT);
    process.stdout.write(`${r.out}: ${r.added} added, ${r.replaced} replaced, ${r.entries} entries\n`);
    return 0;
  } catch (err) {
    process.stderr.write(`${(err as Error).message}\n`);
    return 1;
  }
}

if (process.argv[1] && import.meta.url === new URL(`file://${path.resolve(process.argv[1])}`).href) process.exitCode = main(process.argv.slice(2));
