// Packing 16-bit values into 32-bit words: 128-bit loads of f16/bf16 data arrive as u32x4 (see
// docs/kernel-ir.md, "Wide memory access"); each u32 bitcasts to a pair of halves, `.x` being
// the half at the lower address.
import { Expr, vecOf } from "./expr.js";
import { scalarOf, typeName, widthOf } from "./types.js";

/** Splits a u32 / u32x2 / u32x4 into its `t`x2 pairs, lowest address first (lazy expressions). */
export function unpackHalves(words: Expr, t: "f16" | "bf16" = "f16"): Expr[] {
  if (scalarOf(words.type) !== "u32") throw new Error(`unpackHalves needs u32 words, got ${typeName(words.type)}`);
  const n = widthOf(words.type);
  const lanes = n === 1 ? [words] : ["x", "y", "z", "w"].slice(0, n).map((c) => words.swz(c));
  return lanes.map((w) => w.bitcast(`${t}x2`));
}

/** Packs 1, 2 or 4 pairs of halves (f16x2 / bf16x2) into a u32 / u32x2 / u32x4. */
export function packHalves(pairs: Expr[]): Expr {
  for (const p of pairs) {
    if (widthOf(p.type) !== 2 || !["f16", "bf16"].includes(scalarOf(p.type))) {
      throw new Error(`packHalves needs f16x2 or bf16x2 pairs, got ${typeName(p.type)}`);
    }
  }
  const words = pairs.map((p) => p.bitcast("u32"));
  if (words.length === 1) return words[0];
  if (words.length !== 2 && words.length !== 4) throw new Error(`packHalves takes 1, 2 or 4 pairs, got ${words.length}`);
  return vecOf(words.length === 2 ? "u32x2" : "u32x4", ...words);
}
