// Elementwise expression trees: what a pending (not yet dispatched) tensor will compute.
// Every value is computed in f32; leaves convert on load and the root converts on store.
import type { Dtype, Shape } from "../types.js";
import type { Lease } from "../exec/lease.js";

/** Unary ops and how many f32 parameters (push constants) each takes. */
export const UNARY_PARAMS = {
  copy: 0, neg: 0, exp: 0, log: 0, sqrt: 0, relu: 0, gelu: 0, silu: 0, sigmoid: 0, tanh: 0,
  scale: 1, addScalar: 1, pow: 1, clamp: 2, softCap: 1,
} as const;
export type UnaryOp = keyof typeof UNARY_PARAMS;

/** Binary ops (x, y) and their parameter counts. Backward ops take (input, grad). */
export const BINARY_PARAMS = {
  add: 0, sub: 0, mul: 0, div: 0,
  geluBwd: 0, reluBwd: 0, siluBwd: 0, siluMul: 0,
  clampBwd: 2, softCapBwd: 1,
  /** x where y == 0, else the parameter (Alpha's maskedFill). */
  maskedFill: 1,
} as const;
export type BinaryOp = keyof typeof BINARY_PARAMS;

export interface Leaf {
  readonly k: "leaf";
  readonly lease: Lease;
  readonly shape: Shape;
  readonly dtype: Dtype;
}

export interface UnaryNode {
  readonly k: "un";
  readonly shape: Shape;
  readonly op: UnaryOp;
  readonly x: Expr;
  readonly params: readonly number[];
}

export interface BinaryNode {
  readonly k: "bin";
  readonly shape: Shape;
  readonly op: BinaryOp;
  readonly a: Expr;
  readonly b: Expr;
  readonly params: readonly number[];
}

export type Expr = Leaf | UnaryNode | BinaryNode;

export function countNodes(e: Expr, seen = new Set<Expr>()): number {
  if (seen.has(e)) return 0;
  seen.add(e);
  if (e.k === "leaf") return 1;
  if (e.k === "un") return 1 + countNodes(e.x, seen);
  return 1 + countNodes(e.a, seen) + countNodes(e.b, seen);
}

export function leavesOf(e: Expr, out = new Set<Lease>()): Set<Lease> {
  if (e.k === "leaf") out.add(e.lease);
  else if (e.k === "un") leavesOf(e.x, out);
  else {
    leavesOf(e.a, out);
    leavesOf(e.b, out);
  }
  return out;
}
