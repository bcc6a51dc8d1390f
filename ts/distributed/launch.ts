// `helios launch --gpus=N <script> [args]`: one process per GPU with the torchrun-style variables
// set (RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, MASTER_ADDR, MASTER_PORT) and NVLink
// multicast off (NCCL_NVLS_ENABLE=0, always: shared hosts). Each line a rank prints is prefixed
// with `[rank R]`. When a rank exits with an error or a signal, the others are stopped (SIGTERM,
// then SIGKILL after a grace) and the launcher exits non-zero naming the rank; when all exit 0,
// it exits 0. Several hosts: the same command on each with --nnodes, --node-rank and the first
// host's --master-addr.
import { spawn, type ChildProcess } from "node:child_process";
import net from "node:net";

export const LAUNCH_USAGE = `usage: helios launch --gpus=N [--nnodes=1 --node-rank=0 --master-addr=127.0.0.1 --master-port=PORT] <script.js | command> [args...]
  starts N processes (one per GPU) with RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR, MASTER_PORT set
  and NCCL_NVLS_ENABLE=0; stops them all when one fails.`;

export class LaunchArgError extends Error {}

export interface LaunchOptions {
  gpus: number;
  nnodes: number;
  nodeRank: number;
  masterAddr: string;
  /** 0: pick a free port (single host only). */
  masterPort: number;
  command: string[];
  /** How long a stopped rank gets between SIGTERM and SIGKILL (ms). */
  graceMs: number;
}

function intArg(name: string, raw: string, lo: number, hi: number): number {
  const n = /^\d+$/.test(raw) ? Number(raw) : NaN;
  if (!Number.isSafeInteger(n) || n < lo || n > hi) throw new LaunchArgError(`--${name}=${raw}: expected an integer from ${lo} to ${hi}`);
  return n;
}

export function parseLaunchArgs(argv: string[]): LaunchOptions {
  const o: LaunchOptions = { gpus: 0, nnodes: 1, nodeRank: 0, masterAddr: "127.0.0.1", masterPort: 0, command: [], graceMs: 5000 };
  let i = 0;
  for (; i < argv.length && argv[i].startsWith("--"); i++) {
    const [k, v] = argv[i].includes("=") ? [argv[i].slice(2, argv[i].indexOf("=")), argv[i].slice(argv[i].indexOf("=") + 1)] : [argv[i].slice(2), argv[++i] ?? ""];
    if (k === "gpus") o.gpus = intArg(k, v, 1, 1024);
    else if (k === "nnodes") o.nnodes = intArg(k, v, 1, 4096);
    else if (k === "node-rank") o.nodeRank = intArg(k, v, 0, 4095);
    else if (k === "master-addr") o.masterAddr = v;
    else if (k === "master-port") o.masterPort = intArg(k, v, 1, 65535);
    else if (k === "grace-ms") o.graceMs = intArg(k, v, 0, 600000);
    else throw new LaunchArgError(`unknown option --${k}`);
  }
  o.command = argv.slice(i);
  if (o.gpus === 0) throw new LaunchArgError("--gpus=N is required");
  if (o.command.length === 0) throw new LaunchArgError("no script or command to launch");
  if (o.nodeRank >= o.nnodes) throw new LaunchArgError(`--node-rank=${o.nodeRank} is not below --nnodes=${o.nnodes}`);
  if (o.nnodes > 1 && o.masterPort === 0) throw new LaunchArgError("--master-port is required with --nnodes > 1 (every host must name the same port)");
  return o;
}

/** A free TCP port on the loopback interface (for single-host jobs). */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = net.createServer();
    s.once("error", reject);
    s.listen(0, "127.0.0.1", () => {
      const a = s.address();
      s.close(() => (a && typeof a === "object" ? resolve(a.port) : reject(new Error("no port"))));
    });
  });
}

