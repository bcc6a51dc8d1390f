// SIMT tiled matmul (no tensor cores): the f32-exact path and the fallback on devices without
// cooperative matrices (lavapipe).
//
// Contract
//   bindings  0 A (read), 1 B (read), 2 C (write; f32 workspace under split-K),
//             then the epilogue's bias, residual and preact (read; common.ts epilogueRoles) when
//             it uses them (not under split-K)
//   push      PUSH_FIELDS (common.ts)
//   dispatch  [ceil(N/bn), ceil(M/bm), batch·splits], workgroup 256 or 128 = (bm/tm)·(bn/tn)
// Each workgroup computes a bm×bn tile of C; each thread a tm×tn register block (tm/4 4-row and
// tn/4 4-column strips spread evenly over the tile, so shared-memory reads are f32x4 broadcasts
// without bank conflicts). K advances in bk-deep shared tiles, double-buffered with a register
// prefetch of one or two f32x4 per operand and thread: one barrier per k-tile. The prefetch goes
// to shared memory after the k-steps, or halfway through them (`stageMid`: the stage being written
// was last read before the previous barrier; H100 4096³ +10 %). Where the tiles divide M, N and K
// (`aligned`) loads and stores skip their bounds checks (+13 %). Shared tiles are k-major f32x4
// rows padded by one vec4 so the transposing stores of k-contiguous operands do not conflict.
// Inputs of f16 are widened to f32 on load; accumulation is f32 (exact f32 path: relative error
// ~1e-6 against fp64).
import {
  f32, fma, kernel, select, vecOf, type Buffer, type Expr, type KernelBuilder, type KernelDesc,
  type Var,
} from "../../ir/index.js";
import { applyEpilogue, epilogueBuffers, PUSH_FIELDS, type EpilogueRefs, read, tileOrigin, epilogueTag, isPlainEpilogue } from "./common.js";
import type { NormalizedProblem } from "./problem.js";

export interface SimtConfig {
  bm: 64 | 128;
  bn: 64 | 128;
  tm: 4 | 8 | 16;
  tn: 4 | 8 | 16;
  /** Workgroup size: 256 (the default) or 128 (then 8-deep k-tiles, whatever bm). */
  threads?: 128 | 256;
  /** 128-bit loads of the operand's contiguous dimension (needs it % 4 == 0, f32 only). */
  vecA: boolean;
  vecB: boolean;
  /** f32x4 stores of C (needs N % 4 == 0 and f32 output). */
  vecOut: boolean;
  /** Tiles divide M, N and K: staging loads and output stores without bounds checks (`_al`). */
  aligned?: boolean;
  /** The next k-tile goes to shared memory halfway through the k-steps, not after them (`_sm`). */
  stageMid?: boolean;
}

export function simtThreads(c: Pick<SimtConfig, "threads">): number {
  return c.threads ?? 256;
}

export function simtBk(c: Pick<SimtConfig, "bm" | "threads">): number {
  return c.threads === 128 ? 8 : (256 * 4) / c.bm;
}

export function simtName(p: NormalizedProblem, c: SimtConfig, split: boolean): string {
  const t = `${p.transA ? "T" : "N"}${p.transB ? "T" : "N"}`;
  const vec = `${c.vecA ? "a4" : ""}${c.vecB ? "b4" : ""}${c.vecOut ? "c4" : ""}`;
  const v = [vec, c.aligned ? "al" : "", c.stageMid ? "sm" : ""].filter((x) => x).join("_");
  const epi = split ? "_split" : epilogueTag(p);
  const wg = c.threads === 128 ? "_t128" : "";
  return `mm_simt_${p.dtype}_${p.outDtype}_${c.bm}x${c.bn}x${simtBk(c)}_${c.tm}x${c.tn}${wg}_${t}${v ? "_" + v : ""}${epi}`;
}

interface OperandTile {
  buf: Buffer;
  /** Whether the operand's contiguous dimension is the tile's X (M for A, N for B). */
  contigX: boolean;
  vec: boolean;
  /** X extent (M or N), leading dimension, batch base. */
  xLimit: Expr;
  ld: Expr;
  base: Expr;
  x0: Expr;
  bx: number;
  aligned?: boolean;
}

