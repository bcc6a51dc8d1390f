// Operand splits made ahead of their products (HeliosBackend.splitOperand). An f32 product on the
// tensor cores splits each operand into bf16 hi/lo parts first (kernels/matmul/presplit.ts): a
// read and a write of the operand per product. A training step reads most f32 tensors in two
// products, in two layouts (an activation: forward as A, backward as dW's B; a gradient: dX's A
// and dW's transposed A), and many are pending elementwise results (bias + GELU) that would be
// written out only to be split. splitOperand writes the layouts asked for in one dispatch,
// straight from a pending expression when there is one (kernels/elementwise.ts), and the next
// products (or split attention) in those layouts read them instead of splitting.
//
// Two layouts cover a 2-D [R, C] tensor: "rows" (seg = C: each row [hi | lo], the split of A
// row-major and of B transposed) and "whole" (seg = R·C: [hi of all | lo of all], A transposed,
// B row-major, and the split attention kernels' q, k, v, dO). An entry is valid for one version
// of its source: the pending expression it was made from, then (once that is dispatched) the
// buffer's write count; made inside a capture, only inside that capture. Each layout is kept for
// `reads` products and released after the last, or when its source is written or freed.
import type { Engine } from "../engine.js";
import type { Lease } from "../exec/lease.js";
import type { Expr } from "../fusion/expr.js";
import { HeliosTensor } from "../tensor.js";
import type { TensorData } from "../types.js";
import { presplitName, splitJob } from "../kernels/matmul/presplit.js";
import { size } from "../shape.js";

export type SplitLayout = "rows" | "whole";

/** The layout key a product's split step would use (matmul/presplit.ts: kernel name, n, seg). */
export function splitKey(name: string, n: number, seg: number): string {
  return `${name}|${n}|${seg}`;
}

/** The key of `shape`'s split in `layout` (two blocks, as the aligned presplit plans use). */
export function splitLayoutKey(shape: readonly number[], layout: SplitLayout): string {
  const n = size(shape);
  const job = splitJob(n, layout === "rows" ? shape[shape.length - 1] : n, 1, 2);
  return splitKey(presplitName(job.vec4, 1, 2), job.push.n, job.push.seg);
}

type Version = { expr: Expr; lease?: undefined; writes?: undefined } | { expr?: undefined; lease: Lease; writes: number };

interface AheadEntry {
  key: string;
  split: HeliosTensor;
  reads: number;
  version: Version;
  /** The capture it was made in (null: outside any). */
  capture: object | null;
}

interface AheadState {
  readonly entries: WeakMap<HeliosTensor, AheadEntry[]>;
  made: number;
  reads: number;
}

const byEngine = new WeakMap<Engine, AheadState>();

function stateOf(E: Engine): AheadState {
  let st = byEngine.get(E);
  if (!st) {
    const state: AheadState = { entries: new WeakMap(), made: 0, reads: 0 };
    E.onFree((t) => {
      const list = state.entries.get(t);
      if (!list) return;
      state.entries.delete(t);
      for (const e of list) E.release(e.split);
    });
    // a pending source dispatched into its buffer keeps its splits: same values, now a buffer version
    E.onMaterialize((t, expr) => {
      for (const e of state.entries.get(t) ?? []) {
        if (e.version.expr === expr && t.lease) e.version = { lease: t.lease, writes: t.lease.writes };
      }
    });
    byEngine.set(E, (st = state));
  }
  return st;
}

function versionOf(t: HeliosTensor): Version | null {
  if (t.expr) return { expr: t.expr };
  return t.lease ? { lease: t.lease, writes: t.lease.writes } : null;
}

/**
 * What entry e of t is to a product recorded now: "use"; "keep" (made outside the open capture:
 * a replay may come after its source changed, but it serves again after the capture); or
 * "stale" (the source was written or released since, or the capture it was made in is over).
 */
function standing(E: Engine, t: HeliosTensor, e: AheadEntry): "use" | "keep" | "stale" {
  const inCapture = E.capture ?? null;
  if (e.capture === null && inCapture !== null) return "keep";
  if (e.capture !== inCapture || t.released) return "stale";
  const v = e.version;
  const current = v.expr ? t.expr === v.expr : t.lease === v.lease && v.lease.writes === v.writes;
  return current ? "use" : "stale";
}

