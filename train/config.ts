// Model and run configuration for the trainer. HELIOS_* variables are read in ts/config.ts only.
import { readConfig } from "../ts/config.js";

export interface GPTConfig {
  /** Vocabulary size (256 for bytes; 50304 for GPT-2 padded). */
  readonly vocab: number;
  /** Longest sequence (rows of the position embedding). */
  readonly blockSize: number;
  readonly layers: number;
  readonly heads: number;
  /** Model width; a multiple of heads. */
  readonly dim: number;
  /** Residual dropout probability (0 = off). */
  readonly dropout: number;
}

/** GPT-2 small (124M parameters, vocab padded to 50304): the train suite's and `helios warmup`'s default. */
export const GPT2_124M: GPTConfig = { vocab: 50304, blockSize: 1024, layers: 12, heads: 12, dim: 768, dropout: 0 };

export interface OptimConfig {
  readonly lr: number;
  readonly minLr: number;
  readonly warmup: number;
  /** Steps of the cosine decay from lr to minLr (0: constant lr after warmup). */
  readonly decaySteps: number;
  readonly beta1: number;
  readonly beta2: number;
  readonly eps: number;
  readonly weightDecay: number;
  /** Global-norm clip (0 = off). */
  readonly clip: number;
}

export const DEFAULT_OPTIM: OptimConfig = Object.freeze({
  lr: 1e-3, minLr: 1e-4, warmup: 20, decaySteps: 0, beta1: 0.9, beta2: 0.95, eps: 1e-8, weightDecay: 0.1, clip: 1.0,
});

export const LN_EPS = 1e-5;

export function checkGPTConfig(c: GPTConfig): void {
  const ints: (keyof GPTConfig)[] = ["vocab", "blockSize", "layers", "heads", "dim"];
  for (const k of ints) {
    const v = c[k];
    if (!Number.isInteger(v) || v < 1) throw new Error(`GPTConfig.${k} = ${v}: expected a positive integer`);
  }
  if (c.dim % c.heads !== 0) throw new Error(`GPTConfig: dim ${c.dim} is not a multiple of heads ${c.heads}`);
  if (!(c.dropout >= 0 && c.dropout < 1)) throw new Error(`GPTConfig.dropout = ${c.dropout}: expected [0, 1)`);
}

export interface TrainEnv {
  /** HELIOS_CAPTURE (ts/config.ts): run the training step as a captured batch replayed each step. */
  readonly capture: boolean;
}

/** The training-relevant slice of the backend configuration (HELIOS_* is parsed only in ts/config.ts). */
export function readTrainEnv(env: Record<string, string | undefined> = process.env): TrainEnv {
  return Object.freeze({ capture: readConfig(env).capture });
}
