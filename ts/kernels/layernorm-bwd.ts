// LayerNorm backward in one pass over x and g: layernorm_bwd_dx4's dx plus the partial sums of dw
// and db, so the column sum (layernorm_bwd_dwdb_cols) need not read x and g again (issue 27).
//
// layernorm_bwd4_dwdb_v<V>[_w<W>]_s<S>[_pf][_sg]_<dtype>_<part>: bindings x, w, g (read), dx
//   (write, x's dtype), pw, pb (write, <part>: f32 partials [groups, dim], or dw and db themselves
//   in w's dtype when groups == 1). Push LN_BWD_FUSED_PUSH {rows, dim, eps, rowsPerGroup}.
//   Dispatch [groups, 1, 1], S * W threads; planLayerNormBwd gives V and W (ln4Shape, rows4.ts:
//   W = 64 to 256 threads a row, `_w<W>` below ROW_WG), S, rowsPerGroup and groups.
//   Needs dim % 4 == 0 and dim <= 4 * W * V (V <= 4: dim <= LN_BWD_FUSED_MAX_DIM).
//   With LnDxOpts (norm.ts; name suffix `_res_<dtype>`, `_h16`): res binds after g and dx16 after
//   dx; res is loaded (and prefetched) with x and g, and dx = res + dx_LN, dx16 = f16(dx).
//   An f16 g with an f32 x (`_g_f16` after <part>, lnGradTag) is converted to f32 as it loads.
// Workgroup q owns rows [q * rowsPerGroup, min(rows, (q + 1) * rowsPerGroup)) and works on S of
//   them at a time, one per slot of W threads (a slot is whole subgroups: with S > 1, slot and lane
//   come from the subgroup builtins, and subgroups wider than W take the shared-memory tree).
//   Within a slot, thread t does exactly what thread t of layernorm_bwd_dx4's one-row workgroup of
//   the same shape (ln4Shape's V and W, which both kernels take) does — the same vectors t, t + W,
//   ..., the same expressions, the same reductions (subgroup reduce, then the slot's subgroup
//   partials summed in order; or the shared-memory tree over W) — so dx is that kernel's bit for
//   bit on lavapipe; NVIDIA's compiler contracts the two kernels' arithmetic differently (H200: dx
//   up to 2 f32 ulps apart). Only the order in which the reductions are issued differs (sum x and
//   sum dy share one round of barriers).
//   Each thread also keeps running f32x4 sums of g * xhat and g for its vectors over its slot's
//   rows (rows q*rowsPerGroup + slot + S*i in sequence); at the end slots 1..S-1 hand theirs to
//   slot 0 through shared memory, which adds them in slot order and writes partial row q.
//   With `prefetch`, the next row's x and g are loaded before this row's reductions.
// Then colsum k2 (ts/kernels/colsum.ts, one chunk) folds the [groups, dim] partials of dw and db
//   in one dispatch. No stats buffer: mean and rstd never leave the kernel.
// Numerics: dx as layernorm_bwd_dx4. dw, db: f32 sums in a fixed order (a slot's rows in sequence,
//   the slots in order, then the fold's lanes and tree) fixed by the plan (rows, dim, device
//   limits), so runs agree bit for bit; no atomics. The order differs from layernorm_bwd_dwdb_cols',
//   so the sums differ from it by f32 rounding (each is within ~rows * 2^-24 * sum |g * xhat| of
//   the exact sum; the tests hold both to the float64 reference at atol 1e-4, rtol 1e-3).
import { f32, kernel, lit, min, rsqrt, select, u32, vecOf, type Buffer, type Expr, type KernelBuilder, type KernelDesc, type Shared, type Var } from "../ir/index.js";
import type { Dtype } from "../types.js";
import { ROW_WG, storageOf, uvar, type StorageElem } from "./common.js";
import { hsum, ln4Shape, splat, tree, widthTag } from "./rows4.js";
import { LN_DX_PLAIN, lnDxBuffers, lnDxPlain, lnDxTag, lnGradTag, loadLnRes, storeLnDx, type LnDxOpts } from "./norm.js";

export const LN_BWD_FUSED_PUSH = { rows: "u32", dim: "u32", eps: "f32", rowsPerGroup: "u32" } as const;

