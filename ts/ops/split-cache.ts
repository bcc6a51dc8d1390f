// Split copies of reused f32 matmul operands. An f32 product on the tensor cores first splits each
// operand into bf16 hi/lo parts (kernels/matmul/presplit.ts: a read and a write of the operand's
// bytes, two dispatches a product). A loop of products over one operand version — a weight in an
// inference loop, Alpha's `bench --suite=cuda` timing 40 products of the same two matrices — split
// the same values again at every product. From the second split of one version in one layout the
// split is kept, and later products in that layout read it, until the source is written (its
// lease's write count moves) or freed. A training step splits each operand version once per
// layout, so it keeps nothing but what it reuses (the LM head's weight across its row chunks).
// Never inside a capture: a replay may rewrite the source before a copy made outside it is read.
// HELIOS_MATMUL_PREPACK=off (no derived copies of reused operands) turns it off too.
import type { Engine } from "../engine.js";
import type { Lease } from "../exec/lease.js";
import { HeliosTensor } from "../tensor.js";
import type { TensorData } from "../types.js";

/**
 * Bytes of kept split copies at most, across the engine: Alpha's bench at 8192³ keeps 2 × 256 MiB.
 * Beyond it nothing more is kept (a kept copy costs its source's bytes again).
 */
export const SPLIT_CACHE_MAX_BYTES = 1 << 30;

interface SplitEntry {
  /** The split's form: kernel, element count and segment (the layout it writes). */
  key: string;
  /** The source lease and its write count this entry describes (one version of the source). */
  lease: Lease;
  writes: number;
  /** Splits of this version in this form so far. */
  splits: number;
  copy: Lease | null;
}

interface SplitCache {
  readonly entries: WeakMap<HeliosTensor, SplitEntry[]>;
  /** Every tensor holding a copy (to drop them all on purge). */
  readonly holders: Set<HeliosTensor>;
  bytes: number;
  kept: number;
  reads: number;
}

const byEngine = new WeakMap<Engine, SplitCache>();

function cacheOf(E: Engine): SplitCache {
  let c = byEngine.get(E);
  if (!c) {
    const state: SplitCache = { entries: new WeakMap(), holders: new Set(), bytes: 0, kept: 0, reads: 0 };
    // a freed source takes its copies along
    E.onFree((t) => dropAll(state, t));
    byEngine.set(E, (c = state));
  }
  return c;
}

function dropEntry(c: SplitCache, e: SplitEntry): void {
  if (!e.copy) return;
  c.bytes -= e.copy.bytes;
  e.copy.release();
  e.copy = null;
}

function dropAll(c: SplitCache, t: HeliosTensor): void {
  const list = c.entries.get(t);
  if (!list) return;
  for (const e of list) dropEntry(c, e);
  c.entries.delete(t);
  c.holders.delete(t);
}

/** One operand's split in a product: where it reads from, and what becomes of the split it writes. */
export interface SplitUse {
  /** A kept copy of this version in this form: bind it and skip the split. */
  copy: Lease | null;
  /** After recording the split into `scratch`: whether to keep it (the caller then does not release it). */
  keep(scratch: Lease): boolean;
}

const NONE: SplitUse = { copy: null, keep: () => false };

/**
 * The split of `src` (its lease `lease`) in form `key` for one product: a kept copy, or whether the
 * split about to be written should be kept.
 */
export function splitUse(E: Engine, src: TensorData, lease: Lease | null, key: string): SplitUse {
  if (E.config.matmulPrepack === "off" || E.capture || !lease || !(src instanceof HeliosTensor) || src.released || src.lease !== lease) return NONE;
  const c = cacheOf(E);
  let list = c.entries.get(src);
  if (!list) c.entries.set(src, (list = []));
  let e = list.find((x) => x.key === key);
  if (e && (e.lease !== lease || e.writes !== lease.writes)) {
    // the source was written since: its copy describes an old version
    dropEntry(c, e);
    list.splice(list.indexOf(e), 1);
    e = undefined;
  }
  if (!e) list.push((e = { key, lease, writes: lease.writes, splits: 0, copy: null }));
  if (e.copy) {
    c.reads++;
    return { copy: e.copy, keep: () => false };
  }
  const entry = e;
  entry.splits++;
  return {
    copy: null,
    keep(scratch: Lease): boolean {
      // a product reading one tensor as both operands in one form (x·xᵀ) splits it twice: keep one
      if (entry.copy || entry.splits < 2 || c.bytes + scratch.bytes > SPLIT_CACHE_MAX_BYTES) return false;
      entry.copy = scratch;
      c.bytes += scratch.bytes;
      c.kept++;
      c.holders.add(src as HeliosTensor);
      return true;
    },
  };
}

/** Releases every kept copy (HeliosBackend.purgeBufferPools: memory back before the pool's trim). */
export function dropSplitCopies(E: Engine): void {
  const c = byEngine.get(E);
  if (!c) return;
  for (const t of [...c.holders]) dropAll(c, t);
}

/** Splits kept, products that read a kept split, and the bytes kept now (stats). */
export function splitCacheCounts(E: Engine): { matmulSplitsKept: number; matmulSplitReads: number; matmulSplitBytes: number } {
  const c = byEngine.get(E);
  return { matmulSplitsKept: c?.kept ?? 0, matmulSplitReads: c?.reads ?? 0, matmulSplitBytes: c?.bytes ?? 0 };
}
