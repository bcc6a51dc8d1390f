// Expressions: an immutable tree node plus its inferred type. Pure operations build trees; anything
// that reads memory is made eager by the kernel builder (builder.ts), not here.
import type { BinOp, ExprNode, LitValue, TernOp, UnOp } from "./nodes.js";
import {
  isCoopMat, scalarOf, typeEq, typeName, widthOf, withScalar,
  type ScalarType, type Type, type ValueType,
} from "./types.js";

/** A number is lifted to a literal of the other operand's scalar type. */
export type ExprLike = Expr | number | boolean;

const COMPARE = new Set<string>(["lt", "le", "gt", "ge", "eq", "ne"]);

export class Expr {
  constructor(readonly node: ExprNode, readonly type: Type) {}

  add(b: ExprLike): Expr { return bin("add", this, b); }
  sub(b: ExprLike): Expr { return bin("sub", this, b); }
  mul(b: ExprLike): Expr { return bin("mul", this, b); }
  div(b: ExprLike): Expr { return bin("div", this, b); }
  rem(b: ExprLike): Expr { return bin("rem", this, b); }
  neg(): Expr { return un("neg", this); }

  lt(b: ExprLike): Expr { return bin("lt", this, b); }
  le(b: ExprLike): Expr { return bin("le", this, b); }
  gt(b: ExprLike): Expr { return bin("gt", this, b); }
  ge(b: ExprLike): Expr { return bin("ge", this, b); }
  eq(b: ExprLike): Expr { return bin("eq", this, b); }
  ne(b: ExprLike): Expr { return bin("ne", this, b); }

  and(b: ExprLike): Expr { return bin("and", this, b); }
  or(b: ExprLike): Expr { return bin("or", this, b); }
  xor(b: ExprLike): Expr { return bin("xor", this, b); }
  not(): Expr { return un("not", this); }

  band(b: ExprLike): Expr { return bin("band", this, b); }
  bor(b: ExprLike): Expr { return bin("bor", this, b); }
  bxor(b: ExprLike): Expr { return bin("bxor", this, b); }
  shl(b: ExprLike): Expr { return bin("shl", this, b); }
  shr(b: ExprLike): Expr { return bin("shr", this, b); }
  bnot(): Expr { return un("bnot", this); }

  min(b: ExprLike): Expr { return bin("min", this, b); }
  max(b: ExprLike): Expr { return bin("max", this, b); }

  /** Numeric conversion (or coopmat component-type conversion). */
  cast(t: Type): Expr {
    if (typeEq(t, this.type)) return this;
    return new Expr({ op: "cast", t, a: this.node }, t);
  }
  bitcast(t: ValueType): Expr { return new Expr({ op: "bitcast", t, a: this.node }, t); }

  /** Swizzle: `v.swz("xy")`. */
  swz(c: string): Expr {
    const s = scalarOf(this.type);
    const t = c.length === 1 ? s : (`${s}x${c.length}` as ValueType);
    return new Expr({ op: "swz", a: this.node, c }, t);
  }
  get x(): Expr { return this.swz("x"); }
  get y(): Expr { return this.swz("y"); }
  get z(): Expr { return this.swz("z"); }
  get w(): Expr { return this.swz("w"); }
}

/** A literal: `lit(f32, 1.5)`, `lit("f32x4", [1, 2, 3, 4])`, `lit(f32, "inf")`. */
export function lit(t: ValueType, v: LitValue): Expr {
  return new Expr({ op: "lit", t, v }, t);
}

/** Lifts a JS number/boolean to a literal shaped like `like` (scalar type of it). */
export function lift(x: ExprLike, like: Type): Expr {
  if (x instanceof Expr) return x;
  if (typeof x === "boolean") return lit("bool", x);
  const s = scalarOf(like);
  const t: ValueType = isCoopMat(like) ? s : (withScalar(like, s) as ValueType);
  return lit(t, liftNumber(x));
}

function liftNumber(x: number): number | string {
  if (Number.isNaN(x)) return "nan";
  if (x === Infinity) return "inf";
  if (x === -Infinity) return "-inf";
  return x;
}

export function bin(op: BinOp, a: ExprLike, b: ExprLike): Expr {
  const [ea, eb] = liftPair(op, a, b);
  return new Expr({ op, a: ea.node, b: eb.node }, binType(op, ea.type, eb.type));
}

export function un(op: UnOp, a: Expr): Expr {
  return new Expr({ op, a: a.node }, a.type);
}

export function tern(op: TernOp, a: ExprLike, b: ExprLike, c: ExprLike): Expr {
  const like = [a, b, c].find((x): x is Expr => x instanceof Expr);
  if (!like) throw new Error(`${op}: needs at least one typed operand`);
  const [ea, eb, ec] = [a, b, c].map((x) => lift(x, like.type));
  return new Expr({ op, a: ea.node, b: eb.node, c: ec.node }, ea.type);
}

export function select(c: Expr, a: ExprLike, b: ExprLike): Expr {
  const like = a instanceof Expr ? a : b instanceof Expr ? b : undefined;
  if (!like) throw new Error("select: needs at least one typed operand");
  const ea = lift(a, like.type);
  const eb = lift(b, like.type);
  return new Expr({ op: "select", c: c.node, a: ea.node, b: eb.node }, ea.type);
}

/** Builds a vector: `vecOf("f32x4", x, y, z, w)` or a splat `vecOf("f32x4", s)`. */
export function vecOf(t: ValueType, ...args: ExprLike[]): Expr {
  const s = scalarOf(t);
  const nodes = args.map((x) => lift(x, s).node);
  return new Expr({ op: "vec", t, args: nodes }, t);
}

function liftPair(op: string, a: ExprLike, b: ExprLike): [Expr, Expr] {
  if (a instanceof Expr) {
    // Vector/coopmat times a number scales by a scalar; shifts keep their own type.
    const scalarSide = op === "mul" || op === "div" || op === "shl" || op === "shr";
    const like: Type = scalarSide && !(b instanceof Expr) ? scalarOf(a.type) : a.type;
    return [a, lift(b, like)];
  }
  if (b instanceof Expr) return [lift(a, b.type), b];
  throw new Error(`${op}: needs at least one typed operand`);
}

function binType(op: BinOp, a: Type, b: Type): Type {
  if (COMPARE.has(op)) return withScalar(a, "bool");
  if (op === "dot") return scalarOf(a);
  if (op === "mul" || op === "div") {
    // matrix/vector times scalar keeps the wide type
    if (isCoopMat(b) && !isCoopMat(a)) return b;
    if (!isCoopMat(a) && widthOf(b) > widthOf(a)) return b;
  }
  if (!typeEq(a, b) && op !== "shl" && op !== "shr" && op !== "mul" && op !== "div") {
    throw new Error(`${op}: ${typeName(a)} vs ${typeName(b)}`);
  }
  return a;
}

/** The scalar type of an expression, for generic code. */
export function scalarTypeOf(e: Expr): ScalarType {
  return scalarOf(e.type);
}
