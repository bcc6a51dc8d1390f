// The process group: this rank's place in the job, its rendezvous agent, and its transport.
// initDistributed() joins the job (every rank blocks until all have arrived), and the collectives
// are called in the same order on every rank. After an abort every call fails with
// ERR_HELIOS_DIST_ABORTED naming the rank that failed and why.
import type { TensorData } from "../types.js";
import { readDistConfig } from "../config.js";
import { Agent } from "./agent.js";
import { readDistEnv, type DistEnv } from "./env.js";
import { DistError } from "./errors.js";
import { checkOp, createTransport, prepareTransport, type CollectiveBackend, type ReduceOp, type Transport } from "./transport.js";
import "./nccl.js";

export interface InitDistributedOptions {
  /** "nccl" (default) or a transport registered with registerTransport (tests). */
  transport?: string;
  /** The backend whose tensors the collectives take (also settable later: ProcessGroup.bind). */
  backend?: CollectiveBackend;
  /** The process-group variables (default: process.env). */
  env?: Record<string, string | undefined>;
  /**
   * After an abort the JS thread has not acted on (it is blocked in GPU work, say), the process
   * exits with an error after this many ms. Default 5000; 0 never (in-process tests).
   */
  exitAfterAbortMs?: number;
}

export class ProcessGroup {
  private transport: Transport | null = null;
  private backend: CollectiveBackend | null;
  private seq = 0;
  private destroyed = false;

  constructor(
    readonly env: DistEnv,
    private readonly agent: Agent,
    private readonly transportName: string,
    readonly timeoutMs: number,
    backend: CollectiveBackend | undefined,
  ) {
    this.backend = backend ?? null;
  }

  get rank(): number { return this.env.rank; }
  get worldSize(): number { return this.env.worldSize; }
  get localRank(): number { return this.env.localRank; }

  /** Sets the backend whose tensors the collectives take (once, before the first collective). */
  bind(backend: CollectiveBackend): this {
    if (this.transport && this.backend !== backend) {
      throw new DistError("ERR_HELIOS_DIST_STATE", "bind", "the process group already runs collectives on another backend");
    }
    this.backend = backend;
    return this;
  }

  /** The transport, created on first use (it needs the backend). */
  get link(): Transport {
    this.check("collective");
    if (this.transport) return this.transport;
    if (!this.backend) {
      throw new DistError("ERR_HELIOS_DIST_STATE", "collective", "no backend: pass initDistributed({backend}) or call bind(backend) first");
    }
    this.transport = createTransport(this.transportName, { env: this.env, agent: this.agent, backend: this.backend, timeoutMs: this.timeoutMs });
    return this.transport;
  }

  allReduce(tensors: TensorData[], op: ReduceOp = "sum"): void {
    this.tensors("allReduce", tensors);
    this.link.allReduce(tensors, checkOp("allReduce", op));
  }

  broadcast(tensors: TensorData[], root = 0): void {
    this.tensors("broadcast", tensors);
    if (!Number.isInteger(root) || root < 0 || root >= this.worldSize) {
      throw new DistError("ERR_HELIOS_DIST_ARGUMENT", "broadcast", `root ${root} is not a rank of this job (0 to ${this.worldSize - 1})`);
    }
    this.link.broadcast(tensors, root);
  }

  /** Waits until every rank reached its barrier() call of the same number. */
  barrier(): void {
    this.check("barrier");
    this.agent.barrier("barrier", `barrier #${++this.seq}`);
  }

  /** Every rank's bytes, in rank order (small host values: metrics, ids). */
  allGatherBytes(key: string, bytes: Uint8Array): Uint8Array[] {
    this.check("allGatherBytes");
    return this.agent.gather("allGatherBytes", `${key} #${++this.seq}`, bytes);
  }

  /** Every rank's numbers, in rank order. */
  allGatherNumbers(key: string, values: number[]): number[][] {
    const parts = this.allGatherBytes(key, new Uint8Array(Float64Array.from(values).buffer));
    return parts.map((p) => Array.from(new Float64Array(p.buffer, p.byteOffset, p.byteLength / 8)));
  }

  /** Ends the job on every rank with `reason` (their next or pending call fails). */
  abort(reason: string): void {
    if (this.destroyed) return;
    this.transport?.abort(reason);
    this.agent.abort(reason);
  }

  /** Waits for every rank to get here, then closes the transport and the rendezvous. */
  destroy(): void {
    if (this.destroyed) return;
    try {
      this.transport?.synchronize();
      this.agent.close("destroyDistributed");
    } finally {
      this.destroyed = true;
      this.transport?.close();
      if (current === this) current = null;
    }
  }

  /** Internal: the agent (transports gather through it). */
  get rendezvous(): Agent {
    return this.agent;
  }

  private check(call: string): void {
    if (this.destroyed) throw new DistError("ERR_HELIOS_DIST_STATE", call, "the process group was destroyed");
  }

  private tensors(call: string, ts: unknown): void {
    if (!Array.isArray(ts) || ts.length === 0) {
      throw new DistError("ERR_HELIOS_DIST_ARGUMENT", call, "expects a non-empty array of tensors");
    }
    ts.forEach((t, i) => {
      if (!t || typeof t !== "object" || !Array.isArray((t as TensorData).shape)) {
        throw new DistError("ERR_HELIOS_DIST_ARGUMENT", call, `tensors[${i}] is not a tensor`);
      }
    });
  }
}

let current: ProcessGroup | null = null;

/**
 * Joins the job described by RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR and MASTER_PORT: starts
 * this rank's rendezvous agent (rank 0 also hosts the rendezvous) and waits for every rank.
 */
export function initDistributed(o: InitDistributedOptions = {}): ProcessGroup {
  if (current) throw new DistError("ERR_HELIOS_DIST_STATE", "initDistributed", "already initialized (call destroyDistributed() first)");
  const env = readDistEnv(o.env);
  const timeoutMs = readDistConfig(o.env).timeoutS * 1000;
  const exitAfterMs = o.exitAfterAbortMs ?? 5000;
  if (!Number.isInteger(exitAfterMs) || exitAfterMs < 0) {
    throw new DistError("ERR_HELIOS_DIST_ARGUMENT", "initDistributed", `exitAfterAbortMs ${exitAfterMs} is not a whole number of ms`);
  }
  const transport = o.transport ?? "nccl";
  prepareTransport(transport, env);
  const agent = new Agent(env, { timeoutMs, exitAfterMs });
  agent.barrier("initDistributed", "__hello");
  current = new ProcessGroup(env, agent, transport, timeoutMs, o.backend);
  return current;
}

/** The group initDistributed() made (ERR_HELIOS_DIST_STATE before it). */
export function processGroup(call = "processGroup"): ProcessGroup {
  if (!current) throw new DistError("ERR_HELIOS_DIST_STATE", call, "initDistributed() has not been called");
  return current;
}

export function allReduce(tensors: TensorData[], op: ReduceOp = "sum"): void {
  processGroup("allReduce").allReduce(tensors, op);
}

export function broadcast(tensors: TensorData[], root = 0): void {
  processGroup("broadcast").broadcast(tensors, root);
}

export function barrier(): void {
  processGroup("barrier").barrier();
}

export function destroyDistributed(): void {
  current?.destroy();
}
