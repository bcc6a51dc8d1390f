// Data parallelism for a trainer: identical parameters on every rank (broadcast from rank 0 at
// the start), each rank's share of the global batch, and gradients averaged across ranks as
// backward produces them (GradReducer). The trainer calls `grad(name, g)` for each gradient as
// backward makes it and `reduced()` before the optimizer; everything else is unchanged.
import type { TensorData } from "../types.js";
import { DistError } from "./errors.js";
import { GradReducer, planBuckets, type Bucket, type GradSpec, type ReducerBackend } from "./buckets.js";
import type { ProcessGroup } from "./group.js";
import type { CollectiveBackend } from "./transport.js";
import { readDistConfig } from "../config.js";

export type DdpBackend = ReducerBackend & CollectiveBackend;

export interface DdpOptions {
  /** Gradient bucket bytes (default HELIOS_DIST_BUCKET_MB). */
  bucketBytes?: number;
  onLaunch?: (bucket: number) => void;
}

/** The rows [start, end) of a global batch of `rows` that `rank` of `world` trains on. */
export function shardRows(rows: number, rank: number, world: number): [number, number] {
  if (!Number.isInteger(rows) || rows % world !== 0) {
    throw new DistError("ERR_HELIOS_DIST_ARGUMENT", "shardRows", `the global batch of ${rows} rows does not split evenly over ${world} ranks`);
  }
  const per = rows / world;
  return [rank * per, (rank + 1) * per];
}

export class DataParallel {
  readonly reducer: GradReducer;
  readonly buckets: Bucket[];

  /** `specs` in forward order (their gradients complete in the reverse order). */
  constructor(readonly pg: ProcessGroup, private readonly B: DdpBackend, specs: GradSpec[], o: DdpOptions = {}) {
    pg.bind(B);
    const cap = o.bucketBytes ?? readDistConfig().bucketMB * (1 << 20);
    this.buckets = planBuckets([...specs].reverse(), cap);
    this.reducer = new GradReducer(B, pg.link, this.buckets, { op: "avg", onLaunch: o.onLaunch });
  }

  get rank(): number { return this.pg.rank; }
  get worldSize(): number { return this.pg.worldSize; }

  /** Backward made gradient `name`: its bucket's all-reduce starts once the bucket is complete. */
  grad(name: string, g: TensorData): void {
    this.reducer.add(name, g);
  }

  /** The gradients averaged over ranks (new tensors, the caller's to release). */
  reduced(): Map<string, TensorData> {
    return this.reducer.finish();
  }

  /**
   * Makes every rank's parameters rank 0's, bucket by bucket (packed like gradients, broadcast,
   * unpacked in place).
   */
  broadcastParams(params: Map<string, TensorData>): void {
    const B = this.B;
    if (!B.copyInto) throw new DistError("ERR_HELIOS_DIST_UNAVAILABLE", "broadcastParams", `backend ${B.name} has no copyInto`);
    for (const b of this.buckets) {
      const flat = b.entries.map((e) => {
        const p = params.get(e.name);
        if (!p) throw new DistError("ERR_HELIOS_DIST_ARGUMENT", "broadcastParams", `no parameter "${e.name}"`);
        return B.reshape(p, [e.numel]);
      });
      const packed = flat.length === 1 ? flat[0] : B.cat(flat, 0);
      this.pg.broadcast([packed], 0);
      if (this.rank !== 0) {
        for (const e of b.entries) {
          const part = B.slice(packed, [e.offset], [e.offset + e.numel]);
          B.copyInto(params.get(e.name)!, 0, part);
          B.releaseGpuTensor?.(part);
        }
      }
      if (flat.length > 1) B.releaseGpuTensor?.(packed);
      for (const f of flat) B.releaseGpuTensor?.(f);
    }
  }

  /**
   * Host numbers combined over ranks, one rendezvous gather for all of them: each value's mean
   * (losses for the log) or max (the slowest rank's elapsed time), as `ops` says (default mean).
   */
  combine(key: string, values: number[], ops: ("mean" | "max")[] = []): number[] {
    const all = this.pg.allGatherNumbers(key, values);
    return values.map((_, i) => {
      const col = all.map((r) => r[i]);
      return ops[i] === "max" ? Math.max(...col) : col.reduce((a, x) => a + x, 0) / col.length;
    });
  }

  destroy(): void {
    this.reducer.destroy();
  }
}
