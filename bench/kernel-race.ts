// The shared pieces of the kernel races (bench/colsum.ts, bench/xent.ts): launches recorded
// straight on the native runtime, and a timing protocol that lets variants take turns. A variant's
// launches are recorded `iters` times into one profiled batch; per case the variants run --warm-ms
// of all of them (idle SM clocks otherwise, bench/profiling.ts), then 3 rounds of one batch each;
// µs = GPU busy time of a batch (union of the dispatches' stamp intervals) / iters, median of the 3.
import type { KernelDesc } from "../ts/ir/index.js";
import { packPush, type PushSpec } from "../ts/kernels/common.js";
import { busyNs, warmFor, type ProfileEntry } from "./profiling.js";
import { median } from "./stats.js";

/** One dispatch: buffers by role name, in binding order. */
export interface Launch {
  desc: KernelDesc;
  spec: PushSpec;
  push: Record<string, number>;
  groups: [number, number, number];
  bufs: string[];
}
/** A scratch buffer a launch list needs: role name and f32 elements. */
export interface Scratch { name: string; elems: number }

export interface Prepared { run: (profile: boolean, iters: number) => ProfileEntry[]; release: () => void }

// eslint-disable-next-line @typescript-eslint/no-explicit-any
type NativeRt = any;

export function kernelRace(rt: NativeRt, opts: { iters: number; warmMs: number }) {
  /** Compiles `launches` over `bufs` (scratch leased here); `run` records them `iters` times in one batch. */
  function prepare(launches: Launch[], scratch: Scratch[], bufs: Map<string, number>): Prepared {
    const leased = scratch.map((s) => [s.name, rt.leaseBuffer(s.elems * 4)] as const);
    const all = new Map([...bufs, ...leased]);
    const compiled = launches.map((l) => ({
      pipe: rt.compileKernel(JSON.stringify(l.desc)), handles: l.bufs.map((b) => all.get(b) as number), groups: l.groups, push: packPush(l.spec, l.push),
    }));
    return {
      run: (profile, iters) => {
        rt.beginBatch({ profile });
        for (let i = 0; i < iters; i++) for (const c of compiled) rt.recordDispatch(c.pipe, c.handles, c.groups, c.push);
        const v = rt.submitBatch();
        rt.waitTimeline(v);
        return profile ? rt.batchProfile(v) : [];
      },
      release: () => leased.forEach(([, h]) => rt.releaseBuffer(h)),
    };
  }

  /** Times prepared variants in turns (see the top); per variant: median µs per call, per-kernel µs. */
  function timeInTurns(vs: Prepared[]): { us: number; kernels: Record<string, number> }[] {
    const iters = opts.iters;
    warmFor(opts.warmMs, () => vs.forEach((v) => v.run(false, iters)));
    const reps = vs.map(() => [] as ProfileEntry[][]);
    for (let round = 0; round < 3; round++) vs.forEach((v, i) => reps[i].push(v.run(true, iters)));
    return reps.map((r) => {
      const spans = r.map((b) => busyNs(b) / 1e3 / iters);
      const kernels: Record<string, number> = {};
      for (const e of r[spans.indexOf(median(spans))]) kernels[e.label] = (kernels[e.label] ?? 0) + e.gpuNs / 1e3 / iters;
      return { us: median(spans), kernels };
    });
  }

  return { prepare, timeInTurns };
}

/** A seeded xorshift32 stream of uniform numbers in [0, 1): the races' data, the same every run. */
export function xorshift(seed: number): () => number {
  let s = seed >>> 0;
  return () => {
    s ^= s << 13;
    s ^= s >>> 17;
    s ^= s << 5;
    return (s >>> 0) / 2 ** 32;
  };
}
