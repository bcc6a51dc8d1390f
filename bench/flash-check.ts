// Correctness of the flash attention forward kernels on a device: f16 inputs, float64 causal
// naive attention on the same values, worst output (absolute) and lse (relative) errors. Used by
// bench/flash (the gate before timing) and bench/coop-tests.
import { FA_PUSH } from "../ts/kernels/attention.js";
import { FLASH_FWD, type FlashKernelName } from "../ts/kernels/attention-variants.js";
import { packPush } from "../ts/kernels/common.js";
import type { MatmulRuntime } from "../ts/kernels/matmul/device.js";
import { coopmat, f16, f32, kernel, lit, min, type KernelDesc } from "../ts/ir/index.js";
import { f16BitsToF32 as f16Value, f32ToF16Bits as f16Bits } from "../ts/f16.js";
import { Mulberry32 } from "../ts/random.js";
import { torchEventsBatch } from "./torch.js";

/** Uniform in [-2, 2), rounded to f16 bits. */
function randHalves(n: number, seed: number): Uint16Array {
  const rng = new Mulberry32(seed);
  return Uint16Array.from({ length: n }, () => f16Bits(-2 + 4 * rng.next()));
}

/** Causal attention in float64 on the inputs (f16 bits, or values): output rows and lse. */
export function naive(
  q: Uint16Array | Float64Array, k: Uint16Array | Float64Array, v: Uint16Array | Float64Array,
  bh: number, t: number, d: number, scale: number, cap: number,
) {
  const [Q, K, V] = [q, k, v].map((a) => (a instanceof Float64Array ? a : Float64Array.from(a, f16Value)));
  const o = new Float64Array(bh * t * d), lse = new Float64Array(bh * t);
  const s = new Float64Array(t);
  for (let b = 0; b < bh; b++) {
    for (let i = 0; i < t; i++) {
      let m = -Infinity;
      for (let j = 0; j <= i; j++) {
        let dot = 0;
        for (let e = 0; e < d; e++) dot += Q[(b * t + i) * d + e] * K[(b * t + j) * d + e];
        s[j] = cap > 0 ? cap * Math.tanh((dot * scale) / cap) : dot * scale;
        m = Math.max(m, s[j]);
      }
      let l = 0;
      for (let j = 0; j <= i; j++) l += Math.exp(s[j] - m);
      lse[b * t + i] = m + Math.log(l);
      for (let j = 0; j <= i; j++) {
        const p = Math.exp(s[j] - m) / l;
        for (let e = 0; e < d; e++) o[(b * t + i) * d + e] += p * V[(b * t + j) * d + e];
      }
    }
  }
  return { o, lse };
}

/** Causal attention gradients in float64 (no softCap): dQ, dK, dV of sum(O * dO). */
export function naiveBackward(q: Float64Array, k: Float64Array, v: Float64Array, dO: Float64Array, bh: number, t: number, d: number, scale: number) {
  const dq = new Float64Array(q.length), dk = new Float64Array(q.length), dv = new Float64Array(q.length);
  const p = new Float64Array(t), dp = new Float64Array(t);
  for (let b = 0; b < bh; b++) {
    for (let i = 0; i < t; i++) {
      const row = (b * t + i) * d;
      let m = -Infinity;
      for (let j = 0; j <= i; j++) {
        let dot = 0;
        for (let e = 0; e < d; e++) dot += q[row + e] * k[(b * t + j) * d + e];
        p[j] = dot * scale;
        m = Math.max(m, p[j]);
      }
      let l = 0;
      for (let j = 0; j <= i; j++) l += (p[j] = Math.exp(p[j] - m));
      // Di = rowsum(dO * O) = sum_j P_ij dP_ij
      let di = 0;
      for (let j = 0; j <= i; j++) {
        p[j] /= l;
        let x = 0;
        for (let e = 0; e < d; e++) x += dO[row + e] * v[(b * t + j) * d + e];
        dp[j] = x;
        di += p[j] * x;
      }
      for (let j = 0; j <= i; j++) {
        const col = (b * t + j) * d;
        const ds = p[j] * (dp[j] - di) * scale;
        for (let e = 0; e < d; e++) {
          dv[col + e] += p[j] * dO[row + e];
          dq[row + e] += ds * k[col + e];
          dk[col + e] += ds * q[row + e];
        }
      }
    }
  }
  return { dq, dk, dv };
}

/**
 * Errors of `got` against `want`: the largest absolute error relative to max(1, largest |want|)
 * (a non-finite value counts as infinite), and the relative Frobenius-norm error.
 */
export function attnErrors(got: ArrayLike<number>, want: ArrayLike<number>): { maxRel: number; frob: number } {
  let e = 0, mag = 0, se = 0, sw = 0;
  for (let i = 0; i < want.length; i++) {
    const x = Number.isFinite(got[i]) ? Math.abs(got[i] - want[i]) : Infinity;
    e = Math.max(e, x);
    mag = Math.max(mag, Math.abs(want[i]));
    se += x * x;
    sw += want[i] * want[i];
  }
  return { maxRel: e / Math.max(1, mag), frob: Math.sqrt(se / sw) };
}

