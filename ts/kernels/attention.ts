// Causal flash attention (online softmax) with optional soft-capping, forward and backward.
// Q, K, V, O, dO: [BH, T, D] contiguous; lse, Dpre: [BH, T] f32. Scores are
//   s = q.k * scale, then cap * tanh(s / cap) when cap > 0, masked to keys j <= i.
//
// flash_fwd: bindings q, k, v (read), o (write), lse (write). Push {T, scale, cap}.
//   Grid [ceil(T/64), BH]; one thread per query row (64 per workgroup). K/V tiles of BC
//   keys are staged in shared memory by the whole workgroup; each thread keeps its q row,
//   running max m, sum l and output accumulator in registers (D is a generation parameter,
//   loops over D are unrolled). lse = m + log(l).
// flash_bwd_dq: bindings q, k, v, o, dO, lse (read), dq (write), dpre (write).
//   Same grid; thread per query row: Dpre_i = dO_i.O_i, then over keys j <= i:
//   p = exp(s - lse_i), ds = p * (dO_i.V_j - Dpre_i) * capgrad * scale, dq_i += ds * K_j.
// flash_bwd_dkdv: bindings q, k, v, dO, lse, dpre (read), dk, dv (write). Grid [ceil(T/64),
//   BH]; thread per key row j over queries i >= j (Q/dO tiles, lse and Dpre in shared):
//   dv_j += p * dO_i, dk_j += ds * Q_i. No atomics: every output row has one writer.
// Each has a _v4 variant for D % 4 == 0 (f32x4 shared tiles and registers: a shared read
// feeds four FMAs); the scalar kernels serve other head sizes. This is the portable SIMT
// formulation (the tensor-core kernels are attention-cm-acc.ts and attention-cm-bwd.ts).
// Layout (FlashVariant.layout, HeadLayout): the contract above is "bhtd"; the "rows" kernels
// (names end _rows) read and write the same values with heads side by side in rows of B*T
// (push FA_ROWS_PUSH, see HeadLayout): no head transposes around them. lse and dpre stay [BH, T].
import { dot, exp, f32, kernel, lit, log, max, min, select, u32, vecOf, type Buffer, type Expr, type KernelBuilder, type KernelDesc } from "../ir/index.js";
import type { Dtype } from "../types.js";
import { fromF32, safeTanh, storageOf, sumTree, toF32, uvar } from "./common.js";

export const FA_ROWS = 64;
export const FA_PUSH = { T: "u32", scale: "f32", cap: "f32" } as const;
/** Keys per inner step of flash_fwd_v4 (divides every faTile). */
const FA_CHUNK = 8;

/** Keys per shared tile: two tiles of BC x D f32 stay within 16 KiB; a multiple of FA_CHUNK. */
export function faTile(D: number): number {
  return Math.max(FA_CHUNK, Math.min(64, Math.floor(2048 / D / FA_CHUNK) * FA_CHUNK));
}

/**
 * Where a kernel finds row t of head bh (= b H + h) of each tensor:
 * - "bhtd": [BH, T, D] contiguous tensors (push FA_PUSH);
 * - "rows": heads side by side in the rows of [B*T, ...] tensors, as a projection writes them (push
 *   FA_ROWS_PUSH). q, k and v (and dq, dk, dv, which mirror them) have rows of `ld` elements with
 *   head h at column h D, k `kv` and v 2 kv elements after q: kv = 0 for three [B*T, H*D] tensors,
 *   kv = H D for one packed [B*T, 3*H*D] tensor (a fused projection's q | k | v columns) bound
 *   three times. o and dO have rows of H D. lse stays [BH, T].
 */
export type HeadLayout = "bhtd" | "rows";
export const FA_ROWS_PUSH = { ...FA_PUSH, H: "u32", ld: "u32", kv: "u32" } as const;

/** The push layout of a kernel of `layout`. */
export function faPush(layout: HeadLayout | undefined): typeof FA_PUSH | typeof FA_ROWS_PUSH {
  return layout === "rows" ? FA_ROWS_PUSH : FA_PUSH;
}

/** A rows-layout kernel's push fields (FA_ROWS_PUSH). */
export function rowsPush(pc: Record<string, Expr>): Record<keyof typeof FA_ROWS_PUSH, Expr> {
  if (!pc.H || !pc.ld || !pc.kv) throw new Error("helios: internal error: a rows-layout kernel without FA_ROWS_PUSH");
  return pc as Record<keyof typeof FA_ROWS_PUSH, Expr>;
}