/** Slot `slot`'s 4 X-consecutive elements at one k of the next tile, as f32x4 (zeros outside). */
function loadSlot(k: KernelBuilder, o: OperandTile, slot: Expr, k0: Expr, kEnd: Expr, bk: number): { v: Expr; kk: Expr; x4: Expr } {
  const bx4 = o.bx / 4;
  let kk: Expr, x4: Expr;
  if (o.contigX) {
    kk = k.let(slot.div(bx4), "kk");
    x4 = k.let(slot.rem(bx4), "x4");
  } else {
    kk = k.let(slot.rem(bk), "kk");
    x4 = k.let(slot.div(bk), "x4");
  }
  // aligned: whole tiles, but the prefetch after the last k-tile must still stay inside K
  const gk = k.let(o.aligned ? k0.add(kk).min(kEnd.sub(1)) : k0.add(kk), "gk");
  const gx = k.let(o.x0.add(x4.mul(4)), "gx");
  const offset = (x: Expr) => (o.contigX ? gk.mul(o.ld).add(x) : x.mul(o.ld).add(gk));
  const vecIndex = () => o.base.add(gk.mul(o.ld)).add(gx).div(4);
  if (o.aligned) {
    if (o.contigX && o.vec) return { v: k.let(o.buf.loadVec(vecIndex(), 4).cast("f32x4"), "ld4"), kk, x4 };
    const parts = [0, 1, 2, 3].map((i) => o.buf.load(o.base.add(offset(gx.add(i)))).cast(f32));
    return { v: k.let(vecOf("f32x4", ...parts), "ld4"), kk, x4 };
  }
  // out-of-range elements read index 0 and become zeros
  const kOk = k.let(gk.lt(kEnd), "kok");
  if (o.contigX && o.vec) {
    const ok = k.let(kOk.and(gx.lt(o.xLimit)), "ok");
    const v = o.buf.loadVec(k.let(select(ok, vecIndex(), 0), "vi"), 4);
    return { v: k.let(select(ok, v.cast("f32x4"), vecOf("f32x4", 0)), "ld4"), kk, x4 };
  }
  const parts: Expr[] = [];
  for (let i = 0; i < 4; i++) {
    const x = k.let(gx.add(i), "x");
    const ok = k.let(kOk.and(x.lt(o.xLimit)), "ok");
    const idx = k.let(select(ok, o.base.add(offset(x)), 0), "si");
    parts.push(select(ok, o.buf.load(idx).cast(f32), 0));
  }
  return { v: k.let(vecOf("f32x4", ...parts), "ld4"), kk, x4 };
}

