// Column sums over a long reduced axis: out[o, i] = scale * sum_j x[o, j, i] for x [outer, dim, inner]
// (bias gradients: sum over axis 0 of [rows, n]; LayerNorm's dw/db, ts/kernels/norm.ts).
//
// colsum_<in>_<out>_v<V>_tx<TX>[_k2]: bindings x0 [, x1] (read), out0 [, out1] (write): K = 1 or 2
//   independent sums in one dispatch (k2 folds LayerNorm's dw and db partials together). Push
//   COLSUM_PUSH {dim, inner, chunk, chunks, scale}. Dispatch planColumns(...).groups =
//   [colBlocks, chunks, outer], COLS_WG threads.
// Workgroup (bx, c, o): TX column threads x RY = COLS_WG / TX row lanes. Thread (tx, ry) owns the V
//   adjacent columns of vector v = bx*TX + tx (V = 16 bytes of elements where inner % V == 0, so
//   every row's vectors are 16-byte aligned; else V = 1) and the rows j0 + ry, j0 + ry + RY, ... <
//   min(dim, j0 + chunk), j0 = c*chunk. A block's row segment is TX*V elements, at most
//   segmentBytes (256: two 128-byte lines; f16 [rows, 768]: TX = 16, RY = 16), so a warp reads whole
//   lines of 32/TX rows. COLS_UNROLL rows (LN_COLS_UNROLL in norm.ts) are loaded before they are
//   added (clamped rows, masked after), so each thread keeps several 16-byte loads in flight. The RY lanes' sums then meet in shared memory: a tree fold, lane r += lane
//   r + s for s = RY/2 .. 1, every thread taking a share of each step.
//   Writes out[(o*chunks + c)*inner + i] = scale * sum (f32 partials with scale 1 when chunks > 1;
//   a second colsum with one chunk folds them). Chunks (planColumns): about targetGroups workgroups
//   in all, at most maxChunks, each lane at least minLaneRows rows; one chunk for short axes.
// Numerics: f32 accumulation in a fixed order — a lane's rows in sequence, the lane tree, then the
//   chunk partials the same way — fixed by the plan (shape and dtype), so two runs agree bit for
//   bit; no atomics.
import { f32, kernel, lit, min, select, unpackHalves, type Buffer, type Expr, type KernelBuilder, type KernelDesc } from "../ir/index.js";
import type { Dtype } from "../types.js";
import { HeliosSizeError } from "../shape.js";
import { MAX_GROUPS, fromF32, storageBytes, storageOf, toF32, uvar } from "./common.js";

export const COLS_WG = 256;

export const COLSUM_PUSH = { dim: "u32", inner: "u32", chunk: "u32", chunks: "u32", scale: "f32" } as const;

/** The plan's knobs; the defaults ship, bench/colsum.ts sweeps them. */
export interface ColumnTuning {
  /** Workgroups a split first pass aims for. */
  targetGroups: number;
  /** Most chunk partials (rows of the second pass). */
  maxChunks: number;
  /** Fewest rows a row lane sums per chunk. */
  minLaneRows: number;
  /** Widest row segment of one workgroup, in bytes. */
  segmentBytes: number;
}

/**
 * 4 workgroups per SM of a 132-SM H100/H200 and 256-byte row segments (two lines): on the H200 the
 * best of targets 264-2112 and segments 128-512 for GPT-2's bias gradients (f16 [16384, 768 | 2304 |
 * 3072]) and LayerNorm dw/db (bench/colsum.ts, bench/RESULTS.md).
 */
export const COLUMN_TUNING: ColumnTuning = { targetGroups: 4 * 132, maxChunks: 64, minLaneRows: 4, segmentBytes: 256 };

/** Rows a thread loads before adding them. */
export const COLS_UNROLL = 4;

export interface ColumnPlan {
  /** Elements per thread and row (a 16-byte vector, or 1). */
  vec: number;
  /** Column threads per workgroup (a power of two); COLS_WG / tx row lanes. */
  tx: number;
  /** Chunks of the reduced axis (1: the pass writes the result). */
  chunks: number;
  /** Rows per chunk. */
  chunk: number;
  groups: [number, number, number];
}

const pow2ceil = (n: number) => 2 ** Math.ceil(Math.log2(Math.max(1, n)));