export interface Problem { bh: number; t: number; d: number; cap: number }

export function setup(rt: MatmulRuntime, p: Problem, seed: number) {
  const n = p.bh * p.t * p.d;
  const host = [randHalves(n, seed), randHalves(n, seed + 1), randHalves(n, seed + 2)];
  const bufs = host.map((h) => {
    const b = rt.createBuffer(h.byteLength);
    rt.uploadBuffer(b, h);
    return b;
  });
  const o = rt.createBuffer(n * 2), lse = rt.createBuffer(p.bh * p.t * 4);
  return { host, bufs: [...bufs, o, lse], free: () => [...bufs, o, lse].forEach((b) => rt.destroyBuffer(b)) };
}

export function dispatchArgs(name: FlashKernelName, p: Problem) {
  const c = FLASH_FWD[name];
  const push = packPush(FA_PUSH, { T: p.t, scale: 1 / Math.sqrt(p.d), cap: p.cap > 0 ? p.cap : 1 });
  return { desc: c.build("f16", p.d, p.cap > 0), groups: [Math.ceil(p.t / c.rows), p.bh, 1], push };
}

/** Largest errors against the reference (output absolute, lse relative) and whether they pass. */
export function flashGate(rt: MatmulRuntime, name: FlashKernelName, p: Problem): { out: number; lse: number; ok: boolean } {
  const { desc, groups, push } = dispatchArgs(name, p);
  const pipe = rt.compileKernel(desc);
  const s = setup(rt, p, 1234 + p.t + p.cap);
  try {
    rt.beginBatch();
    try {
      rt.recordDispatch(pipe, s.bufs, groups, push);
    } finally {
      // submitted even when the dispatch was refused: a batch left open would fail every later check
      rt.waitTimeline(rt.submitBatch());
    }
    const got = new Uint16Array(rt.readBuffer(s.bufs[3]));
    const gotLse = new Float32Array(rt.readBuffer(s.bufs[4]));
    const ref = naive(s.host[0], s.host[1], s.host[2], p.bh, p.t, p.d, 1 / Math.sqrt(p.d), p.cap);
    // NaN (a non-finite result) counts as an infinite error
    const worse = (w: number, e: number) => (Number.isNaN(e) ? Infinity : Math.max(w, e));
    let eo = 0, el = 0;
    for (let i = 0; i < got.length; i++) eo = worse(eo, Math.abs(f16Value(got[i]) - ref.o[i]));
    for (let i = 0; i < gotLse.length; i++) el = worse(el, Math.abs(gotLse[i] - ref.lse[i]) / Math.max(1, Math.abs(ref.lse[i])));
    return { out: eo, lse: el, ok: eo < 2e-2 && el < 2e-3 };
  } finally {
    s.free();
  }
}

/** One subgroup writes, per lane, its acc f32 then its A f16 elements of 16r + c index matrices (64 floats per lane, after the two lengths). */
export function layoutProbeKernel(): KernelDesc {
  const tC = coopmat("acc", "f32", 16, 16), tA = coopmat("a", "f16", 16, 16);
  const k = kernel("probe_coopmat_layout", { workgroup: [32] });
  const i32 = k.buffer("idx32", f32, "read"), i16 = k.buffer("idx16", f16, "read"), out = k.buffer("out", f32, "write");
  const lane = k.let(k.subgroupInvocation, "lane");
  const c = k.var(tC, i32.cmLoad(tC, 0, 16, "row"), "c");
  const a = k.var(tA, i16.cmLoad(tA, 0, 16, "row"), "a");
  k.if(lane.eq(0), () => {
    out.store(0, k.cmLen(tC).cast(f32));
    out.store(1, k.cmLen(tA).cast(f32));
  });
  k.for(lit("u32", 0), min(k.cmLen(tC), 32), (i) => out.store(lane.mul(64).add(i).add(2), c.at(i)));
  k.for(lit("u32", 0), min(k.cmLen(tA), 32), (i) => out.store(lane.mul(64).add(i).add(34), a.at(i).cast(f32)));
  return k.finish();
}

/**
 * PyTorch on CUDA in a python3 subprocess: `setup` (python lines; `d` is "cuda") defines `f`,
 * which runs for 0.4 s of warm-up and then `repeats` times `iters` calls between CUDA events.
 * Returns the median ms per call with the device and torch version, or why there is none.
 */
export function torchEventsMs(setup: string, iters: number, repeats: number): { ms: number; device: string; torch: string } | string {
  const r = torchEventsBatch([{ name: "f", setup }], { iters, repeats, warmMs: 400 });
  return typeof r === "string" ? r : { ms: r.ms.f, device: r.device, torch: r.torch };
}