/** Widest row the fused pass takes: 4 vectors per thread (wider rows: dx4, then the column sum). */
export const LN_BWD_FUSED_MAX_DIM = 4 * 4 * ROW_WG;

/** The fused plan's knobs; the defaults ship, bench/colsum.ts (--ops=lnbwd) sweeps them. */
export interface LnBwdTuning {
  /** Off: dx, then dw/db as a column sum over x and g (the separate passes; the A/B control). */
  fused: boolean;
  /** Most partial rows (workgroups) the fused pass writes for the fold. */
  partials: number;
  /**
   * The workgroup's threads in units of ROW_WG at 1 vector per thread: slots × ROW_WG threads,
   * divided by pow2floor(vectors per thread) (the accumulators and loaded vectors grow with the
   * row), in slots of the row shape's W threads. A power of two.
   */
  slots: number;
  /** Load the next row's x and g before this row's reductions. */
  prefetch: boolean;
}

/**
 * About one workgroup per SM of a 132-SM H100/H200 of 1024 threads at 1 vector each, 512 at 2 or 3
 * (GPT-2's 768: 8 rows of 64 threads × 3 vectors) and 256 at 4: about what 64K registers an SM
 * hold with a thread's live vectors (~32 registers each with prefetch); the next row loading
 * during this one's reductions; <= 128 partial rows keep the fold at one short dispatch. Not yet
 * timed on a GPU in the narrow slots: bench/colsum.ts --ops=lnbwd sweeps these.
 */
export const LN_BWD_TUNING: Readonly<LnBwdTuning> = Object.freeze({ fused: true, partials: 128, slots: 4, prefetch: true });

let labTuning: Partial<LnBwdTuning> | null = null;

/**
 * For lab/layernorm-bwd.ts only (bench/ and tests: the A/B against the separate passes and the
 * sweeps); nothing under ts/ calls it. Process-wide; null restores the shipped knobs.
 */
export function setLayerNormBwdLab(t: Partial<LnBwdTuning> | null): void {
  labTuning = t ? { ...t } : null;
}

/** The knobs in force: the shipped ones unless the lab module overrode them. */
export function lnBwdTuning(): LnBwdTuning {
  return { ...LN_BWD_TUNING, ...labTuning };
}

export interface LnBwdPlan {
  /** Vectors (4 elements) per thread and row, as layernorm_bwd_dx4 (ln4Shape). */
  v4: number;
  /** Threads per row (a slot), as layernorm_bwd_dx4 (ln4Shape): 64 to ROW_WG. */
  wg: number;
  /** Rows in flight per workgroup (slots * wg threads). */
  slots: number;
  /** Rows per workgroup: a multiple of slots. */
  rowsPerGroup: number;
  /** Workgroups = partial rows (1: the pass writes dw and db). */
  groups: number;
  prefetch: boolean;
}

/** The device limits the plan respects. */
export interface LnBwdLimits {
  maxWorkgroupSize?: number;
  maxSharedMemoryBytes: number;
}

const sharedFloats = (slots: number, wg: number) => Math.max(2 * slots * wg, (slots - 1) * 4 * wg);

const pow2floor = (n: number) => 2 ** Math.floor(Math.log2(Math.max(1, n)));

/**
 * The fused pass for `rows` rows of `dim`, or null where it does not apply (dim % 4 != 0, dim >
 * LN_BWD_FUSED_MAX_DIM, a device without room for one slot, or tuning.fused off): then dx4 or dx
 * and the column sum run as before. Slots of ln4Shape's wg threads with v4 vectors each; slots =
 * min(tuning.slots * ROW_WG / pow2floor(v4) / wg, the device's workgroup size / wg,
 * pow2floor(ceil(rows / partials))), halved until the shared memory fits; rowsPerGroup =
 * ceil(rows / (partials * slots)) * slots.
 */
