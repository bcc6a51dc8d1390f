// Data-parallel training for the trainer (`--gpus=N`, demo and train suite; docs/distributed.md):
// a command given --gpus=N > 1 outside a job reruns itself as N ranks through the launcher; each
// rank joins the job, trains on its rows of the global batch (`shardBatch`), and averages
// gradients with the others during backward (Trainer option `dist`). Rank 0 alone logs, writes
// files and checkpoints.
import { initDistributed, type ProcessGroup } from "../ts/distributed/group.js";
import { hasDistEnv } from "../ts/distributed/env.js";
import { shardRows } from "../ts/distributed/ddp.js";
import { launch, parseLaunchArgs } from "../ts/distributed/launch.js";
import type { HostBatch } from "./data.js";

/** `--gpus=N` (or `--gpus N`) taken out of argv; 1 when absent. */
export function takeGpus(argv: string[]): { gpus: number; rest: string[] } {
  const rest: string[] = [];
  let gpus = 1;
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    const v = a.startsWith("--gpus=") ? a.slice(7) : a === "--gpus" ? argv[++i] : null;
    if (v === null) {
      rest.push(a);
      continue;
    }
    gpus = /^\d+$/.test(v ?? "") ? Number(v) : NaN;
    if (!Number.isInteger(gpus) || gpus < 1 || gpus > 1024) throw new Error(`--gpus=${v}: expected an integer from 1 to 1024`);
  }
  return { gpus, rest };
}

/**
 * With --gpus=N > 1 and no job around this process: runs N ranks of this same command (with the
 * same arguments, --gpus included) through the launcher and resolves with its exit status.
 * Null when this process should train itself (one GPU, or already a rank).
 */
export async function relaunch(gpus: number, argv: string[]): Promise<number | null> {
  if (gpus <= 1 || hasDistEnv()) return null;
  return launch(parseLaunchArgs([`--gpus=${gpus}`, process.argv[1], ...argv]));
}

/** Joins the job when this process is a rank (before the backend opens the device); else null. */
export function joinJob(gpus: number, transport?: string): ProcessGroup | null {
  if (!hasDistEnv()) return null;
  const pg = initDistributed({ transport });
  if (gpus > 1 && pg.worldSize !== gpus) {
    pg.destroy();
    throw new Error(`--gpus=${gpus} but the job has WORLD_SIZE=${pg.worldSize}`);
  }
  return pg;
}

/** The rows of a global batch that `rank` of `world` trains on. */
export function shardBatch(hb: HostBatch, rank: number, world: number): HostBatch {
  if (world === 1) return hb;
  const [s, e] = shardRows(hb.B, rank, world);
  return { idx: hb.idx.subarray(s * hb.T, e * hb.T), targets: hb.targets.subarray(s * hb.T, e * hb.T), B: e - s, T: hb.T };
}