/**
 * The shape of a column sum of `dtype` data [outer, dim, inner]: vector width, workgroup shape and
 * chunking. chunks = min(ceil(targetGroups / (colBlocks * outer)), maxChunks, floor(dim / (RY *
 * minLaneRows))), at least 1. Plain arithmetic throughout (sizes may exceed 2^32 before the u32
 * push-constant check).
 */
export function planColumns(dtype: Dtype, outer: number, dim: number, inner: number, tune: Partial<ColumnTuning> = {}): ColumnPlan {
  const t = { ...COLUMN_TUNING, ...tune };
  const bytes = storageBytes(dtype);
  const wide = 16 / bytes;
  const vec = inner % wide === 0 ? wide : 1;
  const vectors = inner / vec;
  const tx = Math.max(1, Math.min(pow2ceil(vectors), Math.floor(t.segmentBytes / (vec * bytes)), COLS_WG));
  const ry = COLS_WG / tx;
  const colBlocks = Math.ceil(vectors / tx);
  if (colBlocks > MAX_GROUPS || outer > MAX_GROUPS) {
    throw new HeliosSizeError("columnSum", `[${outer}, ${dim}, ${inner}] needs ${colBlocks} x ${outer} workgroups, over the grid's ${MAX_GROUPS} per dimension`);
  }
  const want = Math.ceil(t.targetGroups / (colBlocks * outer));
  const most = Math.min(t.maxChunks, Math.floor(dim / (ry * t.minLaneRows)), MAX_GROUPS);
  const chunk = Math.ceil(dim / Math.max(1, Math.min(want, most)));
  const chunks = Math.ceil(dim / chunk);
  return { vec, tx, chunks, chunk, groups: [colBlocks, chunks, outer] };
}

/** A row's values for each of the K sums: K arrays of V f32 values of vector `v` (clamped in range). */
export type RowLoader = (row: Expr, v: Expr) => Expr[][];

export interface ColumnSumsOpts {
  vec: number;
  tx: number;
  k: number;
  outs: Buffer[];
  outDtype: Dtype;
  push: { dim: Expr; inner: Expr; chunk: Expr; chunks: Expr; scale: Expr };
  unroll?: number;
}

/**
 * The shared body of the column-sum kernels (colsum here, layernorm_bwd_dwdb_cols in norm.ts):
 * the row walk, the lane fold and the stores described in this file's header. `load` reads one row
 * of the thread's vector for every sum; `o` is workgroup_id.z.
 */
export function columnSums(kb: KernelBuilder, o: ColumnSumsOpts, load: RowLoader): void {
  const { vec: V, tx: TX, k: K, push: pc } = o;
  const U = o.unroll ?? COLS_UNROLL;
  const RY = COLS_WG / TX;
  const C = TX * V;
  if (!Number.isInteger(RY) || C > COLS_WG || (V & (V - 1)) !== 0) throw new Error(`helios: internal error: column sums with tx ${TX}, vec ${V}`);
  const sh = kb.shared("colsum", f32, K * V * COLS_WG);
  const t = kb.let(kb.localIndex, "t");
  const tx = kb.let(t.band(TX - 1), "tx");
  const ry = kb.let(t.shr(Math.log2(TX)), "ry");
  const wg = kb.workgroupId;
  const c = kb.let(wg.y, "c");
  const nv = kb.let(V === 1 ? pc.inner : pc.inner.shr(Math.log2(V)), "nv");
  const colBase = kb.let(wg.x.mul(TX), "cb");
  // threads past the last vector load the last one (never stored): every thread reaches the barriers
  const v = kb.let(min(colBase.add(tx), nv.sub(1)), "v");
  const j0 = kb.let(c.mul(pc.chunk), "j0");
  const jEnd = kb.let(min(pc.dim, j0.add(pc.chunk)), "jend");
  const last = kb.let(jEnd.sub(1), "jlast");
  const acc = Array.from({ length: K * V }, () => uvar(kb, "f32", 0, "acc"));
  kb.for(j0.add(ry), jEnd, (q) => {
    const rows = Array.from({ length: U }, (_, u) => (u === 0 ? q : kb.let(q.add(u * RY), "r")));
    const vals = rows.map((r, u) => load(u === 0 ? r : min(r, last), v));
    rows.forEach((r, u) => {
      const ok = u === 0 ? null : kb.let(r.lt(jEnd), "ok");
      vals[u].forEach((sum, s) => sum.forEach((x, e) => {
        const a = acc[s * V + e];
        a.set(a.get().add(ok ? select(ok, x, lit(f32, 0)) : x));
      }));
    });
  }, { step: RY * U });
  acc.forEach((a, p) => sh.store(t.add(p * COLS_WG), a.get()));
  kb.barrier();
  for (let s = RY / 2; s >= 1; s /= 2) {
    const span = s * TX;
    const total = K * V * span;
    for (let m = 0; m * COLS_WG < total; m++) {
      const step = () => {
        const it = m === 0 ? t : kb.let(t.add(m * COLS_WG), "it");
        const at = kb.let(it.shr(Math.log2(span)).mul(COLS_WG).add(it.band(span - 1)), "at");
        sh.store(at, sh.load(at).add(sh.load(at.add(span))));
      };
      if (total - m * COLS_WG < COLS_WG) kb.if(t.lt(total - m * COLS_WG), step);
      else step();
    }
    kb.barrier();
  }
  // thread t < TX*V stores column colBase*V + t of each sum: consecutive threads, consecutive columns
  const col = kb.let(colBase.mul(V).add(t), "col");
  kb.if(t.lt(C).and(col.lt(pc.inner)), () => {
    const from = kb.let(t.band(V - 1).mul(COLS_WG).add(t.shr(Math.log2(V))), "from");
    const dst = kb.let(wg.z.mul(pc.chunks).add(c).mul(pc.inner).add(col), "dst");
    o.outs.forEach((out, s) => out.store(dst, fromF32(sh.load(from.add(s * V * COLS_WG)).mul(pc.scale), o.outDtype)));
  });
}