export function planLayerNormBwd(rows: number, dim: number, limits: LnBwdLimits, tune: LnBwdTuning = lnBwdTuning()): LnBwdPlan | null {
  const shape = ln4Shape(dim);
  if (!tune.fused || !shape || shape.v4 > 4 || rows < 1) return null;
  const { v4, wg } = shape;
  const maxWg = limits.maxWorkgroupSize ?? ROW_WG;
  if (wg > maxWg) return null;
  const partials = Math.max(1, Math.floor(tune.partials));
  const threads = (tune.slots * ROW_WG) / pow2floor(v4);
  let slots = Math.min(pow2floor(threads / wg), pow2floor(maxWg / wg), pow2floor(Math.ceil(rows / partials)));
  while (slots > 1 && sharedFloats(slots, wg) * 4 > limits.maxSharedMemoryBytes) slots /= 2;
  if (sharedFloats(slots, wg) * 4 > limits.maxSharedMemoryBytes) return null;
  const rowsPerGroup = Math.ceil(rows / (partials * slots)) * slots;
  return { v4, wg, slots, rowsPerGroup, groups: Math.ceil(rows / rowsPerGroup), prefetch: tune.prefetch };
}

/**
 * Whether `plan`'s slots can reduce through a device's subgroups: several slots need each slot to
 * be whole subgroups (subgroupSize <= wg); else the fused kernel takes the shared-memory tree.
 */
export function slotsFitSubgroups(plan: LnBwdPlan, subgroupSize: number): boolean {
  return plan.slots === 1 || subgroupSize <= plan.wg;
}

/** Sums of each value over a slot's W threads, in layernorm_bwd_dx4's order (header). */
type SlotReduce = (values: Expr[]) => Expr[];

/**
 * This thread's slot and its index t in the slot of W threads. With subgroups and several slots
 * both come from the subgroup builtins, so a slot is whole subgroups whatever the driver's
 * invocation-to-subgroup mapping (on every driver we know, t = local index mod W as in the
 * one-row kernel); one slot is the one-row kernel's workgroup (t = local index).
 */
function slotLanes(k: KernelBuilder, S: number, W: number, sg: boolean): { slot: Expr; t: Expr; reduce: SlotReduce; sh: Shared } {
  const sh = k.shared("red", f32, sharedFloats(S, W));
  const stride = S * W;
  if (!sg) {
    const li = k.let(k.localIndex, "li");
    const slot = k.let(li.shr(Math.log2(W)), "slot");
    const t = k.let(li.band(W - 1), "t");
    const base = k.let(slot.mul(W), "sb");
    // wgReduce per slot: the same tree, several values per round
    const reduce: SlotReduce = (vs) => {
      vs.forEach((v, i) => sh.store(base.add(t).add(i * stride), v));
      k.barrier();
      for (let s = W / 2; s > 0; s >>= 1) {
        k.if(t.lt(s), () => vs.forEach((_, i) => {
          const at = k.let(base.add(t).add(i * stride), "at");
          sh.store(at, sh.load(at).add(sh.load(at.add(s))));
        }));
        k.barrier();
      }
      const out = vs.map((_, i) => k.let(sh.load(base.add(i * stride)), "red"));
      k.barrier();
      return out;
    };
    return { slot, t, reduce, sh };
  }
  const nsg = k.let(k.numSubgroups.div(S), "nsg");
  const one = S === 1;
  const slot = one ? lit(u32, 0) : k.let(k.subgroupId.div(nsg), "slot");
  const sg0 = one ? lit(u32, 0) : k.let(slot.mul(nsg), "sg0");
  const t = k.let(one ? k.localIndex : k.subgroupId.sub(sg0).mul(k.subgroupSize).add(k.subgroupInvocation), "t");
  // wgReduceSg per slot: subgroup sums, then the slot's partials added to 0 in subgroup order
  const reduce: SlotReduce = (vs) => {
    const rs = vs.map((v) => k.sgReduce("add", v));
    k.if(k.subgroupInvocation.eq(0), () => rs.forEach((r, i) => sh.store(k.subgroupId.add(i * stride), r)));
    k.barrier();
    const accs = vs.map(() => uvar(k, "f32", 0, "wr"));
    k.for(lit(u32, 0), nsg, (j) => {
      const at = k.let(sg0.add(j), "at");
      accs.forEach((a, i) => a.set(a.get().add(sh.load(at.add(i * stride)))));
    });
    const out = accs.map((a) => a.get());
    k.barrier();
    return out;
  };
  return { slot, t, reduce, sh };
}

interface Lanes { slot: Expr; t: Expr; sh: Shared; S: number; W: number; cols: Expr[]; valid: Expr[] }

