// Byte-level text data: the whole file as token ids 0..255, a train/validation split, and
// random contiguous windows as batches.
import { readFileSync } from "node:fs";
import { Rng } from "./rng.js";

export interface HostBatch {
  readonly idx: Int32Array;
  readonly targets: Int32Array;
  readonly B: number;
  readonly T: number;
}

export interface TextData {
  readonly train: Uint8Array;
  readonly val: Uint8Array;
}

export function loadText(path: string, valFraction = 0.1): TextData {
  const bytes = new Uint8Array(readFileSync(path));
  const cut = Math.floor(bytes.length * (1 - valFraction));
  return { train: bytes.subarray(0, cut), val: bytes.subarray(cut) };
}

/** B windows of T+1 tokens at random offsets: inputs are the first T, targets the last T. */
export function sampleBatch(tokens: ArrayLike<number>, B: number, T: number, rng: Rng): HostBatch {
  if (tokens.length < T + 1) throw new Error(`text of ${tokens.length} tokens is shorter than T+1 = ${T + 1}`);
  const idx = new Int32Array(B * T), targets = new Int32Array(B * T);
  for (let b = 0; b < B; b++) {
    const off = rng.int(tokens.length - T);
    for (let t = 0; t < T; t++) {
      idx[b * T + t] = tokens[off + t];
      targets[b * T + t] = tokens[off + t + 1];
    }
  }
  return { idx, targets, B, T };
}