/**
 * Vector `idx` (V elements, V = 1, 4 or 8 as planned) of `x` as V f32 values; the load is bound once.
 * 16-bit data takes V = 8 (16 bytes) where its own plan says so, or V = 4 (8 bytes) beside 32-bit
 * data planned at 4 (layernorm_bwd_dwdb_cols' f16 g with an f32 x).
 */
export function loadVector(kb: KernelBuilder, x: Buffer, dtype: Dtype, V: number, idx: Expr): Expr[] {
  if (V === 1) return [kb.let(toF32(x.load(idx)), "xv")];
  if (storageBytes(dtype) === 2 && V !== 4) {
    if (V !== 8) throw new Error(`helios: internal error: ${V}-wide 16-bit column loads`);
    const words = kb.let(x.as("u32", 4).load(idx), "xw");
    return unpackHalves(words).flatMap((h) => {
      const p = kb.let(h.cast("f32x2"), "xh");
      return [p.x, p.y];
    });
  }
  if (V !== 4) throw new Error(`helios: internal error: ${V}-wide 32-bit column loads`);
  const q = kb.let(x.as(storageOf(dtype), 4).load(idx).cast("f32x4"), "xq");
  return [q.x, q.y, q.z, q.w];
}

/** colsum: K (1 or 2) column sums of `inDtype` data [outer, dim, inner] (header). */
export function colsumKernel(inDtype: Dtype, outDtype: Dtype, vec: number, tx: number, k: 1 | 2 = 1, unroll = COLS_UNROLL): KernelDesc {
  const name = `colsum_${inDtype}_${outDtype}_v${vec}_tx${tx}${k === 2 ? "_k2" : ""}${unroll === COLS_UNROLL ? "" : `_u${unroll}`}`;
  const kb = kernel(name, { workgroup: [COLS_WG] });
  const xs = Array.from({ length: k }, (_, s) => kb.buffer(`x${s}`, storageOf(inDtype), "read"));
  const outs = Array.from({ length: k }, (_, s) => kb.buffer(`out${s}`, storageOf(outDtype), "write"));
  const pc = kb.push(COLSUM_PUSH);
  const o = kb.let(kb.workgroupId.z, "o");
  const nv = kb.let(vec === 1 ? pc.inner : pc.inner.shr(Math.log2(vec)), "nvl");
  // vector index of (o, row, v): ((o*dim + row) * inner) / vec + v
  const rowBase = (row: Expr) => o.mul(pc.dim).add(row).mul(nv);
  columnSums(kb, { vec, tx, k, outs, outDtype, push: pc, unroll }, (row, v) => {
    const idx = kb.let(rowBase(row).add(v), "xi");
    return xs.map((x) => loadVector(kb, x, inDtype, vec, idx));
  });
  return kb.finish();
}
