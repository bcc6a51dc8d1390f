// Tuning data shipped in the package (data/matmul-tuning.json): the winners the tuner found on the
// GPUs Helios is measured on, so a fresh machine with one of them runs tuned plans from its first
// step. chooseMatmul reads it when the tuning cache has no entry for a shape class. Entries are
// keyed like the cache (tuneKey) except that the driver version is reduced to its family (the
// leading number: NVIDIA's branch, Mesa's major), since a fleet's patch releases differ and a
// winner does not change with them. bench/tuning-export.ts refreshes the file from a cache file.
import { readFileSync } from "node:fs";

export const SHIPPED_VERSION = 1;

/** A shape class's tuning result, as the tuning cache keeps it (autotune.ts) and this data serves it. */
export interface TuneRecord {
  variant: string;
  ms: number;
  tunedShape: string;
  at: string;
  candidates: { variant: string; ms: number | null; relErr: number | null; error?: string }[];
}

/** One shipped winner: the cache record without its candidate list, plus the driver it came from. */
export interface ShippedEntry {
  variant: string;
  ms: number;
  tunedShape: string;
  at: string;
  driver: string;
}

export interface ShippedData {
  version: typeof SHIPPED_VERSION;
  entries: Record<string, ShippedEntry>;
}

/** A driver version's family: its leading number ("570.124.6.0" → "570"), else the whole string. */
export function driverFamily(driver: string): string {
  return /^\d+/.exec(driver.trim())?.[0] ?? driver.trim();
}

/**
 * The shipped key of a cache key (`device|driver|dtypes|class`: see tuneKey). Parsed from the
 * right, so a device name holding a `|` still parses; null for a key of another form.
 */
export function shippedKey(cacheKey: string): string | null {
  const parts = cacheKey.split("|");
  if (parts.length < 4) return null;
  const [driver, dt, cls] = parts.slice(-3);
  return [parts.slice(0, -3).join("|"), driverFamily(driver), dt, cls].join("|");
}

/** The driver part of a cache key (see shippedKey). */
function driverOf(cacheKey: string): string {
  return cacheKey.split("|").slice(-3)[0];
}

const loaded = new Map<string, ShippedData>();

/**
 * The shipped data at `file`, read once per process. A missing file is empty data (a trimmed
 * install); a malformed one too, with one warning, so a bad data file never stops a product.
 */
export function loadShipped(file: string): ShippedData {
  let d = loaded.get(file);
  if (d) return d;
  d = { version: SHIPPED_VERSION, entries: {} };
  try {
    d = parseShipped(readFileSync(file, "utf8"), file);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== "ENOENT") process.emitWarning(`helios: shipped matmul tuning data ignored: ${(err as Error).message}`);
  }
  loaded.set(file, d);
  return d;
}

/** Forgets files read by loadShipped (tests that rewrite a file). */
export function forgetShipped(): void {
  loaded.clear();
}

/** Parses shipped data; throws ERR_HELIOS_INVALID_ARGUMENT naming the file and what is wrong. */
export function parseShipped(text: string, file: string): ShippedData {
  const j = JSON.parse(text) as Partial<ShippedData>;
  const bad = (why: string) => Object.assign(new Error(`${file}: ${why}`), { code: "ERR_HELIOS_INVALID_ARGUMENT" });
  if (!j || typeof j !== "object" || j.version !== SHIPPED_VERSION) throw bad(`expected version ${SHIPPED_VERSION}, got ${JSON.stringify(j?.version)}`);
  if (!j.entries || typeof j.entries !== "object") throw bad("no entries object");
  for (const [k, e] of Object.entries(j.entries)) {
    if (typeof e?.variant !== "string" || typeof e.ms !== "number" || typeof e.tunedShape !== "string") throw bad(`entry ${k} lacks variant, ms or tunedShape`);
  }
  return { version: SHIPPED_VERSION, entries: j.entries };
}

/** The shipped record for a cache key, as a TuneRecord (no candidate list), or undefined. */
export function shippedRecord(file: string, cacheKey: string): TuneRecord | undefined {
  const k = shippedKey(cacheKey);
  const e = k === null ? undefined : loadShipped(file).entries[k];
  return e && { variant: e.variant, ms: e.ms, tunedShape: e.tunedShape, at: e.at, candidates: [] };
}

/**
 * `shipped` with the winners of a tuning cache file merged in: a class absent from `shipped` is
 * added; one present is replaced when the cache's record is newer (the latest tuning of a device
 * and driver family wins). Records without a winner are skipped.
 */
export function mergeShipped(shipped: ShippedData, cache: Record<string, TuneRecord>): { data: ShippedData; added: number; replaced: number } {
  const entries = { ...shipped.entries };
  let added = 0, replaced = 0;
  for (const [cacheKey, r] of Object.entries(cache)) {
    const k = shippedKey(cacheKey);
    if (k === null || typeof r?.variant !== "string" || typeof r.ms !== "number") continue;
    const old = entries[k];
    if (old && !(String(r.at) > String(old.at))) continue;
    entries[k] = { variant: r.variant, ms: r.ms, tunedShape: r.tunedShape, at: r.at, driver: driverOf(cacheKey) };
    if (old) replaced++;
    else added++;
  }
  const sorted = Object.fromEntries(Object.entries(entries).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)));
  return { data: { version: SHIPPED_VERSION, entries: sorted }, added, replaced };
}
