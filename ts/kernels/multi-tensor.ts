// Multi-tensor kernels: one dispatch covers a group of tensors, each bound as its own buffer
// (Helios kernels bind whole buffers at offset 0), so an optimizer step over a model's ~150
// parameter tensors takes a few dispatches instead of one or two per tensor. A group's tensors
// own consecutive ranges of workgroups, in order; a workgroup finds its tensor by comparing its
// index with the running sum of the tensors' workgroup counts (from the element counts in the
// push constants), so the branch is uniform per workgroup and only one tensor's body runs. Each
// body is a loop bounded by the tensor's end: a CPU implementation that runs every branch under
// an execution mask (lavapipe) then pays one masked iteration per other tensor of the group, not
// a whole body, which is also why a workgroup takes a long block.
// Group sizes are bounded by the runtime's 32 bindings per dispatch (MAX_BINDINGS, the
// VK_KHR_push_descriptor minimum) and the 128 push-constant bytes Vulkan guarantees.
//
// sumsq_multi: bindings x0..x{G-1} (read, any float dtype), out (write f32). Push {rows, len,
//   outBase, n0..n{G-1}}. Tensor j is cut into ceil(n_j / len) rows; one ROW_WG workgroup per
//   row writes out[outBase + r] = sum(x^2) over its row, r counting the rows of x0, then x1, ...
//   The same rows, per-thread order and reduction as reduce_rows sumsq (kernels/reduce.ts) with outBase
//   advancing tensor by tensor, so the partials are bit-identical to one reduce_rows per tensor.
//   Dispatch gridRows(rows), rows = sum_j ceil(n_j / len).
// adamw_multi: bindings p_j (readwrite), g_j (read), m_j, v_j (readwrite f32) for each tensor,
//   then (device form) hyper (read f32 [5] = [lr, bc1, bc2, gradScale, skip]). Push {blocks,
//   beta1, beta2, eps, [lr, bc1, bc2, gradScale: host form], n_j, wd_j per tensor}. In place,
//   with adamw's order of operations (kernels/optim.ts adamwElement: the same roundings as
//   adamw and adamw_device); the device form returns at once when skip != 0 (the non-finite
//   guard). Tensor j owns ceil(n_j / ADAMW_BLOCK) workgroups of WG threads, each thread every
//   WG-th element of the workgroup's block (up to 16). Dispatch gridRows(blocks), blocks = sum of those.
//   The vec4 form (name tag _v4; for groups whose n_j all divide by 4): the same bindings, push
//   constants, blocks and dispatch; each thread takes every WG-th quad of 4 consecutive elements
//   of its block (up to 4: consecutive threads, consecutive quads), loading p, g, m and v with one
//   16-byte load each (8-byte for f16) and storing p, m and v as vectors. Each component goes
//   through adamwElement as a scalar, so p, m and v equal the scalar form's bit for bit.
// cast_transpose_multi: bindings x0..x{G-1} (read, any float dtype), then c0..c{G-1} and
//   t0..t{G-1} (write, the target dtype). Push {blocks, r0, k0, ..., r{G-1}, k{G-1}}: x_j is
//   [r_j, k_j] row-major; c_j = x_j in the target dtype, t_j [k_j, r_j] its transpose. Each
//   element's f32 value is converted by `cast` (OpFConvert: round to nearest even for f16), the
//   instruction of castDtype's fused kernel, for c_j and again, from the same f32 value, for t_j:
//   c_j and t_j equal castDtype(x_j) and transpose(castDtype(x_j)) bit for bit (the transpose
//   copies raw bits; converting one value twice gives the same bits). Tensor j is cut into CT x CT
//   tiles (row-major over the tile grid); it owns ceil(tiles_j / CAST_T_TILES) workgroups of WG =
//   CT x 8 threads, each CAST_T_TILES consecutive tiles. A tile is read row-coalesced (each thread
//   CT / 8 rows of one column), its c_j rows written in place and its f32 values staged in shared
//   memory (rows padded to CT + 1: the column reads hit distinct banks), then written to t_j
//   row-coalesced after a barrier. Dispatch gridRows(blocks), blocks = sum of those.
import { f32, kernel, lit, min, u32, vec, vecOf, type Buffer, type Expr, type KernelBuilder, type KernelDesc } from "../ir/index.js";
import type { Dtype } from "../types.js";
import { ROW_WG, WG, fromF32, rowIndex, storageOf, toF32, wgReduce, type PushSpec } from "./common.js";
import { adamwElement, type AdamwScalars } from "./optim.js";

