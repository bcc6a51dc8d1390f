// Shared tiny configurations and helpers for the train-* tests.
import type { GPTConfig, OptimConfig } from "../train/config.js";
import { DEFAULT_OPTIM } from "../train/config.js";
import { Rng } from "../train/rng.js";
import type { HostBatch } from "../train/data.js";

export const TINY: GPTConfig = { vocab: 13, blockSize: 8, layers: 2, heads: 2, dim: 8, dropout: 0 };
export const TINY_OPT: OptimConfig = { ...DEFAULT_OPTIM, lr: 3e-2, warmup: 0, clip: 1.0 };

/** A learnable stream: token t+1 = (3 * token t + 1) mod vocab with random starts. */
export function patternBatch(vocab: number, B: number, T: number, seed: number): HostBatch {
  const rng = new Rng(seed);
  const idx = new Int32Array(B * T), targets = new Int32Array(B * T);
  for (let b = 0; b < B; b++) {
    let x = rng.int(vocab);
    for (let t = 0; t < T; t++) {
      idx[b * T + t] = x;
      x = (3 * x + 1) % vocab;
      targets[b * T + t] = x;
    }
  }
  return { idx, targets, B, T };
}

export function randomBatch(vocab: number, B: number, T: number, seed: number): HostBatch {
  const rng = new Rng(seed);
  const idx = Int32Array.from({ length: B * T }, () => rng.int(vocab));
  const targets = Int32Array.from({ length: B * T }, () => rng.int(vocab));
  return { idx, targets, B, T };
}
