// GLSL.std.450-style free functions over expressions: `exp(x)`, `fma(a, b, c)`, `max(x, 0)`.
import { bin, Expr, tern, un, type ExprLike } from "./expr.js";

export const exp = (a: Expr): Expr => un("exp", a);
export const exp2 = (a: Expr): Expr => un("exp2", a);
export const log = (a: Expr): Expr => un("log", a);
export const log2 = (a: Expr): Expr => un("log2", a);
export const sqrt = (a: Expr): Expr => un("sqrt", a);
export const rsqrt = (a: Expr): Expr => un("rsqrt", a);
export const tanh = (a: Expr): Expr => un("tanh", a);
export const sin = (a: Expr): Expr => un("sin", a);
export const cos = (a: Expr): Expr => un("cos", a);
export const abs = (a: Expr): Expr => un("abs", a);
export const floor = (a: Expr): Expr => un("floor", a);
export const ceil = (a: Expr): Expr => un("ceil", a);
export const round = (a: Expr): Expr => un("round", a);
export const trunc = (a: Expr): Expr => un("trunc", a);
export const fract = (a: Expr): Expr => un("fract", a);
export const sign = (a: Expr): Expr => un("sign", a);
export const neg = (a: Expr): Expr => un("neg", a);

export const pow = (a: ExprLike, b: ExprLike): Expr => bin("pow", a, b);
export const atan2 = (a: ExprLike, b: ExprLike): Expr => bin("atan2", a, b);
export const min = (a: ExprLike, b: ExprLike): Expr => bin("min", a, b);
export const max = (a: ExprLike, b: ExprLike): Expr => bin("max", a, b);
export const step = (edge: ExprLike, x: ExprLike): Expr => bin("step", edge, x);
export const dot = (a: Expr, b: Expr): Expr => bin("dot", a, b);

export const fma = (a: ExprLike, b: ExprLike, c: ExprLike): Expr => tern("fma", a, b, c);
export const mix = (a: ExprLike, b: ExprLike, t: ExprLike): Expr => tern("mix", a, b, t);
export const clamp = (x: ExprLike, lo: ExprLike, hi: ExprLike): Expr => tern("clamp", x, lo, hi);
