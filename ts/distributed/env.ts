// torchrun-style process-group variables, read and checked once by initDistributed():
// RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR, MASTER_PORT (LOCAL_WORLD_SIZE optional). The
// launcher (`helios launch`) sets them; torchrun or a cluster scheduler may too.
import { DistError } from "./errors.js";

export interface DistEnv {
  readonly rank: number;
  readonly worldSize: number;
  /** This process's GPU on its host (NCCL's and Vulkan's device). */
  readonly localRank: number;
  readonly localWorldSize: number;
  readonly masterAddr: string;
  readonly masterPort: number;
}

type Env = Record<string, string | undefined>;

function int(env: Env, name: string, lo: number, hi: number, dflt?: number): number {
  const raw = env[name]?.trim();
  if (raw === undefined || raw === "") {
    if (dflt !== undefined) return dflt;
    throw new DistError("ERR_HELIOS_DIST_ENV", "initDistributed", `${name} is not set (launch with \`helios launch --gpus=N\`, torchrun, or set RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR, MASTER_PORT)`);
  }
  const n = /^\d+$/.test(raw) ? Number(raw) : NaN;
  if (!Number.isSafeInteger(n) || n < lo || n > hi) {
    throw new DistError("ERR_HELIOS_DIST_ENV", "initDistributed", `${name}=${env[name]} is not an integer from ${lo} to ${hi}`);
  }
  return n;
}

/** Whether the environment describes a process group (WORLD_SIZE is set). */
export function hasDistEnv(env: Env = process.env): boolean {
  return (env.WORLD_SIZE?.trim() ?? "") !== "";
}

/** The process group this process belongs to; a missing or bad variable is ERR_HELIOS_DIST_ENV. */
export function readDistEnv(env: Env = process.env): DistEnv {
  const worldSize = int(env, "WORLD_SIZE", 1, 1 << 16);
  const rank = int(env, "RANK", 0, worldSize - 1);
  const localWorldSize = int(env, "LOCAL_WORLD_SIZE", 1, worldSize, worldSize);
  const localRank = int(env, "LOCAL_RANK", 0, localWorldSize - 1, worldSize === 1 ? 0 : undefined);
  const masterPort = int(env, "MASTER_PORT", 1, 65535, worldSize === 1 ? 29500 : undefined);
  const masterAddr = env.MASTER_ADDR?.trim() || (worldSize === 1 ? "127.0.0.1" : "");
  if (masterAddr === "") {
    throw new DistError("ERR_HELIOS_DIST_ENV", "initDistributed", "MASTER_ADDR is not set (the host of rank 0's rendezvous)");
  }
  return Object.freeze({ rank, worldSize, localRank, localWorldSize, masterAddr, masterPort });
}
