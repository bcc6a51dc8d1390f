// f32 -> bf16 rounded to nearest even in integer arithmetic. Vulkan leaves the rounding of a
// conversion to a narrower float to the implementation, and the hi/lo splits (x ~ hi + lo) need
// round to nearest: under truncation the low part carries ~2^-14 of x instead of ~2^-16 (H100
// session 7: the split attention was ~8x less accurate on the GPU than in the interpreter, which
// rounds to nearest). Rounding the bits first leaves a value bf16 holds exactly, so the final
// conversion is exact whatever its rounding mode.
import { select, vecOf, type Expr } from "./expr.js";
import { widthOf, withScalar, type ValueType } from "./types.js";

/** x (f32 or f32xN) rounded to the nearest bf16 value (ties to even), still as f32; NaN stays NaN. */
export function roundToBf16(x: Expr): Expr {
  const ut = withScalar(x.type, "u32") as ValueType;
  const bits = x.bitcast(ut);
  // a shift by a scalar keeps the scalar's type: a vector shifts by a vector
  const w = widthOf(ut);
  const sixteen = w > 1 ? vecOf(ut, ...Array<number>(w).fill(16)) : 16;
  const rounded = bits.add(bits.shr(sixteen).band(1)).add(0x7fff).band(0xffff0000).bitcast(x.type as ValueType);
  // a NaN's bits could round into the infinity pattern
  return select(x.eq(x), rounded, x);
}

/** x (f32 or f32xN) as bf16 (or bf16xN), rounded to nearest even on every device. */
export function toBf16(x: Expr): Expr {
  return roundToBf16(x).cast(withScalar(x.type, "bf16"));
}