/** Kernel-name suffix of a layout ("" for bhtd, so those descriptions are unchanged). */
export function layoutTag(layout: HeadLayout | undefined): string {
  return layout === "rows" ? "_rows" : "";
}

/**
 * Head bh's first row in each tensor and the row strides (HeadLayout), in units of `w` elements
 * (1, or 4 for the f32x4 kernels). bhtd: one `name` offset bh T D/w for every tensor.
 */
export interface HeadRows {
  /** q, k, v (and dq, dk, dv). */
  q: Expr; k: Expr; v: Expr;
  /** o and dO. */
  o: Expr;
  /** Row strides of q, k, v and of o, dO (in units). */
  ld: Expr | number; ldo: Expr | number;
  /** rows: the head h and its batch's first row b T (row statistics laid out [B*T, H] are at (row0 + t) H + h). */
  head?: Expr; row0?: Expr;
}

export function headRows(
  k: KernelBuilder, pc: Record<string, Expr>, bh: Expr, D: number, layout: HeadLayout | undefined, name: string, w = 1,
): HeadRows {
  const Du = D / w;
  if (layout !== "rows") {
    const base = k.let(bh.mul(pc.T).mul(Du), name);
    return { q: base, k: base, v: base, o: base, ld: Du, ldo: Du };
  }
  const p = rowsPush(pc);
  const h = k.let(bh.rem(p.H), "head");
  const row0 = k.let(bh.div(p.H).mul(p.T), "row0");
  const ld = w === 1 ? p.ld : k.let(p.ld.div(w), "ldu");
  const kv = w === 1 ? p.kv : k.let(p.kv.div(w), "kvu");
  const q = k.let(row0.mul(ld).add(h.mul(Du)), "qbase");
  const kb = k.let(q.add(kv), "kbase");
  const vb = k.let(kb.add(kv), "vbase");
  const ldo = k.let(p.H.mul(Du), "ldo");
  const o = k.let(row0.mul(ldo).add(h.mul(Du)), "obase");
  return { q, k: kb, v: vb, o, ld, ldo, head: h, row0 };
}

export interface FlashVariant {
  readonly dtype: Dtype;
  readonly D: number;
  readonly softCap: boolean;
  /** Default "bhtd". */
  readonly layout?: HeadLayout;
}

function faName(base: string, v: FlashVariant): string {
  return `${base}_${v.dtype}_d${v.D}${v.softCap ? "_cap" : ""}${layoutTag(v.layout)}`;
}

type V = { get(): Expr; set(v: Expr): void };

function regs(k: KernelBuilder, n: number, name: string, init: number): V[] {
  return Array.from({ length: n }, (_, i) => k.var(f32, init, `${name}${i}`));
}

function capScore(raw: Expr, cap: Expr, on: boolean): Expr {
  return on ? safeTanh(raw.div(cap)).mul(cap) : raw;
}

/** Stages rows [r0, r0+BC) of one head (first row at `base`, rows `ld` apart) into shared `sh` (zero past T). */
function stageTile(k: KernelBuilder, src: Buffer, sh: { store(i: Expr, v: Expr): void }, base: Expr, ld: Expr | number, r0: Expr, T: Expr, D: number, BC: number, tid: Expr): void {
  k.for(tid, lit(u32, BC * D), (e) => {
    const r = k.let(e.div(D), "r");
    const g = k.let(r0.add(r), "g");
    const val = uvar(k, f32, 0, "st");
    k.if(g.lt(T), () => val.set(toF32(src.load(base.add(g.mul(ld)).add(e.rem(D))))));
    sh.store(e, val.get());
  }, { step: FA_ROWS });
}

