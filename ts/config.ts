// The one place TypeScript reads HELIOS_* environment variables (Rust reads its own in
// src/config.rs). Every flag here is listed in docs/flags.md with its default.

/**
 * HELIOS_FLASH_VARIANT values (ts/kernels/attention-variants.ts): `auto` takes the first that
 * serves the problem in FLASH_AUTO order (f16: acc-w4s1-sl, f32: x3-w8s1-k32x, x3-w4s1-k32x, then
 * simt); a named variant that cannot serve it falls back the same way.
 */
export const FLASH_VARIANTS = ["auto", "acc-w4s1-sl", "x3-w8s1-k32x", "x3-w4s1-k32x", "simt"] as const;
export type FlashVariantName = (typeof FLASH_VARIANTS)[number];

export interface HeliosConfig {
  /** HELIOS_FUSION: fuse chains of elementwise ops into one generated kernel. Default on. */
  readonly fusion: boolean;
  /** HELIOS_BATCH_SIZE: dispatches recorded before the open batch is submitted. Default 256. */
  readonly batchSize: number;
  /**
   * HELIOS_SUBMIT_EARLY_US: an open batch older than this many microseconds is submitted as soon
   * as the GPU has at most one submission left to run (ts/exec/scheduler.ts, Scheduler.early), so
   * a GPU that would run dry starts on what is recorded instead of waiting for HELIOS_BATCH_SIZE
   * dispatches or a read. Default 100; 0: batches go only at the size threshold, a read or a flush.
   */
  readonly submitEarlyUs: number;
  /** HELIOS_FUSION_MAX_NODES: largest expression fused into one kernel. Default 32. */
  readonly fusionMaxNodes: number;
  /** HELIOS_CAPTURE: run the training step as a captured batch replayed each step. Default on. */
  readonly capture: boolean;
  /** HELIOS_FLASH_VARIANT: flash attention forward kernel (FLASH_VARIANTS). Default auto. */
  readonly flashVariant: FlashVariantName;
  /**
   * HELIOS_ATTN_BWD: attention backward. "auto" (default): the tensor-core flash kernels
   * (flash_bwd_*_cm; for f32 their split bf16 hi/lo form at f32 accuracy) where they serve, else batched tensor-core matmuls over dense scores
   * on devices with cooperative matrices, else the fused SIMT flash kernels; "cm" is auto without
   * the dense path; "dense" forces the dense path (any device); "flash" forces the SIMT kernels.
   */
  readonly attnBackward: "auto" | "cm" | "dense" | "flash";
  /**
   * HELIOS_ATTN_HEAD_LAYOUT: how the trainer feeds attention. "fused" (default): flashAttention and
   * its backward read Q, K, V straight from the qkv projection's [B*T, 3*H*D] output and write O
   * and dQKV as rows (a packed AttentionLayout): no head transposes, split or cat copies; "copy":
   * Q, K, V are split and transposed to [B*H, T, D] and O, dQ, dK, dV back (the A/B control).
   */
  readonly attnHeadLayout: "fused" | "copy";
  /**
   * HELIOS_MATMUL_PREPACK: a matmul B operand (a 2-D weight) fed unchanged to products of one form on both sides
   * of a host round trip is copied once into its other layout (K×N ↔ N×K) when that layout runs measurably faster
   * (ts/ops/prepack.ts). "auto" (default): decided from the tuner's timings of both layouts (GPUs
   * with HELIOS_AUTOTUNE on; never elsewhere); "on": every reused NT weight is packed to K×N
   * (tests); "off" (or 0): never.
   */
  readonly matmulPrepack: "auto" | "on" | "off";
  /**
   * HELIOS_COMPILE_THREADS: threads for the pipeline compiles of new kernels, which the engine
   * defers and compiles together before queued dispatches reach the runtime (ts/exec/pipelines.ts).
   * 0 (unset): the host's cores, at most 16; 1: each kernel compiled alone when an op first
   * needs it (the behaviour before, the A/B control). Process-wide: the last backend made sets it.
   */
  readonly compileThreads: number;
  /**
   * HELIOS_MULTI_TENSOR_ADAMW: the optimizer's multi-tensor kernels. On (default): totalSumOfSquares
   * reduces up to 29 tensors per dispatch and the trainer updates its parameters with
   * adamwStepMulti (up to 7 tensors per dispatch); off: one dispatch per tensor for each.
   */
  readonly multiTensorAdamw: boolean;
  /**
   * HELIOS_MULTI_TENSOR_CAST: castTransposeMulti (the trainer's per-step f16 weight copies under
   * matmul16). On (default): each matrix's f16 copy and f16 transposed copy, for up to 10 matrices
   * per dispatch (cast_transpose_multi); off: castDtype and transpose per matrix, two dispatches each.
   */
  readonly multiTensorCast: boolean;
  /**
   * HELIOS_TRAIN_FUSED_LINEAR: the trainer's matmul16 layers. On (default): bias (and the residual
   * of the projections) in the matmul epilogue (HeliosBackend.linear), f16 qkv and MLP
   * pre-activation written by their matmuls, GELU's backward in the epilogue of the dy·W_proj
   * product (linear's geluGradOf, df written in f16), LayerNorm writing its f16 matmul operand;
   * off: the products, then elementwise passes for bias, residual, GELU's backward and the f16
   * casts (the A/B control).
   */
  readonly trainFusedLinear: boolean;
}

