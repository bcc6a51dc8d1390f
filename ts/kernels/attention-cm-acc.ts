// Causal flash attention forward on KHR cooperative matrices (16x16x16 f16 -> f32) with the
// output kept in accumulators: flash_fwd's contract (bindings q, k, v, o, lse; FA_PUSH) for f16
// tensors with D % 16 == 0, D <= 64, T % rows == 0, on 32-wide subgroups.
//
// Dispatch: [T / rows, BH] with rows = 16 * rb * nsg, 32 * nsg threads; workgroup x = 0 takes the
//   last query block (the most key tiles), so the long blocks start first and the tail is short.
//   Subgroup s owns rb blocks of 16 query rows from q0 + 16 rb s; every K or V fragment it reads
//   from shared memory feeds one MMA per block.
// Per tile of bc keys (64 or 32): K and V (f16, rows padded by 8 halves) staged in shared memory
//   through 64-bit vector copies; with 2 stages the next tile is loaded into registers before the
//   math and stored into the other stage after it, so one workgroup barrier per tile. S = Q K^T is
//   rb x bc/16 x D/16 products (Q fragments stay in registers); the softmax works on accumulator
//   elements, which needs no knowledge of their lane layout:
//   - row-wise values (running max, rescale factor, l) are *broadcast matrices*: a 16x16
//     accumulator whose element (r, c) is the value of row r, loaded from a shared tile;
//   - lazy rescaling: scores are in log2 units, M is a stale running max per row and P =
//     exp2(S - M). Only when some element of the subgroup exceeds M by more than TAU (P > 2^TAU)
//     does the subgroup take the slow path (shared memory): new row maxima, O and l scaled by
//     exp2(M_old - M_new). The first tile always does. O / l is exact whatever M is, because the
//     numerator and l use the same M; lse = M ln 2 + ln l;
//   - l is accumulated element-wise in an accumulator (partial row sums per column), reduced once
//     at the end through shared memory;
//   - the causal mask (diagonal fragments only) is an element-wise add of a 0 / -inf triangle.
//   P (acc f32) becomes the A operand of P V in registers when the accumulator and A layouts
//   match element for element (checked once at start with index matrices: true on NVIDIA, where
//   both follow mma.m16n8k16's fragment layout), otherwise through a per-subgroup f16 tile.
// Numerics: scores, softmax and l in f32; P rounded to f16 for P V (as FlashAttention does); P <=
//   2^TAU = 256 keeps it well inside f16 range.
import {
  coopmat, exp2, f16, f32, fma, kernel, lit, log, max,
  type CoopMatType, type Expr, type KernelDesc, type Shared,
} from "../ir/index.js";
import { safeTanh } from "./common.js";
import { FA_PUSH } from "./attention.js";
import {
  CM, accToOperands, causalTriangle, elements, laneLayout, splitElement, splitMma, streamTiles, tileStager, type HalfType,
} from "./attention-cm-parts.js";
/** Rescale threshold in log2 units: P = exp2(S - M_stale) stays <= 2^TAU. */
const TAU = 8;
const LOG2E = Math.LOG2E;
const NEG_BIG = -1e30;

export interface FlashCmAccVariant {
  readonly D: number;
  readonly softCap: boolean;
  /** Subgroups per workgroup (16 query rows each). */
  readonly nsg: 4 | 8;
  /** K/V shared stages: 2 = double-buffered (one barrier per tile). */
  readonly stages: 1 | 2;
  /** 16-row blocks per subgroup (default 1): with 2, each K/V fragment read feeds two MMAs. */
  readonly rb?: 1 | 2;
  /** Keys per tile (default 64); 32 halves S, P and the K/V prefetch registers. */
  readonly bc?: 32 | 64;
  /** Always convert P through shared memory (the fallback path; for tests and timing). */
  readonly pShared?: boolean;
  /** 128-bit K/V copies (u32x4: 8 halves per load and per shared store) instead of 64-bit. */
  readonly v128?: boolean;
  /** On the diagonal tile, skip the S and P V products (and exps) of fragments wholly above it. */
  readonly skipMasked?: boolean;
  /**
   * Longest first across all heads: workgroups are numbered x-fastest and take query blocks
   * from the last (most key tiles) down, every head's block before the next shorter one; without
   * it the order is longest-first within each head only.
   */
  readonly lpt?: boolean;
  /**
   * f32 attention at f32 accuracy (x3): q, k, v arrive split into bf16 high and low parts (one
   * binding each: the high parts of all heads, then the low parts; ts/ops/attention.ts splits),
   * every product runs as hi·hi + hi·lo + lo·hi (P split the same way in registers), and o is f32.
   */
  readonly split?: boolean;
}

