// A representative cooperative-matrix matmul written in the IR: the compile-cost benchmark's
// "coopmat matmul" and the subject of bench/coop-tests.ts. Not the tuned production kernel
// (that is issue 5's, in ts/kernels/); it exists to prove the IR expresses one and to measure it.
//
// Contract: C[M,N] (f32 or f16) = A[M,K] · B[K,N], all row-major, elements A/B in `elem`.
// Bindings: 0 a (read), 1 b (read), 2 c (write). Push: m, n, k (u32).
// Dispatch: [ceil(N/64), ceil(M/64)] workgroups of 128 invocations (4 subgroups of 32).
// Each workgroup computes a 64x64 tile; each subgroup a 32x32 quarter as 2x2 16x16x16
// accumulators. K is walked in 32-wide tiles staged in shared memory, double buffered (one
// barrier per k-tile), rows padded by 8 elements to spread shared-memory banks. Edge tiles are
// zero-filled on load and stored through a per-subgroup f32 scratch with bounds checks.
import { coopmat, kernel, lit, u32, type KernelDesc } from "../ts/ir/index.js";

export interface CoopMatmulOptions {
  elem: "f16" | "bf16";
  acc: "f32" | "f16";
}

const BM = 64, BN = 64, BK = 32, PAD = 8;
const SA = BK + PAD; // shared A row stride (elements)
const SB = BN + PAD; // shared B row stride

export function coopMatmulSample(o: CoopMatmulOptions = { elem: "f16", acc: "f32" }): KernelDesc {
  const k = kernel(`sample_coop_matmul_${o.elem}_${o.acc}`, { workgroup: [128], subgroupSize: 32 });
  const A = k.buffer("a", o.elem, "read");
  const B = k.buffer("b", o.elem, "read");
  const C = k.buffer("c", o.acc, "write");
  const { m, n, k: K } = k.push({ m: u32, n: u32, k: u32 });
  const sa = k.shared("sa", o.elem, 2 * BM * SA);
  const sb = k.shared("sb", o.elem, 2 * BK * SB);
  const scratch = k.shared("scratch", o.acc, 4 * 256);
  const ta = coopmat("a", o.elem, 16, 16), tb = coopmat("b", o.elem, 16, 16), tc = coopmat("acc", o.acc, 16, 16);

  const t = k.let(k.localIndex, "t");
  const sg = k.let(k.subgroupId, "sg");
  const row0 = k.let(k.workgroupId.y.mul(BM), "row0");
  const col0 = k.let(k.workgroupId.x.mul(BN), "col0");
  const sgRow = k.let(sg.shr(1).mul(32), "sg_row");
  const sgCol = k.let(sg.band(1).mul(32), "sg_col");
  const zero = lit(o.elem, 0);

  const acc = k.array(tc, 4, "acc");
  k.for(0, 4, (q) => acc.set(q, k.cmFill(tc, 0)), { unroll: true });

  // Global -> shared copy of k-tile `kt` into buffer `buf`, zero-filled past the edges.
  const loadTile = (kt: ReturnType<typeof k.let>, buf: ReturnType<typeof k.let>) => {
    k.for(0, (BM * BK) / 128, (q) => {
      const e = k.let(q.mul(128).add(t), "ea");
      const r = k.let(e.shr(5), "ra"), c = k.let(e.band(BK - 1), "ca");
      const gr = k.let(row0.add(r), "gra"), gc = k.let(kt.mul(BK).add(c), "gca");
      const v = k.var(o.elem, zero, "va");
      k.if(gr.lt(m).and(gc.lt(K)), () => v.set(A.load(gr.mul(K).add(gc))));
      sa.store(buf.mul(BM * SA).add(r.mul(SA)).add(c), v.get());
    }, { unroll: true });
    k.for(0, (BK * BN) / 128, (q) => {
      const e = k.let(q.mul(128).add(t), "eb");
      const r = k.let(e.shr(6), "rb"), c = k.let(e.band(BN - 1), "cb");
      const gr = k.let(kt.mul(BK).add(r), "grb"), gc = k.let(col0.add(c), "gcb");
      const v = k.var(o.elem, zero, "vb");
      k.if(gr.lt(K).and(gc.lt(n)), () => v.set(B.load(gr.mul(n).add(gc))));
      sb.store(buf.mul(BK * SB).add(r.mul(SB)).add(c), v.get());
    }, { unroll: true });
  };

  const nk = k.let(K.add(BK - 1).div(BK), "nk");
  loadTile(k.let(lit(u32, 0), "kt0"), k.let(lit(u32, 0), "buf0"));
  k.barrier();
  k.for(0, nk, (kt) => {
    const cur = k.let(kt.band(1), "cur");
    k.if(kt.add(1).lt(nk), () => loadTile(k.let(kt.add(1), "ktn"), k.let(cur.bxor(1), "nxt")));
    k.for(0, BK / 16, (kk) => {
      const aBase = k.let(cur.mul(BM * SA).add(sgRow.mul(SA)).add(kk.mul(16)), "abase");
      const bBase = k.let(cur.mul(BK * SB).add(kk.mul(16).mul(SB)).add(sgCol), "bbase");
      const a0 = sa.cmLoad(ta, aBase, SA, "row"), a1 = sa.cmLoad(ta, aBase.add(16 * SA), SA, "row");
      const b0 = sb.cmLoad(tb, bBase, SB, "row"), b1 = sb.cmLoad(tb, bBase.add(16), SB, "row");
      acc.set(0, k.cmMulAdd(a0, b0, acc.at(0)));
      acc.set(1, k.cmMulAdd(a0, b1, acc.at(1)));
      acc.set(2, k.cmMulAdd(a1, b0, acc.at(2)));
      acc.set(3, k.cmMulAdd(a1, b1, acc.at(3)));
    }, { unroll: true });
    k.barrier();
  });

  // Epilogue: full tiles store straight to C; edge tiles go through scratch with bounds checks.
  k.for(0, 4, (q) => {
    const r = k.let(row0.add(sgRow).add(q.shr(1).mul(16)), "er");
    const c = k.let(col0.add(sgCol).add(q.band(1).mul(16)), "ec");
    k.if(r.add(16).le(m).and(c.add(16).le(n)), () => {
      C.cmStore(acc.at(q), r.mul(n).add(c), n, "row");
    }, () => {
      const base = k.let(sg.mul(256), "sbase");
      scratch.cmStore(acc.at(q), base, 16, "row");
      k.barrier({ scope: "subgroup", mem: ["workgroup"] });
      k.for(k.subgroupInvocation, 256, (e) => {
        const gr = k.let(r.add(e.shr(4)), "egr"), gc = k.let(c.add(e.band(15)), "egc");
        k.if(gr.lt(m).and(gc.lt(n)), () => C.store(gr.mul(n).add(gc), scratch.load(base.add(e))));
      }, { step: 32 });
      k.barrier({ scope: "subgroup", mem: ["workgroup"] });
    });
  }, { unroll: true });
  return k.finish();
}