export const DEFAULT_CONFIG: HeliosConfig = Object.freeze({
  fusion: true,
  batchSize: 256,
  submitEarlyUs: 100,
  fusionMaxNodes: 32,
  capture: true,
  flashVariant: "auto",
  attnBackward: "auto",
  attnHeadLayout: "fused",
  matmulPrepack: "auto",
  compileThreads: 0,
  multiTensorAdamw: true,
  multiTensorCast: true,
  trainFusedLinear: true,
});

type Env = Record<string, string | undefined>;

/**
 * An invalid HELIOS_* value (a typo must not silently run with the default): the code matches
 * the native runtime's rejection of its own variables (src/config.rs).
 */
export class HeliosConfigError extends Error {
  readonly code = "ERR_HELIOS_INVALID_ARGUMENT";
  constructor(readonly variable: string, value: string | undefined, accepted: string) {
    super(`${variable}=${value}: expected ${accepted}`);
    this.name = "HeliosConfigError";
  }
}

/** A 0/1/true/false/on/off variable; unset or empty reads as `dflt`. */
export function flag(env: Env, name: string, dflt: boolean): boolean {
  const raw = env[name]?.trim().toLowerCase();
  if (raw === undefined || raw === "") return dflt;
  if (raw === "0" || raw === "false" || raw === "off" || raw === "no") return false;
  if (raw === "1" || raw === "true" || raw === "on" || raw === "yes") return true;
  throw new HeliosConfigError(name, env[name], "0 or 1 (or true/false, on/off, yes/no)");
}

/** A whole number from min to max; unset or empty gives dflt. */
function intInRange(env: Env, name: string, dflt: number, min: number, max: number): number {
  const raw = env[name]?.trim();
  if (raw === undefined || raw === "") return dflt;
  const n = /^\d+$/.test(raw) ? Number(raw) : NaN; // Number() would take "0x10", "1e3", " "
  if (!Number.isInteger(n) || n < min || n > max) throw new HeliosConfigError(name, env[name], `an integer from ${min} to ${max}`);
  return n;
}

function positiveInt(env: Env, name: string, dflt: number, max: number): number {
  return intInRange(env, name, dflt, 1, max);
}

function oneOf<T extends string>(env: Env, name: string, choices: readonly T[], dflt: T): T {
  const raw = env[name]?.trim().toLowerCase();
  if (raw === undefined || raw === "") return dflt;
  if (!(choices as readonly string[]).includes(raw)) throw new HeliosConfigError(name, env[name], `one of ${choices.join(", ")}`);
  return raw as T;
}

/** HELIOS_MATMUL_PREPACK: auto, or a 0/1/on/off switch. */
function prepackMode(env: Env): HeliosConfig["matmulPrepack"] {
  const raw = env.HELIOS_MATMUL_PREPACK?.trim().toLowerCase();
  if (raw === undefined || raw === "" || raw === "auto") return DEFAULT_CONFIG.matmulPrepack;
  return flag(env, "HELIOS_MATMUL_PREPACK", true) ? "on" : "off";
}

