// Many processes exiting with GPU work in flight, under CPU contention (issue 24 item 5: exits
// used to die with SIGSEGV / "double free or corruption" now and then). The test runs a bounded
// storm; the GPU host runs the full one: `node dist/__test__/support/exit-storm.js 1000`.
import { spawn, type ChildProcess } from "node:child_process";
import { mkdtempSync, readdirSync, rmSync } from "node:fs";
import { cpus, tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import type { ExitMode } from "./exit-child.js";

const CHILD = fileURLToPath(new URL("./exit-child.js", import.meta.url));
const MODES: ExitMode[] = ["normal", "exit", "throw", "worker"];
/** Exit status each mode must end with (an uncaught throw exits 1). */
const EXPECTED: Record<ExitMode, number> = { normal: 0, exit: 0, throw: 1, worker: 0 };

export interface StormFailure {
  index: number;
  mode: ExitMode;
  why: string;
}

function runChild(index: number, cacheDir: string, timeoutMs: number): Promise<StormFailure | null> {
  const mode = MODES[index % MODES.length];
  const env = { ...process.env, HELIOS_CACHE_DIR: cacheDir };
  return new Promise((resolve) => {
    const child = spawn(process.execPath, [CHILD, mode], { env, stdio: ["ignore", "ignore", "pipe"] });
    let stderr = "";
    child.stderr.on("data", (d: Buffer) => (stderr += d.toString()));
    const timer = setTimeout(() => child.kill("SIGKILL"), timeoutMs);
    child.on("exit", (code, signal) => {
      clearTimeout(timer);
      const tail = stderr.trim().split("\n").slice(-3).join(" | ");
      if (signal) resolve({ index, mode, why: `killed by ${signal}${signal === "SIGKILL" ? " (hung)" : ""}: ${tail}` });
      else if (code !== EXPECTED[mode]) resolve({ index, mode, why: `exit status ${code}: ${tail}` });
      else if (mode === "throw" && !stderr.includes("exit-child: an uncaught error")) resolve({ index, mode, why: `wrong error: ${tail}` });
      else resolve(null);
    });
  });
}

/** Busy loops in child processes, so the exits race driver threads for the CPU. */
function burners(n: number): ChildProcess[] {
  return Array.from({ length: n }, () => spawn(process.execPath, ["-e", "for (;;);"], { stdio: "ignore" }));
}

/**
 * Runs `count` children (modes in turn), `parallel` at a time, beside `contention` busy
 * processes. Returns the failures and whether the exits that should save the pipeline cache did.
 */
export async function exitStorm(count: number, parallel = 2, contention = cpus().length): Promise<{ failures: StormFailure[]; cacheSaved: boolean }> {
  const cacheDir = mkdtempSync(join(tmpdir(), "helios-exit-storm-"));
  const burn = burners(contention);
  const failures: StormFailure[] = [];
  try {
    let next = 0;
    const lane = async () => {
      for (let i = next++; i < count; i = next++) {
        const f = await runChild(i, cacheDir, 60_000);
        if (f) failures.push(f);
      }
    };
    await Promise.all(Array.from({ length: Math.max(1, parallel) }, lane));
    return { failures, cacheSaved: readdirSync(cacheDir).some((f) => f.startsWith("pipelines-")) };
  } finally {
    for (const b of burn) b.kill("SIGKILL");
    rmSync(cacheDir, { recursive: true, force: true });
  }
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const count = Number(process.argv[2] ?? 1000);
  const parallel = Number(process.argv[3] ?? Math.max(2, cpus().length));
  if (!Number.isInteger(count) || count < 1) throw new Error(`exit-storm: count ${process.argv[2]} is not a positive integer`);
  const t0 = Date.now();
  const { failures, cacheSaved } = await exitStorm(count, parallel);
  for (const f of failures) console.log(`child ${f.index} (${f.mode}): ${f.why}`);
  console.log(`${count} exits, ${failures.length} failed, pipeline cache saved: ${cacheSaved}, ${((Date.now() - t0) / 1000).toFixed(1)} s`);
  process.exitCode = failures.length === 0 && cacheSaved ? 0 : 1;
}
