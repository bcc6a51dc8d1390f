// The matmul flags (to be folded into ts/config.ts, the one place HELIOS_* is read, at merge):
//   HELIOS_MATMUL_VARIANT  unset   force one variant by name (see variants.ts)
//   HELIOS_AUTOTUNE        1       0 = default heuristic, never time candidates
//   HELIOS_CACHE_DIR       XDG     tuning cache dir ($XDG_CACHE_HOME/helios or ~/.cache/helios)
import { homedir } from "node:os";
import { join } from "node:path";

export interface MatmulConfig {
  variant?: string;
  autotune: boolean;
  cacheDir: string;
}

type Env = Record<string, string | undefined>;

export function readMatmulConfig(env: Env = process.env): MatmulConfig {
  const raw = env.HELIOS_AUTOTUNE?.trim().toLowerCase();
  let autotune = true;
  if (raw === "0" || raw === "false" || raw === "off" || raw === "no") autotune = false;
  else if (raw !== undefined && raw !== "" && raw !== "1" && raw !== "true" && raw !== "on" && raw !== "yes") {
    throw new Error(`HELIOS_AUTOTUNE=${env.HELIOS_AUTOTUNE}: expected 0/1/true/false/on/off`);
  }
  const variant = env.HELIOS_MATMUL_VARIANT?.trim() || undefined;
  const cacheDir = env.HELIOS_CACHE_DIR?.trim() ||
    join(env.XDG_CACHE_HOME?.trim() || join(homedir(), ".cache"), "helios");
  return { variant, autotune, cacheDir };
}