export function flashFwdKernel(v: FlashVariant): KernelDesc {
  const { D } = v;
  const BC = faTile(D);
  const k = kernel(faName("flash_fwd", v), { workgroup: [FA_ROWS] });
  const st = storageOf(v.dtype);
  const Q = k.buffer("q", st, "read"), K = k.buffer("k", st, "read"), Vb = k.buffer("v", st, "read");
  const O = k.buffer("o", st, "write"), L = k.buffer("lse", f32, "write");
  const pc = k.push(faPush(v.layout));
  const Ks = k.shared("Ks", f32, BC * D), Vs = k.shared("Vs", f32, BC * D);
  const tid = k.let(k.localIndex, "tid");
  const bh = k.let(k.workgroupId.y, "bh");
  const q0 = k.let(k.workgroupId.x.mul(FA_ROWS), "q0");
  const i = k.let(q0.add(tid), "qi");
  const hr = headRows(k, pc, bh, D, v.layout, "base");
  const valid = k.let(i.lt(pc.T), "valid");
  const qi = k.let(min(i, pc.T.sub(1)), "qrow");
  const q = Array.from({ length: D }, (_, d) => k.let(toF32(Q.load(hr.q.add(qi.mul(hr.ld)).add(d))).mul(pc.scale), "q"));
  const acc = regs(k, D, "o", 0);
  const m = k.var(f32, -Infinity, "m");
  const l = k.var(f32, 0, "l");
  const lastKey = k.let(min(q0.add(FA_ROWS), pc.T), "kend");
  k.for(lit(u32, 0), lastKey, (k0) => {
    stageTile(k, K, Ks, hr.k, hr.ld, k0, pc.T, D, BC, tid);
    stageTile(k, Vb, Vs, hr.v, hr.ld, k0, pc.T, D, BC, tid);
    k.barrier();
    k.if(valid, () => {
      const jEnd = k.let(min(lit(u32, BC), i.add(1).sub(min(k0, i.add(1)))), "jend");
      k.for(lit(u32, 0), jEnd, (j) => {
        const row = k.let(j.mul(D), "kr");
        const dot = sumTree(q.map((qd, d) => qd.mul(Ks.load(row.add(d)))));
        const s = k.let(capScore(dot, pc.cap, v.softCap), "s");
        const mNew = k.let(max(m.get(), s), "mn");
        const corr = k.let(exp(m.get().sub(mNew)), "corr");
        const p = k.let(exp(s.sub(mNew)), "p");
        l.set(l.get().mul(corr).add(p));
        for (let d = 0; d < D; d++) acc[d].set(acc[d].get().mul(corr).add(p.mul(Vs.load(row.add(d)))));
        m.set(mNew);
      });
    });
    k.barrier();
  }, { step: BC });
  k.if(valid, () => {
    const inv = k.let(lit(f32, 1).div(l.get()), "inv");
    for (let d = 0; d < D; d++) O.store(hr.o.add(i.mul(hr.ldo)).add(d), fromF32(acc[d].get().mul(inv), v.dtype));
    L.store(bh.mul(pc.T).add(i), m.get().add(log(l.get())));
  });
  return k.finish();
}

/** Score and probability for (query regs q, key row in shared), given lse. */
function probAndGrad(k: KernelBuilder, q: Expr[], Ks: { load(i: Expr): Expr }, row: Expr, lse: Expr, cap: Expr, on: boolean) {
  const raw = k.let(sumTree(q.map((qd, d) => qd.mul(Ks.load(row.add(d))))), "raw");
  const s = k.let(capScore(raw, cap, on), "s");
  const p = k.let(exp(s.sub(lse)), "p");
  const capGrad = on ? k.let(lit(f32, 1).sub(s.div(cap).mul(s.div(cap))), "cg") : lit(f32, 1);
  return { p, capGrad };
}