/** Tensors per sumsq_multi dispatch: 3 + G push words <= 32 (128 bytes); G + 1 bindings. */
export const SUMSQ_MULTI_MAX = 29;
/** Tensors per adamw_multi dispatch: 4 bindings each (+ hyper) within 32. */
export const ADAMW_MULTI_MAX = 7;
/** Elements per adamw_multi workgroup (16 per thread; 4 quads in the vec4 form). */
export const ADAMW_BLOCK = 16 * WG;
/** Tensors per cast_transpose_multi dispatch: 3 bindings each within 32; 1 + 2G push words. */
export const CAST_T_MULTI_MAX = 10;
/** cast_transpose_multi's tile edge and tiles per workgroup. */
export const CAST_T_TILE = 32;
export const CAST_T_TILES = 4;

export function sumsqMultiPush(count: number): PushSpec {
  const spec: PushSpec = { rows: "u32", len: "u32", outBase: "u32" };
  for (let j = 0; j < count; j++) spec[`n${j}`] = "u32";
  return spec;
}

/** Where tensor j's workgroups start and end: running sums of ceil(n_j / per) over the group. */
function ranges(k: KernelBuilder, counts: Expr[], per: Expr): { start: Expr; end: Expr }[] {
  let start: Expr = lit(u32, 0);
  return counts.map((n) => {
    const end = k.let(start.add(n.add(per.sub(1)).div(per)), "end");
    const r = { start, end };
    start = end;
    return r;
  });
}

function dtypeTag(ds: Dtype[]): string {
  return ds.every((d) => d === ds[0]) ? ds[0] : "mixed";
}

export function sumsqMultiKernel(dtypes: Dtype[]): KernelDesc {
  const G = dtypes.length;
  if (G < 1 || G > SUMSQ_MULTI_MAX) throw new Error(`helios: internal error: sumsq_multi over ${G} tensors`);
  const k = kernel(`sumsq_multi${G}_${dtypeTag(dtypes)}`, { workgroup: [ROW_WG] });
  const xs = dtypes.map((d, j) => k.buffer(`x${j}`, storageOf(d), "read"));
  const out = k.buffer("out", f32, "write");
  const pc = k.push(sumsqMultiPush(G));
  const sh = k.shared("partial", f32, ROW_WG);
  const row = rowIndex(k, pc.rows);
  const t = k.let(k.localIndex, "t");
  const acc = k.var(f32, 0, "acc");
  const n = xs.map((_, j) => pc[`n${j}`]);
  ranges(k, n, pc.len).forEach(({ start, end }, j) => {
    k.if(row.ge(start).and(row.lt(end)), () => {
      const first = k.let(row.sub(start).mul(pc.len), "first");
      k.for(first.add(t), min(n[j], first.add(pc.len)), (idx) => {
        const x = k.let(toF32(xs[j].load(idx)), "x");
        acc.set(acc.get().add(x.mul(x)));
      }, { step: ROW_WG });
    });
  });
  const total = wgReduce(k, sh, t, acc.get(), (a, b) => a.add(b));
  k.if(t.eq(0), () => out.store(pc.outBase.add(row), total));
  return k.finish();
}

export type HyperSource = "push" | "device";

export function adamwMultiPush(count: number, hyper: HyperSource): PushSpec {
  const spec: PushSpec = { blocks: "u32", beta1: "f32", beta2: "f32", eps: "f32" };
  if (hyper === "push") Object.assign(spec, { lr: "f32", bc1: "f32", bc2: "f32", gradScale: "f32" });
  for (let j = 0; j < count; j++) {
    spec[`n${j}`] = "u32";
    spec[`wd${j}`] = "f32";
  }
  return spec;
}

