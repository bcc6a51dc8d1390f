// Causal flash attention forward on cooperative matrices (KHR, subgroup scope, 16x16x16 f16
// with f32 accumulation): flash_fwd's contract (same bindings q, k, v, o, lse and FA_PUSH)
// for f16 tensors with D % 16 == 0, D <= 64, T % 64 == 0, on devices with 32-wide subgroups.
//
// Dispatch: [T/64, BH], 128 threads = 4 subgroups; subgroup s owns query rows
//   q0 + 16s .. q0 + 16s + 15 of the workgroup's 64. Per 64-key tile (k0 <= q0 only: causal):
//   K and V tiles are staged in shared memory (64-bit f16x4 loads; rows padded by 8 halves); S = Q K^T is 4x(D/16)
//   coopmat products (Q fragments stay in registers all along); S goes through a per-subgroup
//   f32 stage where lane pair (2r, 2r+1) runs the online softmax of row r over 32 keys each
//   (running max shared through `red`; each lane keeps its half of the running sum), writes P
//   as f16 and rescales its half of the output row, which lives in registers (D/2 floats per
//   lane: a coopmat accumulator cannot be scaled per row); P V is computed as coopmat products
//   and added through the stage.
// Numerics: scores and softmax in f32, P rounded to f16 for the P V product (as FlashAttention
//   does); lse = m + log(l) in f32.
import { coopmat, exp, f16, f32, kernel, lit, log, max, select, type CoopMatType, type KernelDesc } from "../ir/index.js";
import { safeTanh } from "./common.js";
import { FA_PUSH } from "./attention.js";

export const FA_CM_ROWS = 64;
const BC = 64;
const CM = 16;
/** Shared memory at D = 64: K, V tiles (f16, padded), the f32 stage, P (f16, padded), red. */
const SHARED_BYTES = 2 * BC * 72 * 2 + 4 * CM * BC * 4 + 4 * CM * (BC + 8) * 2 + 128 * 4;

export interface FlashCmVariant {
  readonly D: number;
  readonly softCap: boolean;
}

/** Whether the coopmat kernel serves this problem on this device. */
export function flashCmApplies(
  info: { coopMatSupported?: boolean; subgroupSize: number; maxSharedMemoryBytes?: number }, dtype: string, T: number, D: number,
): boolean {
  return !!info.coopMatSupported && info.subgroupSize === 32 && (info.maxSharedMemoryBytes ?? 49152) >= SHARED_BYTES && dtype === "f16" && T % FA_CM_ROWS === 0 && D % CM === 0 && D <= 64;
}