export function flashBwdDqKernel(v: FlashVariant): KernelDesc {
  const { D } = v;
  const BC = faTile(D);
  const k = kernel(faName("flash_bwd_dq", v), { workgroup: [FA_ROWS] });
  const st = storageOf(v.dtype);
  const Q = k.buffer("q", st, "read"), K = k.buffer("k", st, "read"), Vb = k.buffer("v", st, "read");
  const O = k.buffer("o", st, "read"), dO = k.buffer("do", st, "read"), L = k.buffer("lse", f32, "read");
  const dQ = k.buffer("dq", st, "write"), Dp = k.buffer("dpre", f32, "write");
  const pc = k.push(faPush(v.layout));
  const Ks = k.shared("Ks", f32, BC * D), Vs = k.shared("Vs", f32, BC * D);
  const tid = k.let(k.localIndex, "tid");
  const bh = k.let(k.workgroupId.y, "bh");
  const q0 = k.let(k.workgroupId.x.mul(FA_ROWS), "q0");
  const i = k.let(q0.add(tid), "qi");
  const hr = headRows(k, pc, bh, D, v.layout, "base");
  const valid = k.let(i.lt(pc.T), "valid");
  const qi = k.let(min(i, pc.T.sub(1)), "qrow");
  const rowOff = k.let(hr.q.add(qi.mul(hr.ld)), "roff");
  // o and dO rows: the same offset in [BH, T, D]
  const oOff = v.layout === "rows" ? k.let(hr.o.add(qi.mul(hr.ldo)), "ooff") : rowOff;
  const q = Array.from({ length: D }, (_, d) => k.let(toF32(Q.load(rowOff.add(d))).mul(pc.scale), "q"));
  const go = Array.from({ length: D }, (_, d) => k.let(toF32(dO.load(oOff.add(d))), "go"));
  const Di = k.let(sumTree(go.map((g, d) => g.mul(toF32(O.load(oOff.add(d)))))), "Di");
  const lse = k.let(L.load(bh.mul(pc.T).add(qi)), "lse");
  const acc = regs(k, D, "dq", 0);
  const lastKey = k.let(min(q0.add(FA_ROWS), pc.T), "kend");
  k.for(lit(u32, 0), lastKey, (k0) => {
    stageTile(k, K, Ks, hr.k, hr.ld, k0, pc.T, D, BC, tid);
    stageTile(k, Vb, Vs, hr.v, hr.ld, k0, pc.T, D, BC, tid);
    k.barrier();
    k.if(valid, () => {
      const jEnd = k.let(min(lit(u32, BC), i.add(1).sub(min(k0, i.add(1)))), "jend");
      k.for(lit(u32, 0), jEnd, (j) => {
        const row = k.let(j.mul(D), "kr");
        const { p, capGrad } = probAndGrad(k, q, Ks, row, lse, pc.cap, v.softCap);
        const dp = sumTree(go.map((g, d) => g.mul(Vs.load(row.add(d)))));
        const ds = k.let(p.mul(dp.sub(Di)).mul(capGrad).mul(pc.scale), "ds");
        for (let d = 0; d < D; d++) acc[d].set(acc[d].get().add(ds.mul(Ks.load(row.add(d)))));
      });
    });
    k.barrier();
  }, { step: BC });
  k.if(valid, () => {
    for (let d = 0; d < D; d++) dQ.store(rowOff.add(d), fromF32(acc[d].get(), v.dtype));
    Dp.store(bh.mul(pc.T).add(i), Di);
  });
  return k.finish();
}

