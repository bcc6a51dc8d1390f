// Turns an expression tree into a flat program for one fused kernel: deduplicated inputs,
// SSA instructions, parameters, and the collapsed index space. The signature covers
// structure, dtypes and indexing modes but not sizes or parameter values, so one compiled
// kernel serves every tensor size and every scalar.
import type { Dtype, Shape } from "../types.js";
import type { Lease } from "../exec/lease.js";
import { broadcastStrides, contiguousStrides, size } from "../shape.js";
import { type Expr, type UnaryOp, type BinaryOp, UNARY_PARAMS, BINARY_PARAMS } from "./expr.js";

/** How a fused kernel finds input element i of the output: i itself, 0, or via strides. */
export type IndexMode = "full" | "scalar" | "strided";

export interface PlanInput {
  readonly lease: Lease;
  readonly dtype: Dtype;
  readonly mode: IndexMode;
  /** Element strides per collapsed output dim (only for "strided"). */
  readonly strides: readonly number[];
}

export type Instr =
  | { readonly k: "load"; readonly input: number }
  | { readonly k: "un"; readonly op: UnaryOp; readonly x: number; readonly param: number }
  | { readonly k: "bin"; readonly op: BinaryOp; readonly a: number; readonly b: number; readonly param: number };

export interface FusedPlan {
  readonly signature: string;
  readonly inputs: readonly PlanInput[];
  /** Collapsed output dims (row-major); used only when some input is strided. */
  readonly dims: readonly number[];
  readonly program: readonly Instr[];
  readonly params: readonly number[];
  readonly outDtype: Dtype;
  readonly n: number;
}

/** Largest collapsed rank a fused kernel indexes; more dims are an internal split. */
export const MAX_FUSED_RANK = 6;
/** Push-constant bytes guaranteed by every Vulkan device. */
export const PUSH_BUDGET = 128;

export function pushBytes(p: Pick<FusedPlan, "inputs" | "dims" | "params">): number {
  const strided = p.inputs.filter((i) => i.mode === "strided").length;
  const rank = strided > 0 ? p.dims.length : 0;
  return 4 * (1 + rank + strided * rank + p.params.length);
}

/**
 * Whether a plan with strided inputs can run four elements per thread: the innermost collapsed
 * dim is a multiple of 4 and every strided input walks it with stride 0 (the four share one
 * value) or 1 with all its other strides multiples of 4 (the four are one aligned vector).
 */
export function vec4Strided(p: Pick<FusedPlan, "inputs" | "dims">): boolean {
  const inner = p.dims[p.dims.length - 1];
  if (inner === undefined || inner % 4 !== 0) return false;
  return p.inputs.every((i) => {
    if (i.mode !== "strided") return true;
    const last = i.strides[i.strides.length - 1];
    return last === 0 || (last === 1 && i.strides.slice(0, -1).every((s) => s % 4 === 0));
  });
}

export function planFused(root: Expr, outShape: Shape, outDtype: Dtype): FusedPlan {
  const leafIndex = new Map<string, number>();
  const leaves: { lease: Lease; dtype: Dtype; strides: number[] }[] = [];
  const program: Instr[] = [];
  const params: number[] = [];
  const memo = new Map<Expr, number>();
  const leaseIds = new Map<Lease, number>();

  const visit = (e: Expr): number => {
    const hit = memo.get(e);
    if (hit !== undefined) return hit;
    let v: number;
    if (e.k === "leaf") {
      const st = broadcastStrides("fusion", e.shape, outShape);
      if (!leaseIds.has(e.lease)) leaseIds.set(e.lease, leaseIds.size);
      const key = `${leaseIds.get(e.lease)}:${e.dtype}:${st.join(",")}`;
      let li = leafIndex.get(key);
      if (li === undefined) {
        li = leaves.length;
        leaves.push({ lease: e.lease, dtype: e.dtype, strides: st });
        leafIndex.set(key, li);
      }
      v = program.findIndex((ins) => ins.k === "load" && ins.input === li);
      if (v < 0) {
        v = program.length;
        program.push({ k: "load", input: li });
      }
    } else if (e.k === "un") {
      const x = visit(e.x);
      const param = params.length;
      params.push(...e.params.slice(0, UNARY_PARAMS[e.op]));
      v = program.length;
      program.push({ k: "un", op: e.op, x, param });
    } else {
      const a = visit(e.a);
      const b = visit(e.b);
      const param = params.length;
      params.push(...e.params.slice(0, BINARY_PARAMS[e.op]));
      v = program.length;
      program.push({ k: "bin", op: e.op, a, b, param });
    }
    memo.set(e, v);
    return v;
  };
  visit(root);

  const { dims, strides } = collapse(outShape, leaves.map((l) => l.strides));
  const full = contiguousStrides(dims);
  const inputs: PlanInput[] = leaves.map((l, i) => {
    const st = strides[i];
    const mode: IndexMode = st.every((s) => s === 0)
      ? "scalar"
      : st.every((s, d) => s === full[d] || dims[d] === 1)
        ? "full"
        : "strided";
    return { lease: l.lease, dtype: l.dtype, mode, strides: mode === "strided" ? st : [] };
  });
  const anyStrided = inputs.some((i) => i.mode === "strided");
  const signature = [
    `out=${outDtype}`,
    `rank=${anyStrided ? dims.length : 0}`,
    inputs.map((i) => `${i.dtype}/${i.mode}`).join(","),
    program.map(instrKey).join(";"),
  ].join("|");
  return { signature, inputs, dims, program, params, outDtype, n: size(outShape) };
}

function instrKey(ins: Instr): string {
  if (ins.k === "load") return `L${ins.input}`;
  if (ins.k === "un") return `${ins.op}(${ins.x})`;
  return `${ins.op}(${ins.a},${ins.b})`;
}

/**
 * Drops size-1 dims and merges neighbours that every operand walks contiguously, so
 * [N, C] + [C] indexes as 2-D and same-shape operands as 1-D.
 */
export function collapse(shape: Shape, strides: number[][]): { dims: number[]; strides: number[][] } {
  const keep = shape.map((_, i) => i).filter((i) => shape[i] !== 1);
  let dims = keep.map((i) => shape[i]);
  let st = strides.map((s) => keep.map((i) => s[i]));
  for (let d = dims.length - 2; d >= 0; d--) {
    const mergeable = st.every((s) => s[d] === s[d + 1] * dims[d + 1]);
    if (mergeable) {
      dims = [...dims.slice(0, d), dims[d] * dims[d + 1], ...dims.slice(d + 2)];
      st = st.map((s) => [...s.slice(0, d), s[d + 1], ...s.slice(d + 2)]);
    }
  }
  if (dims.length === 0) {
    dims = [1];
    st = st.map(() => [0]);
  }
  return { dims, strides: st };
}