export function flashFwdCmKernel(v: FlashCmVariant): KernelDesc {
  const { D } = v;
  const DC = D / CM, HALF = D / 2, LD = D + 8, LP = BC + 8;
  const tA: CoopMatType = coopmat("a", "f16", CM, CM);
  const tB: CoopMatType = coopmat("b", "f16", CM, CM);
  const tC: CoopMatType = coopmat("acc", "f32", CM, CM);
  const k = kernel(`flash_fwd_cm_f16_d${D}${v.softCap ? "_cap" : ""}`, { workgroup: [128] });
  const Q = k.buffer("q", f16, "read"), K = k.buffer("k", f16, "read"), V = k.buffer("v", f16, "read");
  const O = k.buffer("o", f16, "write"), L = k.buffer("lse", f32, "write");
  const pc = k.push(FA_PUSH);
  const Kv = K.as("f16", 4), Vv = V.as("f16", 4);
  const Ks = k.shared("Ks", f16, BC * LD), Vs = k.shared("Vs", f16, BC * LD);
  const St = k.shared("St", f32, 4 * CM * BC);
  const Ps = k.shared("Ps", f16, 4 * CM * LP);
  const red = k.shared("red", f32, 128);
  const tid = k.let(k.localIndex, "tid");
  const sg = k.let(k.subgroupId, "sg");
  const lane = k.let(k.subgroupInvocation, "lane");
  const r = k.let(lane.shr(1), "r");
  const half = k.let(lane.band(1), "half");
  const me = k.let(sg.mul(32).add(lane), "me");
  const partner = k.let(sg.mul(32).add(lane.bxor(1)), "partner");
  const bh = k.let(k.workgroupId.y, "bh");
  const q0 = k.let(k.workgroupId.x.mul(FA_CM_ROWS), "q0");
  const base = k.let(bh.mul(pc.T).mul(D), "base");
  const sgRow0 = k.let(q0.add(sg.mul(CM)), "sgrow0");
  const qrow = k.let(sgRow0.add(r), "qrow");
  const stOff = k.let(sg.mul(CM * BC), "stoff");
  const pOff = k.let(sg.mul(CM * LP), "poff");
  const qa = Array.from({ length: DC }, (_, d) => k.let(Q.cmLoad(tA, base.add(sgRow0.mul(D)).add(d * CM), D, "row"), `qa${d}`));
  const o = Array.from({ length: HALF }, (_, c) => k.var(f32, 0, `o${c}`));
  const m = k.var(f32, -Infinity, "m");
  const l = k.var(f32, 0, "l");
  const sgBarrier = () => k.barrier({ scope: "subgroup", mem: ["workgroup"] });
  k.for(lit("u32", 0), q0.add(FA_CM_ROWS), (k0) => {
    // 64-bit global loads (f16x4), unpacked into the padded f16 tiles
    k.for(tid, lit("u32", (BC * D) / 4), (e) => {
      const row = k.let(e.div(D / 4), "kr");
      const col = k.let(e.rem(D / 4).mul(4), "kc");
      const src = k.let(base.add(k0.add(row).mul(D)).add(col).shr(2), "ksrc");
      const dst = k.let(row.mul(LD).add(col), "kdst");
      for (const [buf, sh] of [[Kv, Ks], [Vv, Vs]] as const) {
        const w = k.let(buf.load(src), "w");
        ["x", "y", "z", "w"].forEach((c, i) => sh.store(dst.add(i), w.swz(c)));
      }
    }, { step: 128 });
    k.barrier();
    for (let j = 0; j < BC / CM; j++) {
      let s = k.cmFill(tC, 0);
      for (let d = 0; d < DC; d++) s = k.cmMulAdd(qa[d], Ks.cmLoad(tB, j * CM * LD + d * CM, LD, "col"), s);
      St.cmStore(s, stOff.add(j * CM), BC, "row");
    }
    sgBarrier();
    const c0 = k.let(half.mul(BC / 2), "c0");
    const sv = Array.from({ length: BC / 2 }, (_, c) => {
      const raw = St.load(stOff.add(r.mul(BC)).add(c0).add(c)).mul(pc.scale);
      const capped = v.softCap ? safeTanh(raw.div(pc.cap)).mul(pc.cap) : raw;
      return k.let(select(k0.add(c0).add(c).gt(qrow), lit(f32, "-inf"), capped), "s");
    });
    const localMax = k.let(sv.reduce((a, b) => max(a, b)), "lmax");
    red.store(me, localMax);
    sgBarrier();
    const mNew = k.let(max(m.get(), max(localMax, red.load(partner))), "mn");
    const corr = k.let(exp(m.get().sub(mNew)), "corr");
    const ps = sv.map((s) => k.let(exp(s.sub(mNew)), "p"));
    l.set(l.get().mul(corr).add(ps.reduce((a, b) => a.add(b))));
    ps.forEach((p, c) => Ps.store(pOff.add(r.mul(LP)).add(c0).add(c), p.cast(f16)));
    for (const oc of o) oc.set(oc.get().mul(corr));
    m.set(mNew);
    sgBarrier();
    for (let dn = 0; dn < DC; dn++) {
      let acc = k.cmFill(tC, 0);
      for (let j = 0; j < BC / CM; j++) {
        acc = k.cmMulAdd(Ps.cmLoad(tA, pOff.add(j * CM), LP, "row"), Vs.cmLoad(tB, j * CM * LD + dn * CM, LD, "row"), acc);
      }
      St.cmStore(acc, stOff.add(dn * CM), D, "row");
    }
    sgBarrier();
    const h0 = k.let(half.mul(HALF), "h0");
    o.forEach((oc, c) => oc.set(oc.get().add(St.load(stOff.add(r.mul(D)).add(h0).add(c)))));
    k.barrier();
  }, { step: BC });
  red.store(me, l.get());
  sgBarrier();
  const lt = k.let(l.get().add(red.load(partner)), "lt");
  const inv = k.let(lit(f32, 1).div(lt), "inv");
  const h0 = k.let(half.mul(HALF), "oh0");
  o.forEach((oc, c) => O.store(base.add(qrow.mul(D)).add(h0).add(c), oc.get().mul(inv).cast(f16)));
  k.if(half.eq(0), () => L.store(bh.mul(pc.T).add(qrow), m.get().add(log(lt))));
  return k.finish();
}