export function flashBwdDkDvKernel(v: FlashVariant): KernelDesc {
  const { D } = v;
  const BC = faTile(D);
  const k = kernel(faName("flash_bwd_dkdv", v), { workgroup: [FA_ROWS] });
  const st = storageOf(v.dtype);
  const Q = k.buffer("q", st, "read"), K = k.buffer("k", st, "read"), Vb = k.buffer("v", st, "read");
  const dO = k.buffer("do", st, "read"), L = k.buffer("lse", f32, "read"), Dp = k.buffer("dpre", f32, "read");
  const dK = k.buffer("dk", st, "write"), dV = k.buffer("dv", st, "write");
  const pc = k.push(faPush(v.layout));
  const Qs = k.shared("Qs", f32, BC * D), Gs = k.shared("Gs", f32, BC * D);
  const Ls = k.shared("Ls", f32, BC), Ds = k.shared("Ds", f32, BC);
  const tid = k.let(k.localIndex, "tid");
  const bh = k.let(k.workgroupId.y, "bh");
  const j0 = k.let(k.workgroupId.x.mul(FA_ROWS), "j0");
  const j = k.let(j0.add(tid), "kj");
  const hr = headRows(k, pc, bh, D, v.layout, "base");
  const valid = k.let(j.lt(pc.T), "valid");
  const kj = k.let(min(j, pc.T.sub(1)), "krow");
  const rowOff = k.let(hr.k.add(kj.mul(hr.ld)), "roff");
  // v's row: the same offset in [BH, T, D]
  const vOff = v.layout === "rows" ? k.let(hr.v.add(kj.mul(hr.ld)), "voff") : rowOff;
  // Scores use q*scale . k; keep k as loaded and fold scale into the staged Q rows.
  const kr = Array.from({ length: D }, (_, d) => k.let(toF32(K.load(rowOff.add(d))), "kk"));
  const vr = Array.from({ length: D }, (_, d) => k.let(toF32(Vb.load(vOff.add(d))), "vv"));
  const accK = regs(k, D, "dk", 0);
  const accV = regs(k, D, "dv", 0);
  k.for(j0.sub(j0.rem(BC)), pc.T, (i0) => {
    stageTile(k, Q, Qs, hr.q, hr.ld, i0, pc.T, D, BC, tid);
    stageTile(k, dO, Gs, hr.o, hr.ldo, i0, pc.T, D, BC, tid);
    k.if(tid.lt(BC), () => {
      const gi = k.let(min(i0.add(tid), pc.T.sub(1)), "gi");
      Ls.store(tid, L.load(bh.mul(pc.T).add(gi)));
      Ds.store(tid, Dp.load(bh.mul(pc.T).add(gi)));
    });
    k.barrier();
    k.if(valid, () => {
      const iEnd = k.let(min(lit(u32, BC), pc.T.sub(i0)), "iend");
      k.for(lit(u32, 0), iEnd, (ii) => {
        const gi = k.let(i0.add(ii), "gq");
        k.if(gi.ge(j), () => {
          const row = k.let(ii.mul(D), "qr");
          const dot = sumTree(kr.map((kd, d) => Qs.load(row.add(d)).mul(kd)));
          const s = k.let(capScore(dot.mul(pc.scale), pc.cap, v.softCap), "s");
          const p = k.let(exp(s.sub(Ls.load(ii))), "p");
          const capGrad = v.softCap ? k.let(lit(f32, 1).sub(s.div(pc.cap).mul(s.div(pc.cap))), "cg") : lit(f32, 1);
          const dp = sumTree(vr.map((vd, d) => Gs.load(row.add(d)).mul(vd)));
          const ds = k.let(p.mul(dp.sub(Ds.load(ii))).mul(capGrad).mul(pc.scale), "ds");
          for (let d = 0; d < D; d++) {
            accV[d].set(accV[d].get().add(p.mul(Gs.load(row.add(d)))));
            accK[d].set(accK[d].get().add(ds.mul(Qs.load(row.add(d)))));
          }
        });
      });
    });
    k.barrier();
  }, { step: BC });
  k.if(valid, () => {
    for (let d = 0; d < D; d++) {
      dK.store(rowOff.add(d), fromF32(accK[d].get(), v.dtype));
      dV.store(vOff.add(d), fromF32(accV[d].get(), v.dtype));
    }
  });
  return k.finish();
}

/**
 * flash_fwd_v4: flash_fwd's contract for D % 4 == 0. K/V tiles are staged as f32x4 in
 * shared memory and q/acc live in f32x4 registers, so each shared read feeds four FMAs
 * (the scalar kernel is bound by shared-load issue, not arithmetic, on NVIDIA).
 */
