// The A/B switch for LayerNorm backward's fused pass (ts/kernels/layernorm-bwd.ts, issue 27): bench/
// and the tests run the separate passes (dx, then dw/db as a column sum over x and g) or the fused
// pass with other knobs. Nothing under ts/ imports this module; no user flag: once the GPU timings
// are in bench/RESULTS.md the control goes with the separate path's callers.
import { LN_BWD_TUNING, setLayerNormBwdLab, type LnBwdTuning } from "../ts/kernels/layernorm-bwd.js";

export type LnBwdMode = "fused" | "separate";

/** Every later layerNormBackward in this process runs `mode` (with `tune` over the shipped knobs). */
export function useLayerNormBwd(mode: LnBwdMode, tune: Partial<LnBwdTuning> = {}): void {
  setLayerNormBwdLab({ ...tune, fused: mode === "fused" });
}

/** Back to the shipped plan. */
export function resetLayerNormBwd(): void {
  setLayerNormBwdLab(null);
}

/** Runs `body` under `mode`, then restores the shipped plan. */
export function withLayerNormBwd<T>(mode: LnBwdMode, body: () => T, tune: Partial<LnBwdTuning> = {}): T {
  useLayerNormBwd(mode, tune);
  try {
    return body();
  } finally {
    resetLayerNormBwd();
  }
}

export { LN_BWD_TUNING };