type Shape = Pick<FlashCmAccVariant, "D" | "nsg" | "stages" | "rb" | "bc" | "v128" | "split">;

export const DEFAULT_FLASH_CM_ACC: Pick<FlashCmAccVariant, "nsg" | "stages"> = { nsg: 4, stages: 2 };

export function flashCmAccRows(v: Pick<FlashCmAccVariant, "nsg" | "rb">): number {
  return CM * (v.rb ?? 1) * v.nsg;
}

/** Shared bytes: K and V stages (16-bit, padded rows; hi and lo when split), per-subgroup f32 stage and 16-bit P tile. */
export function flashCmAccSharedBytes(v: Shape): number {
  return (v.split ? 2 : 1) * 2 * v.stages * (v.bc ?? 64) * (v.D + 8) * 2 + v.nsg * 256 * 4 + v.nsg * 256 * 2;
}

/** Whether this kernel serves the problem on this device. */
export function flashCmAccApplies(
  info: { coopMatSupported?: boolean; subgroupSize: number; maxSharedMemoryBytes?: number },
  v: Shape, dtype: string, T: number,
): boolean {
  return !!info.coopMatSupported && info.subgroupSize === 32 && dtype === (v.split ? "f32" : "f16") &&
    (info.maxSharedMemoryBytes ?? 49152) >= flashCmAccSharedBytes(v) &&
    T % flashCmAccRows(v) === 0 && v.D % CM === 0 && v.D <= 64;
}

export function flashCmAccName(v: FlashCmAccVariant): string {
  const opts = `${v.pShared ? "_psh" : ""}${v.v128 ? "_v128" : ""}${v.skipMasked ? "_skip" : ""}${v.lpt ? "_lpt" : ""}`;
  return `flash_fwd_cmacc_${v.split ? "x3" : "f16"}_d${v.D}_w${v.nsg}_s${v.stages}_r${v.rb ?? 1}_k${v.bc ?? 64}${opts}${v.softCap ? "_cap" : ""}`;
}