/**
 * `types[j]`: tensor j's parameter and gradient dtypes (m and v are f32). `vec4`: the quad form,
 * for groups whose element counts all divide by 4 (the caller checks).
 */
export function adamwMultiKernel(types: { p: Dtype; g: Dtype }[], hyper: HyperSource, vec4 = false): KernelDesc {
  const G = types.length;
  if (G < 1 || G > ADAMW_MULTI_MAX) throw new Error(`helios: internal error: adamw_multi over ${G} tensors`);
  const tag = `${dtypeTag(types.map((t) => t.p))}_${dtypeTag(types.map((t) => t.g))}`;
  const k = kernel(`adamw_multi${G}${hyper === "device" ? "_device" : ""}${vec4 ? "_v4" : ""}_${tag}`, { workgroup: [WG] });
  const bufs = types.map((t, j) => ({
    p: k.buffer(`p${j}`, storageOf(t.p), "readwrite"),
    g: k.buffer(`g${j}`, storageOf(t.g), "read"),
    m: k.buffer(`m${j}`, f32, "readwrite"),
    v: k.buffer(`v${j}`, f32, "readwrite"),
  }));
  const hb = hyper === "device" ? k.buffer("hyper", f32, "read") : null;
  const pc = k.push(adamwMultiPush(G, hyper));
  const w = rowIndex(k, pc.blocks);
  let lr = pc.lr, bc1 = pc.bc1, bc2 = pc.bc2, gradScale = pc.gradScale;
  if (hb) {
    const skip = k.let(hb.load(lit(u32, 4)), "skip");
    k.if(skip.ne(0), () => k.return());
    lr = k.let(hb.load(lit(u32, 0)), "lr");
    bc1 = k.let(hb.load(lit(u32, 1)), "bc1");
    bc2 = k.let(hb.load(lit(u32, 2)), "bc2");
    gradScale = k.let(hb.load(lit(u32, 3)), "gscale");
  }
  const t = k.let(k.localIndex, "t");
  const n = types.map((_, j) => pc[`n${j}`]);
  // per block: ADAMW_BLOCK elements, or ADAMW_BLOCK / 4 quads
  const per = vec4 ? ADAMW_BLOCK / 4 : ADAMW_BLOCK;
  ranges(k, n, lit(u32, ADAMW_BLOCK)).forEach(({ start, end }, j) => {
    const b = bufs[j];
    const s = { lr, beta1: pc.beta1, beta2: pc.beta2, eps: pc.eps, wd: pc[`wd${j}`], bc1, bc2 };
    k.if(w.ge(start).and(w.lt(end)), () => {
      const first = k.let(w.sub(start).mul(per), "first");
      const stop = k.let(min(vec4 ? n[j].div(4) : n[j], first.add(per)), "stop");
      k.for(first.add(t), stop, (i) => {
        if (vec4) adamwQuad(k, s, b, types[j].p, i, gradScale);
        else {
          const r = adamwElement(k, s, {
            p: () => b.p.load(i), g: () => b.g.load(i), m: () => b.m.load(i), v: () => b.v.load(i), gradScale: () => gradScale,
          });
          b.p.store(i, fromF32(r.p, types[j].p));
          b.m.store(i, r.m);
          b.v.store(i, r.v);
        }
      }, { step: WG });
    });
  });
  return k.finish();
}

/** Elements 4q .. 4q + 3 of one tensor: vector loads and stores around four scalar updates. */
function adamwQuad(
  k: KernelBuilder, s: AdamwScalars, b: Record<"p" | "g" | "m" | "v", Buffer>, pDtype: Dtype, q: Expr, gradScale: Expr,
): void {
  const p = k.let(b.p.loadVec(q, 4), "p4"), g = k.let(b.g.loadVec(q, 4), "g4");
  const m = k.let(b.m.loadVec(q, 4), "m4"), v = k.let(b.v.loadVec(q, 4), "v4");
  const r = ["x", "y", "z", "w"].map((c) => adamwElement(k, s, {
    p: () => p.swz(c), g: () => g.swz(c), m: () => m.swz(c), v: () => v.swz(c), gradScale: () => gradScale,
  }));
  const pt = storageOf(pDtype);
  b.p.as(pt, 4).store(q, vecOf(vec(pt, 4), ...r.map((x) => fromF32(x.p, pDtype))));
  b.m.as(f32, 4).store(q, vecOf("f32x4", ...r.map((x) => x.m)));
  b.v.as(f32, 4).store(q, vecOf("f32x4", ...r.map((x) => x.v)));
}

