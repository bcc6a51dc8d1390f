// The agent thread of a rank (worker_threads): owns the rendezvous connection, and on rank 0 the
// rendezvous server too, so both keep working while the rank's JS thread is blocked — in a GPU
// wait or in a synchronous call of its own (agent.ts). It sends heartbeats, answers the JS
// thread's gathers, and turns a lost peer into an abort: the pending call fails with the reason,
// NCCL communicators are aborted (so a collective stuck on a dead peer returns), and, unless the
// JS thread exits first, the process exits with status 1 after a short grace.
import net from "node:net";
import { writeSync } from "node:fs";
import { workerData, type MessagePort } from "node:worker_threads";
import { encodeFrame, FrameReader, type Frame } from "./frames.js";
import { StoreServer, describe } from "./store-server.js";
import type { DistEnv } from "./env.js";

export interface AgentData {
  env: DistEnv;
  timeoutMs: number;
  port: MessagePort;
  /** [0]: response ready (agent.ts waits on it); [1]: aborted. */
  flag: SharedArrayBuffer;
  /** Exit the process (status 1) this long after an abort if it is still running; 0: never. */
  exitAfterMs: number;
}

export type Request =
  | { type: "gather"; id: number; key: string; body: Uint8Array }
  | { type: "bye"; id: number }
  | { type: "abort"; reason: string }
  | { type: "native-abort" };

export type Reply =
  | { type: "result"; id: number; parts: Uint8Array[] }
  | { type: "error"; id: number; code: string; message: string }
  | { type: "ready"; id: number };

const d = workerData as AgentData;
const flag = new Int32Array(d.flag);
const { env } = d;
let sock: net.Socket | null = null;
let finished = false;
let abortedWith: string | null = null;
let abortNative = false;
const waiting = new Map<string, number>();
let byeId = -1;
/** Frames the JS thread sent before the connection was up. */
const outbox: Buffer[] = [];

function send(frame: Buffer): void {
  if (sock) sock.write(frame);
  else outbox.push(frame);
}

function reply(r: Reply): void {
  d.port.postMessage(r);
  Atomics.store(flag, 0, 1);
  Atomics.notify(flag, 0);
}

function fail(id: number, message: string, code = "ERR_HELIOS_DIST_ABORTED"): void {
  reply({ type: "error", id, code, message });
}

function abort(reason: string): void {
  if (abortedWith !== null || finished) return;
  abortedWith = `rank ${env.rank}: ${reason}`;
  Atomics.store(flag, 1, 1);
  for (const id of waiting.values()) fail(id, abortedWith);
  if (byeId >= 0) fail(byeId, abortedWith);
  waiting.clear();
  sock?.destroy();
  if (abortNative) nativeAbort(abortedWith);
  if (d.exitAfterMs > 0) {
    const why = abortedWith;
    setTimeout(() => {
      writeSync(2, `helios dist: ${why}; exiting\n`);
      process.kill(process.pid, "SIGTERM");
    }, d.exitAfterMs).unref();
  }
}

/** Aborts this process's NCCL communicators (a collective waiting on a dead peer then returns). */
function nativeAbort(reason: string): void {
  import("../native-load.js")
    .then((m) => (m.loadAddon() as unknown as { distAbort?: (r: string) => void }).distAbort?.(reason))
    .catch(() => {});
}

function onFrame(f: Frame): void {
  if (f.head.op === "abort") return abort(String(f.head.reason));
  if (f.head.op !== "gathered") return;
  const key = String(f.head.key);
  const sizes = (f.head.sizes as number[]) ?? [];
  const parts: Uint8Array[] = [];
  let at = 0;
  for (const n of sizes) {
    parts.push(new Uint8Array(f.body.buffer, f.body.byteOffset + at, n).slice());
    at += n;
  }
  if (key === "__bye") {
    finished = true;
    if (byeId >= 0) reply({ type: "ready", id: byeId });
    sock?.end();
    return;
  }
  const id = waiting.get(key);
  if (id === undefined) return;
  waiting.delete(key);
  reply({ type: "result", id, parts });
}

function connect(deadline: number): void {
  const s = net.connect({ host: env.masterAddr, port: env.masterPort });
  const reader = new FrameReader();
  s.setNoDelay(true);
  let opened = false;
  s.on("connect", () => {
    opened = true;
    sock = s;
    s.write(encodeFrame({ op: "hello", rank: env.rank, worldSize: env.worldSize }));
    for (const f of outbox.splice(0)) s.write(f);
    const beat = setInterval(() => s.write(encodeFrame({ op: "beat" })), Math.max(100, Math.min(2000, d.timeoutMs / 5)));
    beat.unref();
    s.on("close", () => clearInterval(beat));
  });
  s.on("data", (chunk) => {
    try {
      for (const f of reader.push(chunk)) onFrame(f);
    } catch (e) {
      abort(`malformed data from the rendezvous (${(e as Error).message})`);
    }
  });
  s.on("error", () => {});
  s.on("close", () => {
    if (finished || abortedWith !== null) return;
    if (opened) return abort(`lost the rendezvous at ${env.masterAddr}:${env.masterPort} (rank 0 exited or was killed)`);
    if (Date.now() > deadline) {
      return abort(`could not reach the rendezvous at ${env.masterAddr}:${env.masterPort} within ${d.timeoutMs / 1000} s (is rank 0 running? check MASTER_ADDR and MASTER_PORT)`);
    }
    setTimeout(() => connect(deadline), 100);
  });
}

d.port.on("message", (m: Request) => {
  if (m.type === "native-abort") {
    abortNative = true;
    return;
  }
  if (m.type === "abort") {
    sock?.write(encodeFrame({ op: "abort", reason: m.reason }));
    return abort(`aborted: ${m.reason}`);
  }
  if (abortedWith !== null) return fail(m.id, abortedWith);
  if (m.type === "bye") {
    byeId = m.id;
    send(encodeFrame({ op: "bye" }));
    return;
  }
  if (waiting.has(m.key)) return fail(m.id, `${describe(m.key)} is already in flight`, "ERR_HELIOS_DIST_STATE");
  waiting.set(m.key, m.id);
  send(encodeFrame({ op: "gather", key: m.key }, m.body));
});

async function start(): Promise<void> {
  if (env.rank === 0) {
    const loopback = /^(127\.|localhost$|::1$)/.test(env.masterAddr);
    try {
      await StoreServer.listen({ worldSize: env.worldSize, timeoutMs: d.timeoutMs, host: loopback ? env.masterAddr : "0.0.0.0", port: env.masterPort });
    } catch (e) {
      return abort((e as Error).message);
    }
  }
  connect(Date.now() + d.timeoutMs);
}

void start();
