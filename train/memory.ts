// The training step's live set, computed from the model's shapes: what a perfect allocator (one
// that frees every temporary at its last use and reuses any freed byte) would peak at. The train
// suite prints it next to the pool's measured peaks, so a gap is visible as either tensors kept
// alive too long (peakLeasedBytes above the estimate) or buffers of one size that cannot serve
// leases of another (peakBytes above peakLeasedBytes). The sums follow model.ts.
import type { GPTConfig } from "./config.js";
import { numel, paramSpecs } from "./params.js";

export interface LiveSetEstimate {
  /** Parameters, AdamW's m and v (f32), always resident. */
  state: number;
  /** f32 gradients of every parameter (all live at the update). */
  grads: number;
  /** f16 copies of the matrices made once per step (matmul16). */
  halfWeights: number;
  /** Activations the forward keeps for the backward, all blocks. */
  saved: number;
  /** The LM head at its widest: logits and their gradient for one row chunk. */
  head: number;
  /** max(state + halfWeights + saved + head, state + grads): the two candidate peaks. */
  peak: number;
}

/**
 * Per block the forward keeps x, the LayerNorm outputs h1 and h2, Q, K, V, the attention output
 * O and its row statistics, y (O in rows), x1, and the MLP's f and g = gelu(f), [N, 4C] each;
 * under matmul16 h1, y, h2 and g are kept as their f16 matmul operands. `headRows` is the row
 * chunk GPT.headRows picks (all N rows when the logits fit its byte budget). With `fusedHeads`
 * (GPT.heads: attention on the qkv rows) O is y itself, one [N, C] less. With `splitsAhead`
 * (GPT.f32Fused) each block also keeps qkv's bf16 hi/lo split from the forward to the backward
 * (qkv itself stays its pending bias add over the product, the same bytes as qkv; g's split
 * replaces g), and a head chunk holds dlogits' two splits beside the logits and dlogits.
 */
export function estimateLiveSet(cfg: GPTConfig, batch: number, seq: number, matmul16: boolean, headRows: number, fusedHeads = false, splitsAhead = false): LiveSetEstimate {
  const N = batch * seq, C = cfg.dim, V = cfg.vocab;
  const specs = paramSpecs(cfg);
  const P = specs.reduce((a, s) => a + numel(s.shape), 0);
  const matrices = specs.filter((s) => s.shape.length === 2 && !s.name.endsWith("wpe.weight")).reduce((a, s) => a + numel(s.shape), 0);
  const op = matmul16 ? 2 : 4;
  const qkvSplit = splitsAhead ? 4 * N * 3 * C : 0;
  const perBlock = 4 * N * C * 6 + 4 * N * 4 * C + op * N * C * (fusedHeads ? 2 : 3) + op * N * 4 * C + 4 * batch * cfg.heads * seq + qkvSplit;
  // The last block's output and the final LayerNorm's (the head's operand).
  const saved = cfg.layers * perBlock + 4 * N * C + op * N * C;
  const rows = Math.min(N, headRows);
  const head = rows * V * (op + op + (splitsAhead ? 8 : 0)) + 4 * N * C;
  const state = 3 * 4 * P, grads = 4 * P, halfWeights = matmul16 ? 2 * matrices : 0;
  return { state, grads, halfWeights, saved, head, peak: Math.max(state + halfWeights + saved + head, state + grads + halfWeights) };
}
