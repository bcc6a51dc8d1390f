// The rendezvous server: rank 0 hosts it (in its agent thread, so it answers while rank 0's JS
// thread is busy or blocked). Every exchange is a *gather*: each rank sends a payload under a
// key, and once all ranks have sent theirs, every rank receives all payloads in rank order.
// A unique-id broadcast, a barrier and the test transport's all-reduce are gathers.
//
// It is also the job's failure detector: a rank whose connection closes before it said goodbye
// (process died), a rank silent for longer than the timeout (no heartbeat: stopped or hung), or
// a gather some rank never reaches within the timeout makes the server send `abort` with the
// reason to every rank and close.
import net from "node:net";
import { encodeFrame, FrameReader, type Frame } from "./frames.js";

export interface ServerOptions {
  worldSize: number;
  timeoutMs: number;
  host: string;
  port: number;
}

interface Pending {
  parts: (Buffer | undefined)[];
  arrived: number;
  timer: NodeJS.Timeout;
}

export class StoreServer {
  private readonly server: net.Server;
  private readonly peers = new Map<number, net.Socket>();
  private readonly lastSeen = new Map<number, number>();
  private readonly gone = new Set<number>();
  private readonly pending = new Map<string, Pending>();
  private readonly watch: NodeJS.Timeout;
  private aborted: string | null = null;

  private constructor(private readonly o: ServerOptions, server: net.Server) {
    this.server = server;
    server.on("connection", (s) => this.accept(s));
    this.watch = setInterval(() => this.checkHeartbeats(), Math.min(1000, o.timeoutMs / 4));
    this.watch.unref();
  }

  /** Listens on host:port (an in-use port is an error naming it). */
  static listen(o: ServerOptions): Promise<StoreServer> {
    return new Promise((resolve, reject) => {
      const server = net.createServer();
      server.once("error", (e: NodeJS.ErrnoException) => {
        reject(new Error(`the rendezvous cannot listen on ${o.host}:${o.port} (${e.code ?? e.message}): is MASTER_PORT in use by another job?`));
      });
      server.listen({ host: o.host, port: o.port, exclusive: true }, () => resolve(new StoreServer(o, server)));
    });
  }

  private accept(s: net.Socket): void {
    s.setNoDelay(true);
    const reader = new FrameReader();
    let rank = -1;
    s.on("data", (chunk) => {
      let frames: Frame[];
      try {
        frames = reader.push(chunk);
      } catch (e) {
        this.abort(`a rendezvous connection sent a malformed frame (${(e as Error).message})`);
        return;
      }
      for (const f of frames) {
        if (rank < 0) rank = this.hello(s, f);
        else this.handle(rank, f);
      }
    });
    s.on("error", () => {});
    s.on("close", () => {
      if (rank >= 0 && !this.gone.has(rank)) this.abort(`rank ${rank} disconnected from the rendezvous before it finished (its process exited or was killed)`);
    });
  }

  private hello(s: net.Socket, f: Frame): number {
    const rank = Number(f.head.rank), world = Number(f.head.worldSize);
    if (f.head.op !== "hello" || !Number.isInteger(rank)) {
      s.destroy();
      return -1;
    }
    if (world !== this.o.worldSize) {
      this.abort(`rank ${rank} says WORLD_SIZE=${world} but rank 0 has WORLD_SIZE=${this.o.worldSize}`);
      return -1;
    }
    if (rank < 0 || rank >= world || this.peers.has(rank)) {
      this.abort(`a second process claims RANK=${rank} (each rank must be started once)`);
      return -1;
    }
    this.peers.set(rank, s);
    this.lastSeen.set(rank, Date.now());
    return rank;
  }

  private handle(rank: number, f: Frame): void {
    this.lastSeen.set(rank, Date.now());
    const key = String(f.head.key ?? "");
    switch (f.head.op) {
      case "beat":
        return;
      case "gather":
        return this.gather(rank, key, f.body);
      case "bye":
        this.gone.add(rank);
        return this.gather(rank, "__bye", Buffer.alloc(0));
      case "abort":
        return this.abort(`rank ${rank} aborted: ${String(f.head.reason ?? "no reason given")}`);
    }
  }

  private gather(rank: number, key: string, body: Buffer): void {
    if (this.aborted) return;
    let p = this.pending.get(key);
    if (!p) {
      const timer = setTimeout(() => {
        const missing = p!.parts.map((x, r) => (x ? -1 : r)).filter((r) => r >= 0);
        this.abort(`${describe(key)} timed out after ${this.o.timeoutMs / 1000} s waiting for rank(s) ${missing.join(", ")}`);
      }, this.o.timeoutMs);
      timer.unref();
      p = { parts: new Array(this.o.worldSize).fill(undefined), arrived: 0, timer };
      this.pending.set(key, p);
    }
    if (p.parts[rank]) {
      this.abort(`rank ${rank} sent ${describe(key)} twice (ranks out of step)`);
      return;
    }
    p.parts[rank] = body;
    if (++p.arrived < this.o.worldSize) return;
    clearTimeout(p.timer);
    this.pending.delete(key);
    const parts = p.parts as Buffer[];
    const frame = encodeFrame({ op: "gathered", key, sizes: parts.map((b) => b.length) }, Buffer.concat(parts));
    for (const s of this.peers.values()) s.write(frame);
    if (key === "__bye") this.close();
  }

  private checkHeartbeats(): void {
    const now = Date.now();
    for (const [rank, t] of this.lastSeen) {
      if (!this.gone.has(rank) && now - t > this.o.timeoutMs) {
        this.abort(`rank ${rank} sent no heartbeat for ${this.o.timeoutMs / 1000} s (stopped or hung)`);
        return;
      }
    }
  }

  /** Tells every rank why the job is over, then closes. */
  abort(reason: string): void {
    if (this.aborted) return;
    this.aborted = reason;
    const frame = encodeFrame({ op: "abort", reason });
    for (const s of this.peers.values()) s.end(frame);
    this.close();
  }

  close(): void {
    clearInterval(this.watch);
    for (const p of this.pending.values()) clearTimeout(p.timer);
    this.pending.clear();
    this.server.close();
  }
}

/** A key as a person reads it: "allReduce #12" rather than an internal tag. */
export function describe(key: string): string {
  if (key === "__hello") return "the rendezvous of all ranks";
  if (key === "__bye") return "the shutdown of all ranks";
  return key;
}