export function simtKernel(p: NormalizedProblem, c: SimtConfig, split: boolean): KernelDesc {
  if (c.bm !== c.bn) throw new Error("simt: bm must equal bn");
  if (p.dtype === "bf16") throw new Error("simt: bf16 inputs need the cooperative-matrix path");
  const threads = simtThreads(c);
  if ((c.bm / c.tm) * (c.bn / c.tn) !== threads) throw new Error(`simt: a ${c.bm}x${c.bn} tile of ${c.tm}x${c.tn} blocks is not ${threads} threads`);
  const bk = simtBk(c);
  // f32x4 slots each thread stages per operand and k-tile
  const slotsPerThread = (bk * c.bm) / 4 / threads;
  if (!Number.isInteger(slotsPerThread) || slotsPerThread < 1) throw new Error(`simt: ${bk}x${c.bm} k-tiles do not split over ${threads} threads`);
  const k = kernel(simtName(p, c, split), { workgroup: [threads] });
  const A = k.buffer("a", p.dtype, "read");
  const B = k.buffer("b", p.dtype, "read");
  const C = k.buffer("c", split ? "f32" : p.outDtype, "write");
  const e = p.epilogue;
  const epi = split ? {} : epilogueBuffers(k, p);
  const pc = k.push(PUSH_FIELDS);
  const bx4 = c.bm / 4 + 1; // padded f32x4 row
  const tileVec4 = bk * bx4;
  const As = k.shared("as", "f32x4", 2 * tileVec4);
  const Bs = k.shared("bs", "f32x4", 2 * tileVec4);

  const wg = k.let(k.workgroupId, "wg");
  const lid = k.let(k.localIndex, "lid");
  const z = k.let(wg.z, "z");
  const bt = k.let(z.div(pc.splits), "bt");
  const sp = k.let(z.rem(pc.splits), "sp");
  const kBeg = k.let(sp.mul(pc.kChunk), "kbeg");
  const kEnd = k.let(kBeg.add(pc.kChunk).min(pc.k), "kend");
  const { row0, col0 } = tileOrigin(k, wg, c.bm, c.bn);
  const nt = k.let(kEnd.sub(kBeg.min(kEnd)).add(bk - 1).div(bk), "nt");

  const opA: OperandTile = {
    buf: A, contigX: p.transA, vec: c.vecA, xLimit: pc.m, ld: p.transA ? pc.m : pc.k,
    base: k.let(bt.mul(pc.strideA), "abase"), x0: row0, bx: c.bm, aligned: c.aligned,
  };
  const opB: OperandTile = {
    buf: B, contigX: !p.transB, vec: c.vecB, xLimit: pc.n, ld: p.transB ? pc.k : pc.n,
    base: k.let(bt.mul(pc.strideB), "bbase"), x0: col0, bx: c.bn, aligned: c.aligned,
  };

  const slotIds = Array.from({ length: slotsPerThread }, (_, r) => (r === 0 ? "" : `${r}`));
  const ra = slotIds.map((r) => k.var("f32x4", vecOf("f32x4", 0), `ra${r}`));
  const rb = slotIds.map((r) => k.var("f32x4", vecOf("f32x4", 0), `rb${r}`));
  // this thread's staging slots, the same for every k-tile
  const slotIdx = slotIds.map((_, r) => (r === 0 ? lid : k.let(lid.add(r * threads), "slot")));
  const stageLoad = (k0: Expr) => {
    const sa: Expr[] = [];
    const sb: Expr[] = [];
    for (let r = 0; r < slotsPerThread; r++) {
      const slot = slotIdx[r];
      const la = loadSlot(k, opA, slot, k0, kEnd, bk);
      ra[r].set(la.v);
      const lb = loadSlot(k, opB, slot, k0, kEnd, bk);
      rb[r].set(lb.v);
      sa.push(k.let(la.kk.mul(bx4).add(la.x4), `sa${slotIds[r]}`));
      sb.push(k.let(lb.kk.mul(bx4).add(lb.x4), `sb${slotIds[r]}`));
    }
    return { sa, sb };
  };
  const storeStage = (base: Expr | null, s: { sa: Expr[]; sb: Expr[] }) => {
    for (let r = 0; r < slotsPerThread; r++) {
      As.store(base ? base.add(s.sa[r]) : s.sa[r], read(ra[r]));
      Bs.store(base ? base.add(s.sb[r]) : s.sb[r], read(rb[r]));
    }
  };
  const slots = stageLoad(kBeg);
  storeStage(null, slots);
  k.barrier();

  const tx = k.let(lid.rem(c.bn / c.tn), "tx");
  const ty = k.let(lid.div(c.bn / c.tn), "ty");
  const rowsV = c.tm / 4; // f32x4 strips of rows (1, 2 or 4), spread evenly over the tile
  const colsV = c.tn / 4;
  const rowStrip = c.bm / rowsV;
  const colStrip = c.bn / colsV;
  const acc: Var[][] = [];
  for (let i = 0; i < c.tm; i++) {
    acc.push([]);
    for (let j = 0; j < colsV; j++) acc[i].push(k.var("f32x4", vecOf("f32x4", 0), `acc${i}_${j}`));
  }

  k.for(0, nt, (t) => {
    const cur = k.let(t.band(1).mul(tileVec4), "cur");
    const nxt = k.let(t.add(1).band(1).mul(tileVec4), "nxt");
    stageLoad(kBeg.add(t.add(1).mul(bk)));
    for (let kk = 0; kk < bk; kk++) {
      // nxt was last read before the previous barrier: it may be written at any step
      if (c.stageMid && kk === bk / 2) storeStage(nxt, slots);
      const av: Expr[] = [];
      for (let s = 0; s < rowsV; s++) av.push(As.load(cur.add(kk * bx4 + s * (rowStrip / 4)).add(ty)));
      const bv: Expr[] = [];
      for (let s = 0; s < colsV; s++) bv.push(Bs.load(cur.add(kk * bx4 + s * (colStrip / 4)).add(tx)));
      for (let i = 0; i < c.tm; i++) {
        const a = av[i >> 2].swz("xyzw"[i & 3]);
        const asplat = vecOf("f32x4", a);
        for (let j = 0; j < colsV; j++) acc[i][j].set(fma(asplat, bv[j], read(acc[i][j])));
      }
    }
    if (!c.stageMid) storeStage(nxt, slots);
    k.barrier();
  }, { name: "t" });

  const refs: EpilogueRefs = { scale: pc.scale, ...epi, dtype: p.outDtype };
  const cBase = k.let(split ? sp.mul(pc.batch).add(bt).mul(pc.strideC) : bt.mul(pc.strideC), "cbase");
  // whole tiles store unchecked
  const guard = (inBounds: Expr, body: () => void) => (c.aligned ? body() : k.if(inBounds, body));
  for (let i = 0; i < c.tm; i++) {
    const r = (i >> 2) * rowStrip + (i & 3);
    const grow = k.let(row0.add(ty.mul(4)).add(r), "grow");
    guard(grow.lt(pc.m), () => {
      for (let j = 0; j < colsV; j++) {
        const gcol = k.let(col0.add(tx.mul(4)).add(j * colStrip), "gcol");
        const v = read(acc[i][j]);
        const rowBase = k.let(cBase.add(grow.mul(pc.n)), "rb");
        if (c.vecOut && (split || isPlainEpilogue(e))) {
          guard(gcol.lt(pc.n), () => C.store(rowBase.add(gcol).div(4), v));
          continue;
        }
        for (let q = 0; q < 4; q++) {
          const col = k.let(gcol.add(q), "col");
          guard(col.lt(pc.n), () => {
            const oi = k.let(rowBase.add(col), "oi");
            const y = split ? v.swz("xyzw"[q]) : applyEpilogue(k, p, refs, v.swz("xyzw"[q]), col, oi);
            C.store(oi, split ? y : y.cast(p.outDtype));
          });
        }
      }
    });
  }
  return k.finish();
}
