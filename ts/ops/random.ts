// Host side of generated random tensors (kernels in ts/kernels/random.ts).
import type { Shape } from "../types.js";
import { type Engine, run } from "../engine.js";
import type { HeliosTensor } from "../tensor.js";
import { size } from "../shape.js";
import { grid1d } from "../kernels/common.js";
import { RANDN_PUSH, randnKernel } from "../kernels/random.js";

/** Standard normals generated on the device from two 32-bit keys (the caller's seeded stream). */
export function randn(E: Engine, shape: Shape, dtype: "f32" | "f16", key0: number, key1: number): HeliosTensor {
  const out = E.alloc(shape, dtype, "randn");
  const n = size(shape);
  if (n === 0) return out;
  run(E, "randn", { randn: dtype }, () => randnKernel(dtype), RANDN_PUSH, { n, key0: key0 >>> 0, key1: key1 >>> 0 }, [], [out], grid1d(n));
  return out;
}
