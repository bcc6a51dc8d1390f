// The JSON shape of a kernel description, version 1 (docs/kernel-ir.md). The builder produces
// these; Rust (src/ir/decode.rs) reads them.
import type { CoopMatType, ScalarType, Type, ValueType } from "./types.js";

export const IR_VERSION = 1;

export type Access = "read" | "write" | "readwrite";

export interface BindingDesc {
  name: string;
  elem: Exclude<ScalarType, "bool">;
  access: Access;
}

export interface PushField {
  name: string;
  type: "u32" | "i32" | "f32" | "u32x2" | "i32x2" | "f32x2" | "u32x4" | "i32x4" | "f32x4";
}

export interface SpecDesc {
  name: string;
  id: number;
  type: "u32" | "i32" | "f32" | "bool";
  value: number | boolean;
}

export interface SharedDesc {
  name: string;
  elem: ValueType;
  len: number;
}

export interface KernelDesc {
  version: number;
  name: string;
  workgroup: (number | string)[];
  bindings: BindingDesc[];
  push?: PushField[];
  spec?: SpecDesc[];
  shared?: SharedDesc[];
  subgroupSize?: number;
  body: Stmt[];
}

/** Where a load/store/atomic goes: a binding by index or a shared array by name. */
export type MemRef = { b: number; sh?: undefined } | { sh: string; b?: undefined };

/** A binding seen as vectors (`vec`) and/or another scalar type (`as`): loads, cm ops. */
export interface ViewFields {
  vec?: 1 | 2 | 4;
  as?: Exclude<ScalarType, "bool">;
}

/** Bounds-checked coopmat access through an NV tensor layout (coopmat2): the matrix is the
 *  slice at `at` of a row-major `dims` tensor; loads clamp (zero or edge), stores clip. */
export interface TensorNode {
  dims: [ExprNode, ExprNode];
  at: [ExprNode, ExprNode];
  clamp?: "zero" | "edge";
}

export type LitValue = number | boolean | string | (number | boolean | string)[];

export type BinOp =
  | "add" | "sub" | "mul" | "div" | "rem"
  | "lt" | "le" | "gt" | "ge" | "eq" | "ne"
  | "and" | "or" | "xor"
  | "band" | "bor" | "bxor" | "shl" | "shr"
  | "pow" | "atan2" | "min" | "max" | "step" | "dot";

export type UnOp =
  | "neg" | "not" | "bnot"
  | "exp" | "exp2" | "log" | "log2" | "sqrt" | "rsqrt" | "tanh" | "sin" | "cos"
  | "abs" | "floor" | "ceil" | "round" | "trunc" | "fract" | "sign";

export type TernOp = "fma" | "mix" | "clamp";

export type Builtin =
  | "global_id" | "local_id" | "workgroup_id" | "num_workgroups"
  | "local_index" | "subgroup_id" | "subgroup_size" | "subgroup_invocation" | "num_subgroups";

export type SubgroupFn = "add" | "mul" | "min" | "max" | "and" | "or" | "xor";
export type SubgroupMode = "reduce" | "inclusive" | "exclusive";
export type AtomicFn = "add" | "sub" | "min" | "max" | "and" | "or" | "xor" | "exchange" | "cas";
export type Layout = "row" | "col";

export type ExprNode =
  | { op: "lit"; t: ValueType; v: LitValue }
  | { op: "get"; name: string; idx?: ExprNode }
  | { op: "push"; name: string }
  | { op: "spec"; name: string }
  | { op: "builtin"; name: Builtin }
  | ({ op: "load"; idx: ExprNode } & MemRef & ViewFields)
  | { op: "swz"; a: ExprNode; c: string }
  | { op: "vec"; t: ValueType; args: ExprNode[] }
  | { op: BinOp; a: ExprNode; b: ExprNode }
  | { op: UnOp; a: ExprNode }
  | { op: TernOp; a: ExprNode; b: ExprNode; c: ExprNode }
  | { op: "select"; c: ExprNode; a: ExprNode; b: ExprNode }
  | { op: "cast" | "bitcast"; t: Type; a: ExprNode }
  | { op: "sg"; fn: SubgroupFn; mode: SubgroupMode; a: ExprNode }
  | { op: "shuffle" | "shuffle_xor" | "broadcast"; a: ExprNode; b: ExprNode }
  | { op: "broadcast_first" | "sg_all" | "sg_any"; a: ExprNode }
  | { op: "elect" }
  | ({ op: "atomic"; fn: AtomicFn; idx: ExprNode; a: ExprNode; cmp?: ExprNode } & MemRef)
  | { op: "cmfill"; t: CoopMatType; a: ExprNode }
  | ({ op: "cmload"; t: CoopMatType; idx: ExprNode; stride: ExprNode; layout: Layout; tensor?: TensorNode } & MemRef & ViewFields)
  | { op: "cmmuladd"; a: ExprNode; b: ExprNode; c: ExprNode; sat?: boolean }
  | { op: "cmlen"; t: CoopMatType };

export type Stmt =
  | { s: "let"; name: string; value: ExprNode }
  | { s: "var"; name: string; type: Type; init?: ExprNode; len?: number }
  | { s: "set"; name: string; idx?: ExprNode; value: ExprNode }
  | ({ s: "store"; idx: ExprNode; value: ExprNode; as?: ViewFields["as"] } & MemRef)
  | { s: "if"; cond: ExprNode; then: Stmt[]; else?: Stmt[] }
  | { s: "for"; var: string; from: ExprNode; to: ExprNode; step?: ExprNode; unroll?: boolean; body: Stmt[] }
  | { s: "while"; cond: ExprNode; body: Stmt[] }
  | { s: "loop"; body: Stmt[] }
  | { s: "break" }
  | { s: "continue" }
  | { s: "return" }
  | { s: "barrier"; scope?: "workgroup" | "subgroup"; mem?: ("workgroup" | "storage")[] }
  | { s: "fence"; scope?: "workgroup" | "subgroup"; mem: ("workgroup" | "storage")[] }
  | { s: "eval"; value: ExprNode }
  | ({ s: "cmstore"; idx: ExprNode; stride: ExprNode; layout: Layout; value: ExprNode; tensor?: TensorNode } & MemRef & ViewFields);