/** The environment of one rank. */
export function rankEnv(o: LaunchOptions, localRank: number, port: number, base: NodeJS.ProcessEnv = process.env): NodeJS.ProcessEnv {
  return {
    ...base,
    RANK: String(o.nodeRank * o.gpus + localRank),
    WORLD_SIZE: String(o.nnodes * o.gpus),
    LOCAL_RANK: String(localRank),
    LOCAL_WORLD_SIZE: String(o.gpus),
    MASTER_ADDR: o.masterAddr,
    MASTER_PORT: String(port),
    NCCL_NVLS_ENABLE: "0",
  };
}

/** Forwards a child's stream line by line with a rank prefix. */
function prefixLines(src: NodeJS.ReadableStream, dst: NodeJS.WritableStream, prefix: string): void {
  let rest = "";
  src.setEncoding("utf8");
  src.on("data", (chunk: string) => {
    const lines = (rest + chunk).split("\n");
    rest = lines.pop() ?? "";
    if (lines.length > 0) dst.write(lines.map((l) => prefix + l).join("\n") + "\n");
  });
  src.on("end", () => {
    if (rest !== "") dst.write(prefix + rest + "\n");
  });
}

export interface LaunchIo {
  stdout: NodeJS.WritableStream;
  stderr: NodeJS.WritableStream;
}

/** Runs the job; resolves with the launcher's exit status. */
export async function launch(o: LaunchOptions, io: LaunchIo = { stdout: process.stdout, stderr: process.stderr }): Promise<number> {
  const port = o.masterPort || (await freePort());
  const [cmd0, ...rest] = o.command;
  const viaNode = /\.(c|m)?js$/.test(cmd0);
  const [file, args] = viaNode ? [process.execPath, [cmd0, ...rest]] : [cmd0, rest];
  const kids: ChildProcess[] = [];
  let failed: { rank: number; status: number; why: string } | null = null;
  let left = o.gpus;
  return new Promise((resolve) => {
    const stopOthers = () => {
      for (const k of kids) if (k.exitCode === null && k.signalCode === null) k.kill("SIGTERM");
      setTimeout(() => {
        for (const k of kids) if (k.exitCode === null && k.signalCode === null) k.kill("SIGKILL");
      }, o.graceMs).unref();
    };
    const onSignal = (sig: NodeJS.Signals) => {
      failed ??= { rank: -1, status: 128 + (sig === "SIGINT" ? 2 : 15), why: `the launcher got ${sig}` };
      stopOthers();
    };
    process.on("SIGINT", onSignal);
    process.on("SIGTERM", onSignal);
    for (let local = 0; local < o.gpus; local++) {
      const rank = o.nodeRank * o.gpus + local;
      const child = spawn(file, args, { env: rankEnv(o, local, port), stdio: ["ignore", "pipe", "pipe"] });
      kids.push(child);
      prefixLines(child.stdout!, io.stdout, `[rank ${rank}] `);
      prefixLines(child.stderr!, io.stderr, `[rank ${rank}] `);
      child.on("error", (e) => {
        io.stderr.write(`helios launch: rank ${rank}: cannot start ${file}: ${e.message}\n`);
      });
      child.on("close", (code, signal) => {
        if ((code !== 0 || signal) && !failed) {
          const why = signal ? `was killed by ${signal}` : `exited with status ${code}`;
          failed = { rank, status: code && code > 0 ? code : 1, why };
          io.stderr.write(`helios launch: rank ${rank} ${why}; stopping the other ranks\n`);
          stopOthers();
        }
        if (--left === 0) {
          process.off("SIGINT", onSignal);
          process.off("SIGTERM", onSignal);
          const f = failed as { rank: number; status: number; why: string } | null;
          if (f) io.stderr.write(`helios launch: failed (${f.rank >= 0 ? `rank ${f.rank} ${f.why}` : f.why})\n`);
          resolve(f ? f.status : 0);
        }
      });
    }
  });
}
