// The JS thread's handle on its agent thread (agent-worker.ts): synchronous calls that block this
// thread with Atomics.wait until the agent answers (the training loop is synchronous; the agent
// keeps the rendezvous alive meanwhile). A call never waits past the timeout plus a margin: the
// server's own timeout normally answers first, naming the ranks that did not arrive.
import { MessageChannel, receiveMessageOnPort, Worker, type MessagePort } from "node:worker_threads";
import { DistError } from "./errors.js";
import type { DistEnv } from "./env.js";
import type { AgentData, Reply, Request } from "./agent-worker.js";
import { describe } from "./store-server.js";

export interface AgentOptions {
  timeoutMs: number;
  /** Exit the process this long after an abort the JS thread has not acted on (0: never; tests). */
  exitAfterMs: number;
}

export class Agent {
  private readonly worker: Worker;
  private readonly port: MessagePort;
  private readonly flag: Int32Array;
  private nextId = 1;
  private closed = false;

  constructor(readonly env: DistEnv, private readonly o: AgentOptions) {
    const sab = new SharedArrayBuffer(8);
    this.flag = new Int32Array(sab);
    const { port1, port2 } = new MessageChannel();
    this.port = port1;
    const data: AgentData = { env, timeoutMs: o.timeoutMs, port: port2, flag: sab, exitAfterMs: o.exitAfterMs };
    this.worker = new Worker(new URL("./agent-worker.js", import.meta.url), { workerData: data, transferList: [port2] });
    this.worker.unref();
    this.port.unref();
  }

  /** Whether the job was aborted (a peer died or hung, or this rank aborted). */
  get aborted(): boolean {
    return Atomics.load(this.flag, 1) === 1;
  }

  /** Every rank's payload for `key`, in rank order, once all ranks have sent theirs. */
  gather(call: string, key: string, body: Uint8Array = new Uint8Array(0)): Uint8Array[] {
    const r = this.call(call, key, (id) => ({ type: "gather", id, key, body }));
    if (r.type !== "result") throw new DistError("ERR_HELIOS_DIST_STATE", call, `unexpected agent reply ${r.type}`);
    return r.parts;
  }

  /** Waits until every rank reached the same point. */
  barrier(call: string, key: string): void {
    this.gather(call, key);
  }

  /** Tells the agent that NCCL communicators exist (an abort must abort them too). */
  armNativeAbort(): void {
    this.port.postMessage({ type: "native-abort" } satisfies Request);
  }

  /** Aborts the job on every rank with `reason` (they fail their next or pending call). */
  abort(reason: string): void {
    if (this.closed) return;
    this.port.postMessage({ type: "abort", reason } satisfies Request);
  }

  /** Waits for every rank to arrive here, then closes the rendezvous (rank 0's server last). */
  close(call: string): void {
    if (this.closed) return;
    try {
      this.call(call, "__bye", (id) => ({ type: "bye", id }));
    } finally {
      this.closed = true;
      void this.worker.terminate();
    }
  }

  private call(call: string, key: string, make: (id: number) => Request): Reply {
    if (this.closed) throw new DistError("ERR_HELIOS_DIST_STATE", call, "the process group was destroyed");
    const id = this.nextId++;
    Atomics.store(this.flag, 0, 0);
    this.port.postMessage(make(id));
    const deadline = Date.now() + this.o.timeoutMs + 5000;
    for (;;) {
      const m = receiveMessageOnPort(this.port)?.message as Reply | undefined;
      if (m) {
        if (m.id !== id) continue; // a late reply to an earlier call that already failed
        if (m.type === "error") throw new DistError(m.code as DistError["code"], call, m.message);
        return m;
      }
      const left = deadline - Date.now();
      if (left <= 0) {
        throw new DistError("ERR_HELIOS_DIST_ABORTED", call, `rank ${this.env.rank}: no answer from the rendezvous agent for ${describe(key)} within ${this.o.timeoutMs / 1000} s`);
      }
      Atomics.wait(this.flag, 0, 0, Math.min(left, 1000));
      Atomics.store(this.flag, 0, 0);
    }
  }
}