export function castTransposeMultiPush(count: number): PushSpec {
  const spec: PushSpec = { blocks: "u32" };
  for (let j = 0; j < count; j++) {
    spec[`r${j}`] = "u32";
    spec[`k${j}`] = "u32";
  }
  return spec;
}

/** `dtypes[j]`: tensor j's dtype; `out`: the copies' dtype. */
export function castTransposeMultiKernel(dtypes: Dtype[], out: Dtype): KernelDesc {
  const G = dtypes.length;
  if (G < 1 || G > CAST_T_MULTI_MAX) throw new Error(`helios: internal error: cast_transpose_multi over ${G} tensors`);
  const CT = CAST_T_TILE, ROWS = WG / CT;
  const k = kernel(`cast_transpose_multi${G}_${dtypeTag(dtypes)}_${out}`, { workgroup: [WG] });
  const xs = dtypes.map((d, j) => k.buffer(`x${j}`, storageOf(d), "read"));
  const cs = dtypes.map((_, j) => k.buffer(`c${j}`, storageOf(out), "write"));
  const ts = dtypes.map((_, j) => k.buffer(`t${j}`, storageOf(out), "write"));
  const pc = k.push(castTransposeMultiPush(G));
  const sh = k.shared("tile", f32, CT * (CT + 1));
  const w = rowIndex(k, pc.blocks);
  const lane = k.let(k.localIndex, "lane");
  const tx = k.let(lane.rem(CT), "tx"), ty = k.let(lane.div(CT), "ty");
  const across = (n: Expr) => n.add(CT - 1).div(CT);
  const tilesX = dtypes.map((_, j) => k.let(across(pc[`k${j}`]), "tilesx"));
  const tiles = dtypes.map((_, j) => k.let(across(pc[`r${j}`]).mul(tilesX[j]), "tiles"));
  ranges(k, tiles, lit(u32, CAST_T_TILES)).forEach(({ start, end }, j) => {
    const rows = pc[`r${j}`], cols = pc[`k${j}`];
    k.if(w.ge(start).and(w.lt(end)), () => {
      const first = k.let(w.sub(start).mul(CAST_T_TILES), "first");
      k.for(first, min(tiles[j], first.add(CAST_T_TILES)), (tile) => {
        const row0 = k.let(tile.div(tilesX[j]).mul(CT), "row0");
        const col0 = k.let(tile.rem(tilesX[j]).mul(CT), "col0");
        const col = k.let(col0.add(tx), "col");
        for (let q = 0; q < CT; q += ROWS) {
          const row = k.let(row0.add(ty).add(q), "row");
          k.if(row.lt(rows).and(col.lt(cols)), () => {
            const at = k.let(row.mul(cols).add(col), "at");
            const x = k.let(toF32(xs[j].load(at)), "x");
            cs[j].store(at, fromF32(x, out));
            sh.store(ty.add(q).mul(CT + 1).add(tx), x);
          });
        }
        k.barrier();
        // t_j row col0 + ty + q is x_j's column; its elements row0 + tx are x_j's rows
        const trow = k.let(row0.add(tx), "trow");
        for (let q = 0; q < CT; q += ROWS) {
          const tcol = k.let(col0.add(ty).add(q), "tcol");
          k.if(tcol.lt(cols).and(trow.lt(rows)), () => {
            ts[j].store(tcol.mul(rows).add(trow), fromF32(sh.load(tx.mul(CT + 1).add(ty).add(q)), out));
          });
        }
        k.barrier();
      });
    });
  });
  return k.finish();
}
