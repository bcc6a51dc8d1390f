// Kernel IR types (docs/kernel-ir.md, "Types"): strings for scalars and vectors, objects for
// cooperative matrices. Kept as plain data so a description serializes with JSON.stringify as is.

export type ScalarType = "f32" | "f16" | "bf16" | "i32" | "u32" | "bool";
export type VecWidth = 2 | 3 | 4;
export type VectorType = `${ScalarType}x${VecWidth}`;
export type CoopUse = "a" | "b" | "acc";
export type CoopScope = "subgroup" | "workgroup";

export interface CoopMatType {
  coopmat: CoopUse;
  elem: ScalarType;
  rows: number;
  cols: number;
  scope: CoopScope;
}

export type ValueType = ScalarType | VectorType;
export type Type = ValueType | CoopMatType;

export const f32 = "f32" as const;
export const f16 = "f16" as const;
export const bf16 = "bf16" as const;
export const i32 = "i32" as const;
export const u32 = "u32" as const;
export const bool = "bool" as const;

/** `vec(f32, 4)` -> `"f32x4"`. */
export function vec<S extends ScalarType, N extends VecWidth>(s: S, n: N): `${S}x${N}` {
  return `${s}x${n}`;
}

/** A cooperative-matrix type; `scope` defaults to `subgroup` (SPV_KHR_cooperative_matrix). */
export function coopmat(
  use: CoopUse,
  elem: ScalarType,
  rows: number,
  cols: number,
  scope: CoopScope = "subgroup",
): CoopMatType {
  return { coopmat: use, elem, rows, cols, scope };
}

export function isCoopMat(t: Type): t is CoopMatType {
  return typeof t === "object";
}

/** Scalar component of a scalar, vector or coopmat type. */
export function scalarOf(t: Type): ScalarType {
  if (isCoopMat(t)) return t.elem;
  const x = t.indexOf("x");
  return (x < 0 ? t : t.slice(0, x)) as ScalarType;
}

/** 1 for scalars (and coopmats), N for vectors. */
export function widthOf(t: Type): number {
  if (isCoopMat(t)) return 1;
  const x = t.indexOf("x");
  return x < 0 ? 1 : Number(t.slice(x + 1));
}

/** Same shape as `t` with scalar component `s`. */
export function withScalar(t: Type, s: ScalarType): Type {
  if (isCoopMat(t)) return { ...t, elem: s };
  const w = widthOf(t);
  return w === 1 ? s : (`${s}x${w}` as VectorType);
}

export function isFloat(s: ScalarType): boolean {
  return s === "f32" || s === "f16" || s === "bf16";
}

export function isInt(s: ScalarType): boolean {
  return s === "i32" || s === "u32";
}

export function typeEq(a: Type, b: Type): boolean {
  if (isCoopMat(a) || isCoopMat(b)) {
    return (
      isCoopMat(a) &&
      isCoopMat(b) &&
      a.coopmat === b.coopmat &&
      a.elem === b.elem &&
      a.rows === b.rows &&
      a.cols === b.cols &&
      a.scope === b.scope
    );
  }
  return a === b;
}

export function typeName(t: Type): string {
  return isCoopMat(t) ? `coopmat<${t.coopmat},${t.elem},${t.rows}x${t.cols},${t.scope}>` : t;
}

/** Bytes of one element in a buffer or shared array. */
export function byteSize(t: ValueType): number {
  const s = scalarOf(t);
  const w = widthOf(t);
  const b = s === "f16" || s === "bf16" ? 2 : 4;
  return b * (w === 3 ? 4 : w);
}