/**
 * Splits f32 tensor `t` now in `layouts` (one dispatch) for the next `reads` products in each;
 * with `evaluate` a pending t is also written into its own buffer by that dispatch. Returns false
 * (nothing made) where it cannot: not an f32 HeliosTensor, or a size the kernel cannot index.
 */
export function splitAhead(E: Engine, op: string, t: TensorData, layouts: readonly SplitLayout[], reads: number, evaluate = false): boolean {
  if (!(t instanceof HeliosTensor) || t.dtype !== "f32" || t.released || t.shape.length === 0 || !(reads >= 1)) return false;
  // layouts already split for this version (by its producer: crossEntropyWithGrad's splitGrad) stay
  const want = { rows: layouts.includes("rows") && !hasAhead(E, t, "rows"), whole: layouts.includes("whole") && !hasAhead(E, t, "whole") };
  if (!want.rows && !want.whole) {
    if (evaluate) E.materialize(t);
    return layouts.length > 0;
  }
  const made = E.splitForms(op, t, t.shape[t.shape.length - 1], want, evaluate);
  if (!made && evaluate) E.materialize(t);
  return adoptSplits(E, t, made, reads);
}

/** Whether t has a current split made ahead in `layout`. */
function hasAhead(E: Engine, t: HeliosTensor, layout: SplitLayout): boolean {
  const key = splitLayoutKey(t.shape, layout);
  const e = byEngine.get(E)?.entries.get(t)?.find((x) => x.key === key);
  return !!e && standing(E, t, e) === "use";
}

/**
 * Keeps splits of t's current version written by another kernel (`made`: [2n] f16-typed carriers
 * in the rows / whole layouts) for the next `reads` products in each layout. Returns false (and
 * releases them) where t has no version to tie them to.
 */
export function adoptSplits(E: Engine, t: HeliosTensor, made: { rows: HeliosTensor | null; whole: HeliosTensor | null } | null, reads: number): boolean {
  const version = made && versionOf(t);
  if (!made || !version) {
    for (const s of [made?.rows, made?.whole]) if (s) E.release(s);
    return false;
  }
  const st = stateOf(E);
  let list = st.entries.get(t);
  if (!list) st.entries.set(t, (list = []));
  for (const layout of ["rows", "whole"] as const) {
    const split = made[layout];
    if (!split) continue;
    const key = splitLayoutKey(t.shape, layout);
    // a new split of the same layout replaces the old one
    const old = list.findIndex((e) => e.key === key);
    if (old >= 0) E.release(list.splice(old, 1)[0].split);
    list.push({ key, split, reads, version, capture: E.capture ?? null });
    st.made++;
  }
  return true;
}

/** A split made ahead, taken for one product: bind `split`, call `done()` once its reader is recorded. */
export interface AheadUse {
  split: HeliosTensor;
  done(): void;
}

/** The split of `t` in layout `key` made ahead for this version of t, if one is left. */
export function takeAhead(E: Engine, t: TensorData, key: string): AheadUse | null {
  if (!(t instanceof HeliosTensor)) return null;
  const st = byEngine.get(E);
  const list = st?.entries.get(t);
  if (!st || !list) return null;
  const i = list.findIndex((e) => e.key === key);
  if (i < 0) return null;
  const e = list[i];
  const s = standing(E, t, e);
  if (s === "keep") return null;
  if (s === "stale") {
    list.splice(i, 1);
    E.release(e.split);
    return null;
  }
  st.reads++;
  if (--e.reads > 0) return { split: e.split, done: () => {} };
  list.splice(i, 1);
  // released after its last reader is recorded (the runtime holds it until that reader is done)
  return { split: e.split, done: () => E.release(e.split) };
}

/** Splits made ahead, and products (or attention calls) that read one (stats). */
export function splitAheadCounts(E: Engine): { matmulSplitsAhead: number; matmulSplitAheadReads: number } {
  const st = byEngine.get(E);
  return { matmulSplitsAhead: st?.made ?? 0, matmulSplitAheadReads: st?.reads ?? 0 };
}
