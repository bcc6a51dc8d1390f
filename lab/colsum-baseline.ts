// The column sums as they ran before ts/kernels/colsum.ts (issue 27), kept for bench/colsum.ts's
// A/B only: nothing under ts/ imports this module. Delete it once the new kernels' GPU timings are
// recorded in bench/RESULTS.md.
//
// reduce_cols_part: bindings x (read), part (write, f32). Push {lines, dim, inner, chunk, chunks}.
//   Grid [ceil(lines/WG), chunks]: one thread per output line and chunk of the reduced axis, scalar
//   loads; reduce_strided over [outer, chunks, inner] (one thread per line) folds the partials.
// layernorm_bwd_dwdb_part: bindings x, g, stats (read), pw, pb (write, f32 [chunks, dim]). Push
//   {rows, dim, chunk}. Grid [ceil(dim/WG), chunks]: one thread per column and chunk of rows; each
//   of pw, pb is then folded by the two-pass strided sum above.
import { f32, kernel, min, type KernelDesc } from "../ts/ir/index.js";
import type { Dtype } from "../ts/types.js";
import { WG, storageOf, toF32, type PushSpec } from "../ts/kernels/common.js";
import { REDUCE_STRIDED_PUSH, reduceStridedKernel } from "../ts/kernels/reduce.js";

export const REDUCE_COLS_PART_PUSH = { lines: "u32", dim: "u32", inner: "u32", chunk: "u32", chunks: "u32" } as const;

export function reduceColsPartKernel(dtype: Dtype): KernelDesc {
  const k = kernel(`reduce_cols_part_${dtype}`, { workgroup: [WG] });
  const x = k.buffer("x", storageOf(dtype), "read");
  const part = k.buffer("part", f32, "write");
  const pc = k.push(REDUCE_COLS_PART_PUSH);
  const i = k.let(k.globalId.x, "i");
  k.if(i.ge(pc.lines), () => k.return());
  const c = k.let(k.workgroupId.y, "c");
  const o = k.let(i.div(pc.inner), "o");
  const ii = k.let(i.rem(pc.inner), "ii");
  const base = k.let(o.mul(pc.dim).mul(pc.inner).add(ii), "base");
  const j0 = k.let(c.mul(pc.chunk), "j0");
  const acc = k.var(f32, 0, "acc");
  k.for(j0, min(pc.dim, j0.add(pc.chunk)), (j) => {
    acc.set(acc.get().add(toF32(x.load(base.add(j.mul(pc.inner))))));
  });
  part.store(o.mul(pc.chunks).add(c).mul(pc.inner).add(ii), acc.get());
  return k.finish();
}

export const LN_DWDB_PART_PUSH = { rows: "u32", dim: "u32", chunk: "u32" } as const;

export function layerNormBwdDwDbPartKernel(dtype: Dtype): KernelDesc {
  const k = kernel(`layernorm_bwd_dwdb_part_${dtype}`, { workgroup: [WG] });
  const x = k.buffer("x", storageOf(dtype), "read");
  const g = k.buffer("g", storageOf(dtype), "read");
  const stats = k.buffer("stats", f32, "read");
  const pw = k.buffer("pw", f32, "write");
  const pb = k.buffer("pb", f32, "write");
  const pc = k.push(LN_DWDB_PART_PUSH);
  const j = k.let(k.globalId.x, "j");
  k.if(j.ge(pc.dim), () => k.return());
  const c = k.let(k.workgroupId.y, "c");
  const r0 = k.let(c.mul(pc.chunk), "r0");
  const aw = k.var(f32, 0, "aw");
  const ab = k.var(f32, 0, "ab");
  k.for(r0, min(pc.rows, r0.add(pc.chunk)), (r) => {
    const idx = k.let(r.mul(pc.dim).add(j), "idx");
    const gv = k.let(toF32(g.load(idx)), "gv");
    const xh = toF32(x.load(idx)).sub(stats.load(r.mul(2))).mul(stats.load(r.mul(2).add(1)));
    aw.set(aw.get().add(gv.mul(xh)));
    ab.set(ab.get().add(gv));
  });
  const o = k.let(c.mul(pc.dim).add(j), "o");
  pw.store(o, aw.get());
  pb.store(o, ab.get());
  return k.finish();
}

/** One dispatch of a baseline or new pass: buffers by role name, in binding order. */
export interface Launch {
  desc: KernelDesc;
  spec: PushSpec;
  push: Record<string, number>;
  groups: [number, number, number];
  bufs: string[];
}

/** A scratch buffer a launch list needs: role name and f32 elements. */
export interface Scratch { name: string; elems: number }

const grid1d = (n: number): [number, number, number] => [Math.ceil(n / WG), 1, 1];

/** The old two-pass strided sum of `src` ([outer, dim, inner], FEW_LINES/SPLIT_DIM split path) into `out`. */
export function baselineStridedSum(dtype: Dtype, outDtype: Dtype, outer: number, dim: number, inner: number, src: string, out: string, tag: string): { launches: Launch[]; scratch: Scratch[] } {
  const lines = outer * inner;
  if (lines >= 16384 || dim < 64) {
    return { scratch: [], launches: [{ desc: reduceStridedKernel(dtype, outDtype), spec: REDUCE_STRIDED_PUSH, push: { outer, dim, inner, scale: 1 }, groups: grid1d(lines), bufs: [src, out] }] };
  }
  const chunks = Math.min(256, Math.ceil(dim / 32), Math.max(1, Math.floor(65536 / Math.ceil(lines / WG))));
  const chunk = Math.ceil(dim / chunks);
  const used = Math.ceil(dim / chunk);
  const part = `part_${tag}`;
  return {
    scratch: [{ name: part, elems: outer * used * inner }],
    launches: [
      { desc: reduceColsPartKernel(dtype), spec: REDUCE_COLS_PART_PUSH, push: { lines, dim, inner, chunk, chunks: used }, groups: [Math.ceil(lines / WG), used, 1], bufs: [src, part] },
      { desc: reduceStridedKernel("f32", outDtype), spec: REDUCE_STRIDED_PUSH, push: { outer, dim: used, inner, scale: 1 }, groups: grid1d(lines), bufs: [part, out] },
    ],
  };
}

/** The old LayerNorm dw/db for `rows` >= 64: dwdb_part, then the strided sum of each partial. */
export function baselineLayerNormDwDb(dtype: Dtype, wDtype: Dtype, rows: number, dim: number): { launches: Launch[]; scratch: Scratch[] } {
  const colGroups = Math.ceil(dim / WG);
  const chunks = Math.min(256, Math.ceil(rows / 32), Math.max(1, Math.floor(65536 / colGroups)));
  const chunk = Math.ceil(rows / chunks);
  const used = Math.ceil(rows / chunk);
  const w = baselineStridedSum("f32", wDtype, 1, used, dim, "pw", "dw", "w");
  const b = baselineStridedSum("f32", wDtype, 1, used, dim, "pb", "db", "b");
  return {
    scratch: [{ name: "pw", elems: used * dim }, { name: "pb", elems: used * dim }, ...w.scratch, ...b.scratch],
    launches: [
      { desc: layerNormBwdDwDbPartKernel(dtype), spec: LN_DWDB_PART_PUSH, push: { rows, dim, chunk }, groups: [colGroups, used, 1], bufs: ["x", "g", "stats", "pw", "pb"] },
      ...w.launches, ...b.launches,
    ],
  };
}