export function flashFwdCmAccKernel(v: FlashCmAccVariant): KernelDesc {
  const { D, nsg, stages } = v;
  const RB = v.rb ?? 1, BC = v.bc ?? 64, NF = BC / CM;
  if (D % CM !== 0 || D > 64) throw new Error(`flash_fwd_cmacc: D=${D} must be a multiple of 16, at most 64`);
  const DC = D / CM, LD = D + 8, ROWS = CM * RB * nsg, THREADS = 32 * nsg;
  if (ROWS % BC !== 0) throw new Error(`flash_fwd_cmacc: ${ROWS} rows per workgroup is not a multiple of ${BC}-key tiles`);
  const TILE = BC * LD;
  // copy width in halves: 4 (f16x4, 64-bit) or 8 (u32x4 raw bits, 128-bit)
  const VW = v.v128 ? 8 : 4;
  const blocks = Array.from({ length: RB }, (_, b) => b);
  const frags = Array.from({ length: NF }, (_, j) => j);
  const split = !!v.split;
  const el: HalfType = split ? "bf16" : "f16";
  const tA: CoopMatType = coopmat("a", el, CM, CM);
  const tB: CoopMatType = coopmat("b", el, CM, CM);
  const tC: CoopMatType = coopmat("acc", "f32", CM, CM);
  const tC16: CoopMatType = coopmat("acc", "f16", CM, CM);
  const k = kernel(flashCmAccName(v), { workgroup: [THREADS] });
  const Q = k.buffer("q", el, "read"), K = k.buffer("k", el, "read"), V = k.buffer("v", el, "read");
  const O = k.buffer("o", split ? f32 : f16, "write"), L = k.buffer("lse", f32, "write");
  const pc = k.push(FA_PUSH);
  const Kg = v.v128 ? K.as("u32", 4) : K.as(el, 4), Vg = v.v128 ? V.as("u32", 4) : V.as(el, 4);
  // With 128-bit copies the tiles are u32x4 arrays (the IR loads fragments through an array's
  // widest view); offsets and strides below are in halves and divided by VW at each use.
  const tile = (name: string) => (v.v128 ? k.shared(name, "u32x4", (stages * TILE) / 8) : k.shared(name, el, stages * TILE));
  const Ks = tile("Ks"), Vs = tile("Vs");
  const KsV = v.v128 ? Ks : Ks.vec(4), VsV = v.v128 ? Vs : Vs.vec(4);
  // split: the low parts' tiles (null otherwise)
  const KsL = split ? tile("KsL") : null, VsL = split ? tile("VsL") : null;
  const KsLV = KsL && (v.v128 ? KsL : KsL.vec(4)), VsLV = VsL && (v.v128 ? VsL : VsL.vec(4));
  const st = k.shared("st", f32, nsg * 256);
  const pt = k.shared("pt", el, nsg * 256);
  const sgSync = () => k.barrier({ scope: "subgroup", mem: ["workgroup"] });

  const tid = k.let(k.localIndex, "tid");
  const sg = k.let(k.subgroupId, "sg");
  const lane = k.let(k.subgroupInvocation, "lane");
  const r = k.let(lane.shr(1), "r");
  const h8 = k.let(lane.band(1).mul(8), "h8");
  const nqb = k.let(pc.T.div(ROWS), "nqb");
  // lpt: linear workgroup id L = x + y nqb; block rank L / BH (0 = last block), head L % BH
  const lin = v.lpt ? k.let(k.workgroupId.x.add(k.workgroupId.y.mul(nqb)), "lin") : undefined;
  const bh = k.let(lin ? lin.rem(k.numWorkgroups.y) : k.workgroupId.y, "bh");
  const rank = lin ? lin.div(k.numWorkgroups.y) : k.workgroupId.x;
  const q0 = k.let(nqb.sub(1).sub(rank).mul(ROWS), "q0");
  const base = k.let(bh.mul(pc.T).mul(D), "base");
  const rf = k.let(q0.add(sg.mul(CM * RB)), "rf");
  /** First query row of each of the subgroup's 16-row blocks. */
  const rb0 = blocks.map((b) => k.let(rf.add(b * CM), `rf${b}`));
  const stOff = k.let(sg.mul(256), "stoff");
  const rowOff = k.let(stOff.add(r.mul(CM)).add(h8), "rowoff");
  // Without softCap S stays unscaled and log2 units come in with the exponent's fma:
  // exp2(S c - M) = exp2(fma(S, c, -M)); with it, S is capped and scaled in place.
  const c2 = k.let(v.softCap ? pc.scale.div(pc.cap) : pc.scale.mul(LOG2E), "c2");
  const toLog2 = (x: Expr) => (v.softCap ? x : x.mul(c2));
  const minusM = (x: Expr, m: Expr) => (v.softCap ? x.sub(m) : fma(x, c2, m.neg()));
  const capL = k.let(pc.cap.mul(LOG2E), "capl");

  const { regP, idxC } = laneLayout(k, { tA, tC, st, pt, tid, threads: THREADS, forceShared: v.pShared, el });
  // split: the low parts start after the high parts of all BH heads
  const loOff = split ? k.let(k.numWorkgroups.y.mul(pc.T).mul(D), "looff") : null;
  const tri = causalTriangle(k, tC, idxC, "above");

  const qFrags = (at: Expr, tag: string) =>
    blocks.map((b) => Array.from({ length: DC }, (_, d) => k.let(Q.cmLoad(tA, at.add(rb0[b].mul(D)).add(d * CM), D, "row"), `${tag}${b}${d}`)));
  const qa = qFrags(base, "qa");
  const qaL = loOff ? qFrags(base.add(loOff), "qal") : null;
  const o = blocks.map((b) => Array.from({ length: DC }, (_, d) => k.var(tC, k.cmFill(tC, 0), `o${b}${d}`)));
  const lsum = blocks.map((b) => k.var(tC, k.cmFill(tC, 0), `lsum${b}`));
  const mb = blocks.map((b) => k.var(tC, k.cmFill(tC, NEG_BIG), `mb${b}`));
  /** Row r's M (what mb broadcasts), held by both lanes of the pair that owns row r. */
  const mrow = blocks.map((b) => k.var(f32, NEG_BIG, `mrow${b}`));
  const s = blocks.map((b) => frags.map((j) => k.var(tC, k.cmFill(tC, 0), `s${b}${j}`)));
  const pa = blocks.map((b) => frags.map((j) => k.var(tA, k.cmFill(tA, 0), `p${b}${j}`)));
  const paL = split ? blocks.map((b) => frags.map((j) => k.var(tA, k.cmFill(tA, 0), `pl${b}${j}`))) : null;

  // K/V register prefetch (the next tile is loaded before the math, stored after it)
  const stager = (at: Expr, dsts: [typeof KsV, typeof VsV]) =>
    tileStager(k, { srcs: [Kg, Vg], dsts, base: at, D, ld: LD, rows: BC, v128: !!v.v128, tid, threads: THREADS, el });
  const stagers = [stager(base, [KsV, VsV]), ...(loOff && KsLV && VsLV ? [stager(base.add(loOff), [KsLV, VsLV])] : [])];
  const fetch = (row0: Expr) => stagers.forEach((x) => x.fetch(row0));
  const put = (slot: Expr) => stagers.forEach((x) => x.put(slot));
  const mma = (a: Expr, aL: Expr | null, b: Expr, bL: Expr | null, acc: Expr): Expr => splitMma(k, { hi: a, lo: aL }, { hi: b, lo: bL }, acc);

  const nt = k.let(q0.add(ROWS).div(BC), "nt");
  streamTiles(k, stages, nt, BC, lit("u32", 0), fetch, put, (t, slot) => {
    const k0 = k.let(t.mul(BC), "k0");
    // A subgroup whose rows all come before the tile's keys has nothing to do.
    k.if(k0.le(rf.add(CM * RB - 1)), () => {
      if (!v.skipMasked) return tileMath(k0, slot.mul(TILE), false);
      // the straight-line body everywhere but on the subgroup's diagonal tile
      k.if(k0.add(BC - 1).gt(rf), () => tileMath(k0, slot.mul(TILE), true), () => tileMath(k0, slot.mul(TILE), false));
    });
  });

  /**
   * One tile's math. With `skip`, fragment j's products run only if some of the subgroup's rows
   * see some of its keys (k0 + 16 j <= last row): the masked ones are -inf in S (below) and
   * contribute nothing to O.
   */
  function tileMath(k0: Expr, kvOff: Expr, skip: boolean): void {
    const live = (j: number, body: () => void) => (skip ? k.if(k0.add(j * CM).le(rf.add(CM * RB - 1)), body) : body());
    // S = Q K^T: each K fragment read from shared memory feeds every row block
    for (const j of frags) {
      live(j, () => {
        const acc = blocks.map(() => k.cmFill(tC, 0));
        for (let d = 0; d < DC; d++) {
          const at = kvOff.add(j * CM * LD + d * CM).div(VW);
          const kb = KsV.cmLoad(tB, at, LD / VW, "col");
          const kbL = KsLV ? KsLV.cmLoad(tB, at, LD / VW, "col") : null;
          for (const b of blocks) acc[b] = mma(qa[b][d], qaL ? qaL[b][d] : null, kb, kbL, acc[b]);
        }
        for (const b of blocks) {
          s[b][j].set(acc[b]);
          if (v.softCap) elements(k, tC, (i) => s[b][j].setAt(i, safeTanh(s[b][j].at(i).mul(c2)).mul(capL)));
        }
      });
    }
    // causal mask: only fragments that reach past the subgroup's first row
    k.if(k0.add(BC - 1).gt(rf), () => {
      for (const b of blocks) {
        for (const j of frags) {
          const kf = k.let(k0.add(j * CM), "kf");
          k.if(kf.gt(rb0[b]), () => s[b][j].set(k.cmFill(tC, lit(f32, "-inf"))), () => {
            k.if(kf.eq(rb0[b]), () => s[b][j].set(s[b][j].get().add(tri.get())));
          });
        }
      }
    });
    const over = k.var(f32, lit(f32, "-inf"), "over");
    elements(k, tC, (i) => {
      for (const b of blocks) {
        const m = s[b].map((x) => x.at(i)).reduce((a, c) => max(a, c));
        over.set(max(over.get(), minusM(m, mb[b].at(i))));
      }
    });
    k.if(k.sgAny(over.get().gt(TAU)), () => blocks.forEach(rescale));
    k.if(regP, () => {
      elements(k, tC, (i) => {
        for (const b of blocks) {
          const mi = mb[b].at(i);
          let sum = lsum[b].at(i);
          for (const j of frags) {
            const p = k.let(exp2(minusM(s[b][j].at(i), mi)), "p");
            sum = sum.add(p);
            splitElement(k, el, p, pa[b][j], paL ? paL[b][j] : null, i);
          }
          lsum[b].setAt(i, sum);
        }
      });
    }, () => {
      for (const b of blocks) {
        for (const j of frags) {
          elements(k, tC, (i) => {
            const p = k.let(exp2(minusM(s[b][j].at(i), mb[b].at(i))), "p");
            lsum[b].setAt(i, lsum[b].at(i).add(p));
            s[b][j].setAt(i, p);
          });
          if (split) {
            accToOperands(k, { tC, tA, el, st, pt, off: stOff, lane }, s[b][j].get(), pa[b][j], paL ? paL[b][j] : null);
            continue;
          }
          sgSync();
          pt.cmStore(s[b][j].get().cast(tC16), stOff, CM, "row");
          sgSync();
          pa[b][j].set(pt.cmLoad(tA, stOff, CM, "row"));
        }
      }
    });
    // O += P V: each V fragment read feeds every row block
    if (skip) {
      for (const j of frags) {
        live(j, () => {
          for (let dn = 0; dn < DC; dn++) {
            const [vb, vbL] = vFrags(kvOff, j, dn);
            for (const b of blocks) o[b][dn].set(mma(pa[b][j].get(), paL ? paL[b][j].get() : null, vb, vbL, o[b][dn].get()));
          }
        });
      }
      return;
    }
    for (let dn = 0; dn < DC; dn++) {
      const acc = blocks.map((b) => o[b][dn].get());
      for (const j of frags) {
        const [vb, vbL] = vFrags(kvOff, j, dn);
        for (const b of blocks) acc[b] = mma(pa[b][j].get(), paL ? paL[b][j].get() : null, vb, vbL, acc[b]);
      }
      for (const b of blocks) o[b][dn].set(acc[b]);
    }
  }

  /** V fragment (j, dn) of the staged tile, and its low part when split. */
  function vFrags(kvOff: Expr, j: number, dn: number): [Expr, Expr | null] {
    const at = kvOff.add(j * CM * LD + dn * CM).div(VW);
    return [VsV.cmLoad(tB, at, LD / VW, "row"), VsLV ? VsLV.cmLoad(tB, at, LD / VW, "row") : null];
  }

  /** New row maxima of block b from this tile; its O and l rescaled by exp2(M_old - M_new). */
  function rescale(b: number): void {
    const tmax = k.var(tC, s[b][0].get(), "tmax");
    elements(k, tC, (i) => tmax.setAt(i, toLog2(s[b].map((x) => x.at(i)).reduce((a, c) => max(a, c)))));
    sgSync();
    st.cmStore(tmax.get(), stOff, CM, "row");
    sgSync();
    const half = k.let(Array.from({ length: 8 }, (_, c) => st.load(rowOff.add(c))).reduce((a, c) => max(a, c)), "hmax");
    const rmax = k.let(max(half, k.shuffleXor(half, 1)), "rmax");
    const mold = mrow[b].get();
    const mnew = k.let(max(mold, rmax), "mnew");
    const corr = k.let(exp2(mold.sub(mnew)), "corr");
    broadcast(st, rowOff, corr);
    const cb = k.var(tC, st.cmLoad(tC, stOff, CM, "row"), "cb");
    broadcast(st, rowOff, mnew);
    mb[b].set(st.cmLoad(tC, stOff, CM, "row"));
    mrow[b].set(mnew);
    elements(k, tC, (i) => {
      const c = cb.at(i);
      for (const x of [...o[b], lsum[b]]) x.setAt(i, x.at(i).mul(c));
    });
  }

  /** Writes `value` over this lane's half row of the stage tile (after the subgroup's reads). */
  function broadcast(mem: Shared, at: Expr, value: Expr): void {
    sgSync();
    for (let c = 0; c < 8; c++) mem.store(at.add(c), value);
    sgSync();
  }

  // l: reduce the per-column partial sums; O / l through a broadcast tile; lse = M ln 2 + ln l.
  for (const b of blocks) {
    sgSync();
    st.cmStore(lsum[b].get(), stOff, CM, "row");
    sgSync();
    const lhalf = k.let(Array.from({ length: 8 }, (_, c) => st.load(rowOff.add(c))).reduce((a, c) => a.add(c)), "lhalf");
    const lrow = k.let(lhalf.add(k.shuffleXor(lhalf, 1)), "lrow");
    broadcast(st, rowOff, lrow);
    const lb = k.let(st.cmLoad(tC, stOff, CM, "row"), "lb");
    o[b].forEach((od, d) => {
      const out = od.get().div(lb);
      O.cmStore(split ? out : out.cast(tC16), base.add(rb0[b].mul(D)).add(d * CM), D, "row");
    });
    const mfin = mrow[b].get();
    k.if(lane.band(1).eq(0), () => L.store(bh.mul(pc.T).add(rb0[b]).add(r), mfin.mul(Math.LN2).add(log(lrow))));
  }
  return k.finish();
}