/**
 * Partial row `prow` (its first vector index) of `buf`: each slot's f32x4 sums, slots 1..S-1
 * handed to slot 0 through shared memory one vector at a time and added in slot order.
 */
function storePartials(k: KernelBuilder, l: Lanes, buf: Buffer, part: StorageElem, prow: Expr, accs: Var[]): void {
  const { slot, t, sh, S, W, cols, valid } = l;
  const out = buf.as(part, 4);
  const vec4 = `${part}x4` as "f32x4";
  accs.forEach((acc, r) => {
    const own = acc.get();
    if (S === 1) {
      k.if(valid[r], () => out.store(prow.add(cols[r]), own.cast(vec4)));
      return;
    }
    k.if(slot.gt(0), () => [own.x, own.y, own.z, own.w].forEach((c, e) => sh.store(slot.sub(1).mul(4).add(e).mul(W).add(t), c)));
    k.barrier();
    k.if(slot.eq(0).and(valid[r]), () => {
      let total = own;
      for (let s = 1; s < S; s++) {
        const other = [0, 1, 2, 3].map((e) => sh.load(t.add(((s - 1) * 4 + e) * W)));
        total = k.let(total.add(vecOf("f32x4", ...other)), "tot");
      }
      out.store(prow.add(cols[r]), total.cast(vec4));
    });
    k.barrier();
  });
}

/**
 * `o` (norm.ts, LnDxOpts): a residual added into dx and an f16 copy, in the same pass; g of
 * `gDtype` (lnGradTag); slots of `wg` threads (the plan's, ln4Shape).
 */