export function flashFwdVec4Kernel(v: FlashVariant): KernelDesc {
  const { D } = v;
  const D4 = D / 4;
  const BC = faTile(D);
  const k = kernel(faName("flash_fwd_v4", v), { workgroup: [FA_ROWS] });
  const st = storageOf(v.dtype);
  const Q = k.buffer("q", st, "read"), K = k.buffer("k", st, "read"), Vb = k.buffer("v", st, "read");
  const O = k.buffer("o", st, "write"), L = k.buffer("lse", f32, "write");
  const pc = k.push(faPush(v.layout));
  const Ks = k.shared("Ks", "f32x4", BC * D4), Vs = k.shared("Vs", "f32x4", BC * D4);
  const tid = k.let(k.localIndex, "tid");
  const bh = k.let(k.workgroupId.y, "bh");
  const q0 = k.let(k.workgroupId.x.mul(FA_ROWS), "q0");
  const i = k.let(q0.add(tid), "qi");
  const hr = headRows(k, pc, bh, D, v.layout, "base4", 4);
  const valid = k.let(i.lt(pc.T), "valid");
  const qi = k.let(min(i, pc.T.sub(1)), "qrow");
  const q = Array.from({ length: D4 }, (_, d) => k.let(Q.loadVec(hr.q.add(qi.mul(hr.ld)).add(d), 4).cast("f32x4").mul(pc.scale), "q"));
  const acc = Array.from({ length: D4 }, (_, d) => k.var("f32x4", vecOf("f32x4", lit(f32, 0)), `o${d}`));
  const m = k.var(f32, -Infinity, "m");
  const l = k.var(f32, 0, "l");
  const lastKey = k.let(min(q0.add(FA_ROWS), pc.T), "kend");
  const stage = (src: Buffer, sh: { store(i: Expr, v: Expr): void }, base4: Expr, k0: Expr) => {
    k.for(tid, lit(u32, BC * D4), (e) => {
      const g = k.let(k0.add(e.div(D4)), "g");
      const val = uvar(k, "f32x4", vecOf("f32x4", lit(f32, 0)), "st4");
      k.if(g.lt(pc.T), () => val.set(src.loadVec(base4.add(g.mul(hr.ld)).add(e.rem(D4)), 4).cast("f32x4")));
      sh.store(e, val.get());
    }, { step: FA_ROWS });
  };
  k.for(lit(u32, 0), lastKey, (k0) => {
    stage(K, Ks, hr.k, k0);
    stage(Vb, Vs, hr.v, k0);
    k.barrier();
    k.if(valid, () => {
      const jEnd = k.let(min(lit(u32, BC), i.add(1).sub(min(k0, i.add(1)))), "jend");
      // FA_CHUNK keys per step: independent scores (ILP), one running-max correction per chunk.
      // Keys at or past jEnd get s = -inf, so p = 0 (chunk key 0 is always valid: m stays finite).
      k.for(lit(u32, 0), jEnd, (j0) => {
        const rows = Array.from({ length: FA_CHUNK }, (_, c) => k.let(j0.add(c).mul(D4), "kr"));
        const ss = rows.map((row, c) => {
          const dotv = sumTree(q.map((qd, d) => qd.mul(Ks.load(row.add(d)))));
          const sc = capScore(dot(dotv, vecOf("f32x4", lit(f32, 1))), pc.cap, v.softCap);
          return k.let(c === 0 ? sc : select(j0.add(c).lt(jEnd), sc, lit(f32, "-inf")), "s");
        });
        const mNew = k.let(max(m.get(), ss.reduce((a, b) => max(a, b))), "mn");
        const corr = k.let(exp(m.get().sub(mNew)), "corr");
        const ps = ss.map((sc) => k.let(exp(sc.sub(mNew)), "p"));
        l.set(l.get().mul(corr).add(sumTree(ps)));
        for (let d = 0; d < D4; d++) {
          acc[d].set(sumTree([acc[d].get().mul(corr), ...rows.map((row, c) => Vs.load(row.add(d)).mul(ps[c]))]));
        }
        m.set(mNew);
      }, { step: FA_CHUNK });
    });
    k.barrier();
  }, { step: BC });
  k.if(valid, () => {
    const inv = k.let(lit(f32, 1).div(l.get()), "inv");
    const vt = `${st}x4` as "f32x4";
    for (let d = 0; d < D4; d++) O.store(hr.o.add(i.mul(hr.ldo)).add(d), acc[d].get().mul(inv).cast(vt));
    L.store(bh.mul(pc.T).add(i), m.get().add(log(l.get())));
  });
  return k.finish();
}

/** Stages rows [r0, r0+BC) of one head (first row at `base4`, rows `ld4` apart, in f32x4 units) into shared `sh` (zero past T). */
function stageTile4(k: KernelBuilder, src: Buffer, sh: { store(i: Expr, v: Expr): void }, base4: Expr, ld4: Expr | number, r0: Expr, T: Expr, D4: number, BC: number, tid: Expr): void {
  k.for(tid, lit(u32, BC * D4), (e) => {
    const g = k.let(r0.add(e.div(D4)), "g");
    const val = uvar(k, "f32x4", vecOf("f32x4", lit(f32, 0)), "st4");
    k.if(g.lt(T), () => val.set(src.loadVec(base4.add(g.mul(ld4)).add(e.rem(D4)), 4).cast("f32x4")));
    sh.store(e, val.get());
  }, { step: FA_ROWS });
}

const ONES4 = () => vecOf("f32x4", lit(f32, 1));