/**
 * The same contract (f16 in, f32 out, 64x64 tiles, same dispatch) with VK_NV_cooperative_matrix2:
 * workgroup-scope 64x64 matrices loaded straight from global memory through tensor layouts,
 * which bounds-check edge tiles (zero fill on load, clipped store), so there is no edge path.
 */
export function coop2MatmulSample(): KernelDesc {
  const k = kernel("sample_coop2_matmul_f16_f32", { workgroup: [128] });
  const A = k.buffer("a", "f16", "read");
  const B = k.buffer("b", "f16", "read");
  const C = k.buffer("c", "f32", "write");
  const { m, n, k: K } = k.push({ m: u32, n: u32, k: u32 });
  const ta = coopmat("a", "f16", BM, 16, "workgroup");
  const tb = coopmat("b", "f16", 16, BN, "workgroup");
  const tc = coopmat("acc", "f32", BM, BN, "workgroup");
  const r0 = k.let(k.workgroupId.y.mul(BM), "r0");
  const c0 = k.let(k.workgroupId.x.mul(BN), "c0");
  const acc = k.var(tc, k.cmFill(tc, 0), "acc");
  k.for(0, K, (kk) => {
    const a = A.cmLoad(ta, 0, K, "row", { dims: [m, K], at: [r0, kk] });
    const b = B.cmLoad(tb, 0, n, "row", { dims: [K, n], at: [kk, c0] });
    acc.set(k.cmMulAdd(a, b, acc.get()));
  }, { step: 16 });
  C.cmStore(acc.get(), 0, n, "row", { dims: [m, n], at: [r0, c0] });
  return k.finish();
}
