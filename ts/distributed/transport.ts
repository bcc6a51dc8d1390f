// How tensors move between ranks. A transport reduces or broadcasts device tensors in place, in
// the order calls are made (every rank makes the same calls in the same order). Production uses
// NCCL (nccl.ts); a transport for tests is registered by the tests alone (registerTransport).
import type { TensorData } from "../types.js";
import type { Agent } from "./agent.js";
import type { DistEnv } from "./env.js";
import { DistError } from "./errors.js";

export type ReduceOp = "sum" | "avg" | "max" | "min";
export const REDUCE_OPS: readonly ReduceOp[] = ["sum", "avg", "max", "min"];

/** What a collective needs from the backend the tensors live on (HeliosBackend has it all). */
export interface CollectiveBackend {
  readonly name: string;
  zeros(shape: number[], dtype?: "f32" | "f16" | "i32"): TensorData;
  writeTensor?(t: TensorData, data: ArrayLike<number>): void;
  /** Submits the work recorded so far; the timeline value it will signal (stream-ordered transports). */
  submitted?(): number;
  releaseGpuTensor?(t: TensorData): void;
}

export interface Transport {
  readonly name: string;
  /**
   * Reduces each tensor across ranks in place. Stream-ordered transports only enqueue the work:
   * later backend work on these tensors runs after it; host transports finish before returning.
   */
  allReduce(tensors: TensorData[], op: ReduceOp): void;
  /** Copies each tensor of rank `root` into the same tensor on every other rank. */
  broadcast(tensors: TensorData[], root: number): void;
  /**
   * A tensor collectives may take, for a gradient bucket: NCCL needs memory it can share with
   * CUDA. Null when any backend tensor will do.
   */
  allocBucket?(elements: number): TensorData | null;
  /** Waits until every collective enqueued so far has finished on this rank. */
  synchronize(): void;
  /** Aborts in-flight collectives (a peer is gone); the transport is unusable afterwards. */
  abort(reason: string): void;
  close(): void;
}

export interface TransportContext {
  readonly env: DistEnv;
  readonly agent: Agent;
  readonly backend: CollectiveBackend;
  readonly timeoutMs: number;
}

export type TransportFactory = (ctx: TransportContext) => Transport;

interface Entry {
  create: TransportFactory;
  /** Runs in initDistributed before the rendezvous (NCCL picks and opens this rank's GPU). */
  prepare?: (env: DistEnv) => void;
}

const factories = new Map<string, Entry>();

/** Makes a transport available to initDistributed({transport: name}). */
export function registerTransport(name: string, create: TransportFactory, prepare?: (env: DistEnv) => void): void {
  factories.set(name, { create, prepare });
}

function entry(name: string): Entry {
  const f = factories.get(name);
  if (!f) {
    throw new DistError("ERR_HELIOS_DIST_UNAVAILABLE", "initDistributed", `no transport "${name}" (registered: ${[...factories.keys()].join(", ") || "none"})`);
  }
  return f;
}

export function prepareTransport(name: string, env: DistEnv): void {
  entry(name).prepare?.(env);
}

export function createTransport(name: string, ctx: TransportContext): Transport {
  return entry(name).create(ctx);
}

export function checkOp(call: string, op: unknown): ReduceOp {
  if (!REDUCE_OPS.includes(op as ReduceOp)) {
    throw new DistError("ERR_HELIOS_DIST_ARGUMENT", call, `op "${String(op)}" is not one of ${REDUCE_OPS.join(", ")}`);
  }
  return op as ReduceOp;
}