export function layerNormBwdFusedKernel(
  dtype: Dtype, wDtype: Dtype, partDtype: Dtype, v4: number, slots: number, sg: boolean, prefetch: boolean, o: LnDxOpts = LN_DX_PLAIN,
  gDtype: Dtype = dtype, wg = ROW_WG,
): KernelDesc {
  const S = slots, W = wg;
  const pow2 = (n: number) => Number.isInteger(n) && n >= 1 && (n & (n - 1)) === 0;
  if (![1, 2, 3, 4].includes(v4) || !pow2(S) || ![64, 128, ROW_WG].includes(W)) {
    throw new Error(`helios: internal error: layernorm_bwd4_dwdb with v4 ${v4}, wg ${W}, slots ${S}`);
  }
  const part = storageOf(partDtype);
  const name = `layernorm_bwd4_dwdb_v${v4}${widthTag(W)}_s${S}${prefetch ? "_pf" : ""}${sg ? "_sg" : ""}_${dtype}_${part}${lnGradTag(dtype, gDtype)}${lnDxTag(o)}`;
  const k = kernel(name, { workgroup: [S * W] });
  const x = k.buffer("x", storageOf(dtype), "read");
  const w = k.buffer("w", storageOf(wDtype), "read");
  const g = k.buffer("g", storageOf(gDtype), "read");
  const bufs = lnDxPlain(o) ? null : lnDxBuffers(k, dtype, o);
  const dx = bufs ? bufs.dx : k.buffer("dx", storageOf(dtype), "write");
  const pw = k.buffer("pw", part, "write");
  const pb = k.buffer("pb", part, "write");
  const pc = k.push(LN_BWD_FUSED_PUSH);
  const { slot, t, reduce, sh } = slotLanes(k, S, W, sg);
  const q = k.let(k.workgroupId.x, "q");
  const row0 = k.let(q.mul(pc.rowsPerGroup), "row0");
  const rowEnd = k.let(min(pc.rows, row0.add(pc.rowsPerGroup)), "rowend");
  const lastRow = k.let(rowEnd.sub(1), "lastrow");
  const dim4 = k.let(pc.dim.shr(2), "dim4");
  const last = k.let(dim4.sub(1), "last");
  const cols = Array.from({ length: v4 }, (_, r) => k.let(t.add(r * W), "col"));
  const valid = cols.map((c) => k.let(c.lt(dim4), "ok"));
  // loads at clamped indices, masked in the sums (as layernorm_bwd_dx4)
  const at = cols.map((c) => k.let(min(c, last), "ci"));
  const xv = x.as(storageOf(dtype), 4), gv = g.as(storageOf(gDtype), 4), wv = w.as(storageOf(wDtype), 4), dxv = dx.as(storageOf(dtype), 4);
  const wq = at.map((c) => k.let(wv.load(c).cast("f32x4"), "wq"));
  const dimF = k.let(pc.dim.cast(f32), "dimf");
  const zero = () => uvar(k, "f32x4", vecOf("f32x4", lit(f32, 0)), "acc");
  const accW = cols.map(zero), accB = cols.map(zero);
  // the residual (with options) is loaded with x and g: prefetched alike, in flight during the reductions
  const loadRow = (row: Expr) => {
    const base = k.let(row.mul(dim4), "lb");
    const xs = at.map((c) => k.let(xv.load(base.add(c)).cast("f32x4"), "xv")), gs = at.map((c) => k.let(gv.load(base.add(c)).cast("f32x4"), "gq"));
    return { xs, gs, rs: bufs?.res ? at.map((c) => k.let(loadLnRes(bufs, base.add(c), 4)!, "rq")) : [] };
  };
  let next: { xs: Var[]; gs: Var[]; rs: Var[] } | null = null;
  if (prefetch) {
    const first = loadRow(min(row0.add(slot), lastRow));
    next = { xs: first.xs.map((v) => uvar(k, "f32x4", v, "nx")), gs: first.gs.map((v) => uvar(k, "f32x4", v, "ng")), rs: first.rs.map((v) => uvar(k, "f32x4", v, "nr")) };
  }
  const mask = (xs: Expr[]) => tree(xs.map((v, r) => select(valid[r], v, lit(f32, 0))), (p, s) => p.add(s));
  k.for(row0, rowEnd, (i) => {
    const row = k.let(i.add(slot), "row");
    const active = k.let(row.lt(rowEnd), "act");
    let cur: { xs: Expr[]; gs: Expr[]; rs: Expr[] };
    if (next) {
      const n = next;
      cur = { xs: n.xs.map((v) => v.get()), gs: n.gs.map((v) => v.get()), rs: n.rs.map((v) => v.get()) };
      const ahead = loadRow(min(row.add(S), lastRow));
      ahead.xs.forEach((v, r) => n.xs[r].set(v));
      ahead.gs.forEach((v, r) => n.gs[r].set(v));
      ahead.rs.forEach((v, r) => n.rs[r].set(v));
    } else {
      cur = loadRow(min(row, lastRow));
    }
    const { xs, gs, rs } = cur;
    const dys = gs.map((gq, r) => k.let(gq.mul(wq[r]), "dy"));
    const [sumX, sum1] = reduce([mask(xs.map(hsum)), mask(dys.map(hsum))]);
    const mean = k.let(sumX.div(dimF), "mean");
    const mv = k.let(splat(mean), "mv");
    const cen = xs.map((v) => k.let(v.sub(mv), "c"));
    const rstd = k.let(rsqrt(reduce([mask(cen.map((c) => hsum(c.mul(c))))])[0].div(dimF).add(pc.eps)), "rstd");
    const xh = cen.map((c) => k.let(c.mul(rstd), "xh"));
    const sum2 = reduce([mask(dys.map((d, r) => hsum(d.mul(xh[r]))))])[0];
    const a = k.let(splat(sum1.div(dimF)), "a"), b = k.let(splat(sum2.div(dimF)), "b"), rv = k.let(splat(rstd), "rv");
    const base4 = k.let(row.mul(dim4), "base4");
    cols.forEach((c, r) => {
      const v = dys[r].sub(a.add(xh[r].mul(b))).mul(rv);
      if (bufs) k.if(valid[r].and(active), () => storeLnDx(k, bufs, base4.add(c), v, rs[r] ?? null, 4));
      else k.if(valid[r].and(active), () => dxv.store(base4.add(c), v.cast(`${storageOf(dtype)}x4` as "f32x4")));
    });
    k.if(active, () => cols.forEach((_, r) => {
      accW[r].set(accW[r].get().add(gs[r].mul(xh[r])));
      accB[r].set(accB[r].get().add(gs[r]));
    }));
  }, { step: S });
  const lanes: Lanes = { slot, t, sh, S, W, cols, valid };
  storePartials(k, lanes, pw, part, q.mul(dim4), accW);
  storePartials(k, lanes, pb, part, q.mul(dim4), accB);
  return k.finish();
}
