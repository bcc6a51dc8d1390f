// The matmul flags (to be folded into ts/config.ts, the one place HELIOS_* is read, at merge):
//   HELIOS_MATMUL_VARIANT  unset   force one variant by name (see variants.ts)
//   HELIOS_AUTOTUNE        deferred  when the backend tunes a shape class: deferred (on request:
//                                  tunePending, `helios warmup`), eager (on first use), 0 = never
//   HELIOS_CACHE_DIR       XDG     tuning cache dir ($XDG_CACHE_HOME/helios or ~/.cache/helios)
//   HELIOS_MATMUL_ALIGNED  1       0 = bounds-checked staging loads even when the tiles divide M, N, K
//   HELIOS_MATMUL_STORE    wide    how whole output blocks leave: wide | coopmat | staged4 (plan.ts)
//   HELIOS_MATMUL_PRESPLIT 1       0 = no x3_* variants (f32 on presplit bf16 operands, presplit.ts)
//   HELIOS_MATMUL_STREAMK  1       0 = no stream-K (the _stk twins plan as their tiles; streamk.ts)
//   HELIOS_MATMUL_TWO_STAGE 1      0 = no operand (or half of A) in two stages beside a one-stage one (the _a2/_b2/_ah2 twins plan as their tiles)
import { homedir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { HeliosConfigError, flag } from "../../config.js";

export interface MatmulConfig {
  variant?: string;
  /** Tuning records are used at all (HELIOS_AUTOTUNE is not 0): cache, shipped data, the tuner. */
  autotune: boolean;
  /**
   * When HeliosBackend tunes a shape class it meets untuned: "deferred" (default) runs the best
   * plan available at once and tunes on request (tunePending, `helios warmup`); "eager" tunes on
   * the class's first eager use, inside the product call; "off" never (HELIOS_AUTOTUNE=0).
   */
  tuneMode: TuneMode;
  /** The package's shipped tuning data (data/matmul-tuning.json), read when the cache has no entry. */
  shippedFile: string;
  cacheDir: string;
  /** Unchecked staging loads for problems whose tiles divide M, N and K (coopmat.ts `aligned`). */
  aligned: boolean;
  /** How whole output blocks reach global memory (PlanOptions.outStore). */
  outStore: "wide" | "coopmat" | "staged4";
  /** f32 products may run as bf16 products over presplit hi/lo operands (presplit.ts). */
  presplit: boolean;
  /** Stream-K twins run as stream-K where they apply (streamk.ts); false plans them as their tiles. */
  streamK: boolean;
  /** `_a2`/`_b2` twins keep their second stage where it fits (CoopConfig.stagesA/B); false plans them as their tiles. */
  twoStage: boolean;
}

type Env = Record<string, string | undefined>;

export type TuneMode = "deferred" | "eager" | "off";

/** The package root: this file is dist/ts/kernels/matmul/config.js there. */
const PACKAGE_ROOT = join(dirname(fileURLToPath(import.meta.url)), "..", "..", "..", "..");
export const SHIPPED_TUNING_FILE = join(PACKAGE_ROOT, "data", "matmul-tuning.json");

/** HELIOS_AUTOTUNE: deferred | eager, or a 0/1 switch (1 = deferred, the default). */
function tuneModeOf(env: Env): TuneMode {
  const raw = env.HELIOS_AUTOTUNE?.trim().toLowerCase();
  if (raw === "deferred" || raw === "eager") return raw;
  try {
    return flag(env, "HELIOS_AUTOTUNE", true) ? "deferred" : "off";
  } catch {
    throw new HeliosConfigError("HELIOS_AUTOTUNE", env.HELIOS_AUTOTUNE, "deferred, eager, 0 or 1 (1 = deferred)");
  }
}

export function readMatmulConfig(env: Env = process.env): MatmulConfig {
  const tuneMode = tuneModeOf(env);
  const autotune = tuneMode !== "off";
  const aligned = flag(env, "HELIOS_MATMUL_ALIGNED", true);
  const presplit = flag(env, "HELIOS_MATMUL_PRESPLIT", true);
  const streamK = flag(env, "HELIOS_MATMUL_STREAMK", true);
  const twoStage = flag(env, "HELIOS_MATMUL_TWO_STAGE", true);
  const store = env.HELIOS_MATMUL_STORE?.trim().toLowerCase() || "wide";
  if (store !== "wide" && store !== "coopmat" && store !== "staged4") {
    throw new HeliosConfigError("HELIOS_MATMUL_STORE", env.HELIOS_MATMUL_STORE, "wide, coopmat or staged4");
  }
  const variant = env.HELIOS_MATMUL_VARIANT?.trim() || undefined;
  const cacheDir = env.HELIOS_CACHE_DIR?.trim() ||
    join(env.XDG_CACHE_HOME?.trim() || join(homedir(), ".cache"), "helios");
  return { variant, autotune, tuneMode, shippedFile: SHIPPED_TUNING_FILE, cacheDir, aligned, outStore: store, presplit, streamK, twoStage };
}
