// The process's startup reporting: one Progress line and, under HELIOS_STARTUP_TRACE, one
// StartupTrace, made from the environment at the first startup work (ts/config.ts) and closed at
// exit. Kernel compiles (ts/kernels/cache.ts), the matmul tuner and prepacking report here.
import { writeFileSync } from "node:fs";
import { readStartupConfig, type StartupConfig } from "../config.js";
import { Progress, type ProgressSink } from "./progress.js";
import { StartupTrace } from "./trace.js";

export { Progress, type ProgressSink } from "./progress.js";
export { StartupTrace, PHASES, type Phase } from "./trace.js";

export interface Startup {
  progress: Progress | null;
  trace: StartupTrace | null;
}

let current: Startup | undefined;
const exitNotes: (() => string | null)[] = [];
let hooked = false;

/** The process's startup reporting, made on first use from HELIOS_PROGRESS and HELIOS_STARTUP_TRACE. */
export function startup(): Startup {
  if (current) return current;
  const cfg = readStartupConfig();
  current = make(cfg, process.stderr);
  hookExit(cfg);
  return current;
}

function make(cfg: StartupConfig, sink: ProgressSink): Startup {
  return { progress: cfg.progress ? new Progress({ sink }) : null, trace: cfg.trace ? new StartupTrace() : null };
}

function hookExit(cfg: StartupConfig): void {
  if (hooked) return;
  hooked = true;
  process.once("exit", () => {
    const s = current;
    s?.progress?.end();
    if (s?.progress) for (const note of exitNotes) {
      const line = note();
      if (line) process.stderr.write(`helios: ${line}\n`);
    }
    if (!s?.trace || !cfg.trace) return;
    if (cfg.trace === "stderr") process.stderr.write(s.trace.table());
    else writeTrace(cfg.trace, s.trace);
  });
}

function writeTrace(file: string, t: StartupTrace): void {
  try {
    writeFileSync(file, JSON.stringify(t, null, 1));
  } catch (err) {
    process.stderr.write(`helios: could not write the startup trace to ${file}: ${(err as Error).message}\n`);
  }
}

/** A line printed at exit (when progress is on) if `note` returns one. */
export function atExit(note: () => string | null): void {
  exitNotes.push(note);
}

/** Replaces the process's startup reporting (tests); returns the previous one. */
export function setStartup(s: Startup | undefined): Startup | undefined {
  const prev = current;
  current = s;
  return prev;
}