/** flash_bwd_dq with f32x4 tiles and registers (D % 4 == 0); same contract as flash_bwd_dq. */
export function flashBwdDqVec4Kernel(v: FlashVariant): KernelDesc {
  const { D } = v;
  const D4 = D / 4;
  const BC = faTile(D);
  const k = kernel(faName("flash_bwd_dq_v4", v), { workgroup: [FA_ROWS] });
  const st = storageOf(v.dtype);
  const Q = k.buffer("q", st, "read"), K = k.buffer("k", st, "read"), Vb = k.buffer("v", st, "read");
  const O = k.buffer("o", st, "read"), dO = k.buffer("do", st, "read"), L = k.buffer("lse", f32, "read");
  const dQ = k.buffer("dq", st, "write"), Dp = k.buffer("dpre", f32, "write");
  const pc = k.push(faPush(v.layout));
  const Ks = k.shared("Ks", "f32x4", BC * D4), Vs = k.shared("Vs", "f32x4", BC * D4);
  const tid = k.let(k.localIndex, "tid");
  const bh = k.let(k.workgroupId.y, "bh");
  const q0 = k.let(k.workgroupId.x.mul(FA_ROWS), "q0");
  const i = k.let(q0.add(tid), "qi");
  const hr = headRows(k, pc, bh, D, v.layout, "base4", 4);
  const valid = k.let(i.lt(pc.T), "valid");
  const qi = k.let(min(i, pc.T.sub(1)), "qrow");
  const row4 = k.let(hr.q.add(qi.mul(hr.ld)), "r4");
  // o and dO rows: the same offset in [BH, T, D]
  const orow4 = v.layout === "rows" ? k.let(hr.o.add(qi.mul(hr.ldo)), "or4") : row4;
  const q = Array.from({ length: D4 }, (_, d) => k.let(Q.loadVec(row4.add(d), 4).cast("f32x4").mul(pc.scale), "q"));
  const go = Array.from({ length: D4 }, (_, d) => k.let(dO.loadVec(orow4.add(d), 4).cast("f32x4"), "go"));
  const Di = k.let(dot(sumTree(go.map((g, d) => g.mul(O.loadVec(orow4.add(d), 4).cast("f32x4")))), ONES4()), "Di");
  const lse = k.let(L.load(bh.mul(pc.T).add(qi)), "lse");
  const acc = Array.from({ length: D4 }, (_, d) => k.var("f32x4", vecOf("f32x4", lit(f32, 0)), `dq${d}`));
  const lastKey = k.let(min(q0.add(FA_ROWS), pc.T), "kend");
  k.for(lit(u32, 0), lastKey, (k0) => {
    stageTile4(k, K, Ks, hr.k, hr.ld, k0, pc.T, D4, BC, tid);
    stageTile4(k, Vb, Vs, hr.v, hr.ld, k0, pc.T, D4, BC, tid);
    k.barrier();
    k.if(valid, () => {
      const jEnd = k.let(min(lit(u32, BC), i.add(1).sub(min(k0, i.add(1)))), "jend");
      k.for(lit(u32, 0), jEnd, (j) => {
        const row = k.let(j.mul(D4), "kr");
        const raw = k.let(dot(sumTree(q.map((qd, d) => qd.mul(Ks.load(row.add(d))))), ONES4()), "raw");
        const s = k.let(capScore(raw, pc.cap, v.softCap), "s");
        const p = k.let(exp(s.sub(lse)), "p");
        const capGrad = v.softCap ? k.let(lit(f32, 1).sub(s.div(pc.cap).mul(s.div(pc.cap))), "cg") : lit(f32, 1);
        const dp = dot(sumTree(go.map((g, d) => g.mul(Vs.load(row.add(d))))), ONES4());
        const ds = k.let(p.mul(dp.sub(Di)).mul(capGrad).mul(pc.scale), "ds");
        for (let d = 0; d < D4; d++) acc[d].set(acc[d].get().add(Ks.load(row.add(d)).mul(ds)));
      });
    });
    k.barrier();
  }, { step: BC });
  k.if(valid, () => {
    const vt = `${st}x4` as "f32x4";
    for (let d = 0; d < D4; d++) dQ.store(row4.add(d), acc[d].get().cast(vt));
    Dp.store(bh.mul(pc.T).add(i), Di);
  });
  return k.finish();
}