/** Reads the environment once per call; HeliosBackend reads it at construction. */
export function readConfig(env: Env = process.env): HeliosConfig {
  return Object.freeze({
    fusion: flag(env, "HELIOS_FUSION", DEFAULT_CONFIG.fusion),
    batchSize: positiveInt(env, "HELIOS_BATCH_SIZE", DEFAULT_CONFIG.batchSize, 1 << 16),
    submitEarlyUs: intInRange(env, "HELIOS_SUBMIT_EARLY_US", DEFAULT_CONFIG.submitEarlyUs, 0, 1_000_000),
    fusionMaxNodes: positiveInt(env, "HELIOS_FUSION_MAX_NODES", DEFAULT_CONFIG.fusionMaxNodes, 256),
    capture: flag(env, "HELIOS_CAPTURE", DEFAULT_CONFIG.capture),
    flashVariant: oneOf(env, "HELIOS_FLASH_VARIANT", FLASH_VARIANTS, DEFAULT_CONFIG.flashVariant),
    attnBackward: oneOf(env, "HELIOS_ATTN_BWD", ["auto", "cm", "dense", "flash"] as const, DEFAULT_CONFIG.attnBackward),
    attnHeadLayout: oneOf(env, "HELIOS_ATTN_HEAD_LAYOUT", ["fused", "copy"] as const, DEFAULT_CONFIG.attnHeadLayout),
    matmulPrepack: prepackMode(env),
    compileThreads: positiveInt(env, "HELIOS_COMPILE_THREADS", DEFAULT_CONFIG.compileThreads, 256),
    multiTensorAdamw: flag(env, "HELIOS_MULTI_TENSOR_ADAMW", DEFAULT_CONFIG.multiTensorAdamw),
    multiTensorCast: flag(env, "HELIOS_MULTI_TENSOR_CAST", DEFAULT_CONFIG.multiTensorCast),
    trainFusedLinear: flag(env, "HELIOS_TRAIN_FUSED_LINEAR", DEFAULT_CONFIG.trainFusedLinear),
  });
}

/** Process-wide startup reporting (ts/startup/): read once, at the first startup work. */
export interface StartupConfig {
  /** HELIOS_PROGRESS: the one-line progress indicator for startup work over ~1 s. Default on. */
  readonly progress: boolean;
  /** HELIOS_STARTUP_TRACE: null (unset or 0), "stderr" (1), or a file for the JSON trace. */
  readonly trace: string | null;
}

export function readStartupConfig(env: Env = process.env): StartupConfig {
  const raw = env.HELIOS_STARTUP_TRACE?.trim() ?? "";
  const off = raw === "" || /^(0|false|off|no)$/i.test(raw);
  const trace = off ? null : /^(1|true|on|yes)$/i.test(raw) ? "stderr" : raw;
  return Object.freeze({ progress: flag(env, "HELIOS_PROGRESS", true), trace });
}

/** The distributed layer's settings (ts/distributed/), read by initDistributed(). */
export interface DistConfig {
  /**
   * HELIOS_DIST_TIMEOUT_S: how long a rank waits for the others at a rendezvous step (connect,
   * gather, barrier), and how long a rank may go silent (no heartbeat) or leave a collective
   * unfinished before every rank aborts. Default 300 (1 to 86400).
   */
  readonly timeoutS: number;
  /**
   * HELIOS_DIST_BUCKET_MB: gradient bucket size of the data-parallel reducer. Default 1024 (1 to 4096):
   * NCCL's kernels run in a CUDA context beside Helios's Vulkan one, and two contexts time-slice the
   * GPU instead of overlapping, so every bucket costs a switch and a wait rather than hiding under
   * backward (2 × H200, GPT-2 124M: 25 MiB buckets 0.887 scaling efficiency, 100 MiB 0.940, one
   * bucket 0.957; docs/distributed.md).
   */
  readonly bucketMB: number;
}

export function readDistConfig(env: Env = process.env): DistConfig {
  return Object.freeze({
    timeoutS: positiveInt(env, "HELIOS_DIST_TIMEOUT_S", 300, 86400),
    bucketMB: positiveInt(env, "HELIOS_DIST_BUCKET_MB", 1024, 4096),
  });
}