/** flash_bwd_dkdv with f32x4 tiles and registers (D % 4 == 0); same contract as flash_bwd_dkdv. */
export function flashBwdDkDvVec4Kernel(v: FlashVariant): KernelDesc {
  const { D } = v;
  const D4 = D / 4;
  const BC = faTile(D);
  const k = kernel(faName("flash_bwd_dkdv_v4", v), { workgroup: [FA_ROWS] });
  const st = storageOf(v.dtype);
  const Q = k.buffer("q", st, "read"), K = k.buffer("k", st, "read"), Vb = k.buffer("v", st, "read");
  const dO = k.buffer("do", st, "read"), L = k.buffer("lse", f32, "read"), Dp = k.buffer("dpre", f32, "read");
  const dK = k.buffer("dk", st, "write"), dV = k.buffer("dv", st, "write");
  const pc = k.push(faPush(v.layout));
  const Qs = k.shared("Qs", "f32x4", BC * D4), Gs = k.shared("Gs", "f32x4", BC * D4);
  const Ls = k.shared("Ls", f32, BC), Ds = k.shared("Ds", f32, BC);
  const tid = k.let(k.localIndex, "tid");
  const bh = k.let(k.workgroupId.y, "bh");
  const j0 = k.let(k.workgroupId.x.mul(FA_ROWS), "j0");
  const j = k.let(j0.add(tid), "kj");
  const hr = headRows(k, pc, bh, D, v.layout, "base4", 4);
  const valid = k.let(j.lt(pc.T), "valid");
  const kj = k.let(min(j, pc.T.sub(1)), "krow");
  const row4 = k.let(hr.k.add(kj.mul(hr.ld)), "r4");
  // v's row: the same offset in [BH, T, D]
  const vrow4 = v.layout === "rows" ? k.let(hr.v.add(kj.mul(hr.ld)), "vr4") : row4;
  const kr = Array.from({ length: D4 }, (_, d) => k.let(K.loadVec(row4.add(d), 4).cast("f32x4"), "kk"));
  const vr = Array.from({ length: D4 }, (_, d) => k.let(Vb.loadVec(vrow4.add(d), 4).cast("f32x4"), "vv"));
  const accK = Array.from({ length: D4 }, (_, d) => k.var("f32x4", vecOf("f32x4", lit(f32, 0)), `dk${d}`));
  const accV = Array.from({ length: D4 }, (_, d) => k.var("f32x4", vecOf("f32x4", lit(f32, 0)), `dv${d}`));
  k.for(j0.sub(j0.rem(BC)), pc.T, (i0) => {
    stageTile4(k, Q, Qs, hr.q, hr.ld, i0, pc.T, D4, BC, tid);
    stageTile4(k, dO, Gs, hr.o, hr.ldo, i0, pc.T, D4, BC, tid);
    k.if(tid.lt(BC), () => {
      const gi = k.let(min(i0.add(tid), pc.T.sub(1)), "gi");
      Ls.store(tid, L.load(bh.mul(pc.T).add(gi)));
      Ds.store(tid, Dp.load(bh.mul(pc.T).add(gi)));
    });
    k.barrier();
    k.if(valid, () => {
      const iEnd = k.let(min(lit(u32, BC), pc.T.sub(i0)), "iend");
      k.for(lit(u32, 0), iEnd, (ii) => {
        const gi = k.let(i0.add(ii), "gq");
        k.if(gi.ge(j), () => {
          const row = k.let(ii.mul(D4), "qr");
          const raw = dot(sumTree(kr.map((kd, d) => Qs.load(row.add(d)).mul(kd))), ONES4());
          const s = k.let(capScore(raw.mul(pc.scale), pc.cap, v.softCap), "s");
          const p = k.let(exp(s.sub(Ls.load(ii))), "p");
          const capGrad = v.softCap ? k.let(lit(f32, 1).sub(s.div(pc.cap).mul(s.div(pc.cap))), "cg") : lit(f32, 1);
          const dp = dot(sumTree(vr.map((vd, d) => Gs.load(row.add(d)).mul(vd))), ONES4());
          const ds = k.let(p.mul(dp.sub(Ds.load(ii))).mul(capGrad).mul(pc.scale), "ds");
          for (let d = 0; d < D4; d++) {
            accV[d].set(accV[d].get().add(Gs.load(row.add(d)).mul(p)));
            accK[d].set(accK[d].get().add(Qs.load(row.add(d)).mul(ds)));
          }
        });
      });
    });
    k.barrier();
  }, { step: BC });
  k.if(valid, () => {
    const vt = `${st}x4` as "f32x4";
    for (let d = 0; d < D4; d++) {
      dK.store(row4.add(d), accK[d].get().cast(vt));
      dV.store(vrow4.add(d), accV[d].get().cast(vt));
    }
  });
  return k.finish();
}
