// Handles for memory a kernel touches: storage buffers, shared arrays and local variables. Every
// read is eager (bound with a `let` where the builder call happens), like a shader language.
import { Expr, lift, type ExprLike } from "./expr.js";
import type { Access, AtomicFn, ExprNode, Layout, MemRef, Stmt, TensorNode, ViewFields } from "./nodes.js";
import {
  isCoopMat, scalarOf, typeName, type CoopMatType, type ScalarType, type Type, type ValueType,
} from "./types.js";

const u32Like: ValueType = "u32";

/** What a memory handle needs of its kernel builder (`KernelBuilder`): a named value and a statement. */
export interface StmtSink {
  let(value: ExprLike, hint?: string): Expr;
  emit(stmt: Stmt): void;
}

/** A coopmat2 tensor-layout access (see TensorNode): u32 dims and slice origin. */
export interface TensorAccess {
  dims: [ExprLike, ExprLike];
  at: [ExprLike, ExprLike];
  clamp?: "zero" | "edge";
}

function tensorNode(t: TensorAccess): TensorNode {
  const n: TensorNode = {
    dims: [lift(t.dims[0], u32Like).node, lift(t.dims[1], u32Like).node],
    at: [lift(t.at[0], u32Like).node, lift(t.at[1], u32Like).node],
  };
  if (t.clamp) n.clamp = t.clamp;
  return n;
}

/** Shared by storage buffers and shared arrays: loads, stores, atomics, coopmat load/store. */
abstract class Memory {
  constructor(
    protected readonly k: StmtSink,
    readonly name: string,
    readonly elem: ValueType,
  ) {}

  protected abstract ref(): MemRef;

  /** Extra fields of loads and coopmat ops (a buffer view's vec/as). */
  protected view(): ViewFields {
    return {};
  }

  /** Extra fields of stores (a buffer view's as; the width comes from the value). */
  protected storeView(): { as?: ViewFields["as"] } {
    return {};
  }

  load(idx: ExprLike): Expr {
    const node = { op: "load", ...this.ref(), ...this.view(), idx: lift(idx, u32Like).node } as ExprNode;
    return this.k.let(new Expr(node, this.elem), this.name);
  }

  store(idx: ExprLike, value: ExprLike): void {
    const v = lift(value, this.elem);
    this.k.emit({ s: "store", ...this.ref(), ...this.storeView(), idx: lift(idx, u32Like).node, value: v.node });
  }

  /** Atomic read-modify-write; returns the old value. */
  atomic(fn: AtomicFn, idx: ExprLike, value: ExprLike, cmp?: ExprLike): Expr {
    const node = {
      op: "atomic",
      fn,
      ...this.ref(),
      idx: lift(idx, u32Like).node,
      a: lift(value, this.elem).node,
      ...(cmp === undefined ? {} : { cmp: lift(cmp, this.elem).node }),
    } as ExprNode;
    return this.k.let(new Expr(node, this.elem), `${this.name}_old`);
  }
  atomicAdd(idx: ExprLike, v: ExprLike): Expr { return this.atomic("add", idx, v); }
  atomicMin(idx: ExprLike, v: ExprLike): Expr { return this.atomic("min", idx, v); }
  atomicMax(idx: ExprLike, v: ExprLike): Expr { return this.atomic("max", idx, v); }

  /** Loads a cooperative matrix whose first element is at element offset `idx`; with `tensor`
   *  (coopmat2), `idx` is the tensor's origin and the load is bounds-checked. */
  cmLoad(t: CoopMatType, idx: ExprLike, stride: ExprLike, layout: Layout = "row", tensor?: TensorAccess): Expr {
    const node = {
      ...(tensor ? { tensor: tensorNode(tensor) } : {}),
      op: "cmload",
      t,
      ...this.ref(),
      ...this.view(),
      idx: lift(idx, u32Like).node,
      stride: lift(stride, u32Like).node,
      layout,
    } as ExprNode;
    return this.k.let(new Expr(node, t), `${this.name}_cm`);
  }

  cmStore(value: Expr, idx: ExprLike, stride: ExprLike, layout: Layout = "row", tensor?: TensorAccess): void {
    this.k.emit({
      ...(tensor ? { tensor: tensorNode(tensor) } : {}),
      s: "cmstore",
      ...this.ref(),
      ...this.view(),
      idx: lift(idx, u32Like).node,
      stride: lift(stride, u32Like).node,
      layout,
      value: value.node,
    });
  }
}

/** A storage buffer binding; `index` is its binding number. */
export class Buffer extends Memory {
  constructor(
    k: StmtSink,
    name: string,
    elem: Exclude<ScalarType, "bool">,
    readonly access: Access,
    readonly index: number,
  ) {
    super(k, name, elem);
  }

  protected ref(): MemRef {
    return { b: this.index };
  }

  /** Vector-view load: element `idx` of the buffer seen as `elem x n` (idx counts vectors). */
  loadVec(idx: ExprLike, n: 2 | 4): Expr {
    return this.as(scalarOf(this.elem) as Exclude<ScalarType, "bool">, n).load(idx);
  }

  /**
   * The buffer seen as elements of another type: `a.as("u32", 4)` reads/writes 128-bit u32x4
   * (idx counts those elements); cooperative matrices can load from/store to such a view.
   */
  as(scalar: Exclude<ScalarType, "bool">, vec: 1 | 2 | 4 = 1): BufferView {
    return new BufferView(this.k, this, scalar, vec);
  }
}

/** A reinterpreting or vector view of a storage buffer (see `Buffer.as`). */
export class BufferView extends Memory {
  constructor(
    k: StmtSink,
    readonly buffer: Buffer,
    readonly scalar: Exclude<ScalarType, "bool">,
    readonly vec: 1 | 2 | 4,
  ) {
    super(k, buffer.name, (vec === 1 ? scalar : `${scalar}x${vec}`) as ValueType);
  }
  protected ref(): MemRef {
    return { b: this.buffer.index };
  }
  protected view(): ViewFields {
    const v: ViewFields = {};
    if (this.vec !== 1) v.vec = this.vec;
    if (this.scalar !== this.buffer.elem) v.as = this.scalar;
    return v;
  }
  protected storeView(): { as?: ViewFields["as"] } {
    return this.scalar !== this.buffer.elem ? { as: this.scalar } : {};
  }
}

/**
 * A workgroup shared array. `store(i, v)` with a 2- or 4-wide vector `v` of a scalar array is a
 * vector store (`i` counts vectors); `loadVec(i, n)` and `vec(n)` read it the same way. For 128-bit
 * traffic of 16-bit data, declare the array `u32x4` and bitcast (`q.x.bitcast("f16x2")`).
 */
export class Shared extends Memory {
  constructor(k: StmtSink, name: string, elem: ValueType, readonly len: number) {
    super(k, name, elem);
  }
  protected ref(): MemRef {
    return { sh: this.name };
  }

  /** Vector-view load: element `idx` of the array seen as `elem x n` (idx counts vectors). */
  loadVec(idx: ExprLike, n: 2 | 4): Expr {
    return this.vec(n).load(idx);
  }

  /**
   * The array seen as `elem x n` vectors: loads, stores and cooperative matrices (idx and stride
   * in vectors). A coopmat on an array with vector views must use its widest view.
   */
  vec(n: 2 | 4): SharedView {
    if (typeof this.elem !== "string" || this.elem.includes("x")) {
      throw new Error(`${this.name}: vector views apply to shared arrays of scalars, not ${typeName(this.elem)}`);
    }
    return new SharedView(this.k, this, n);
  }
}

/** A vector view of a shared array of scalars (see `Shared.vec`). */
export class SharedView extends Memory {
  constructor(k: StmtSink, readonly array: Shared, readonly n: 2 | 4) {
    super(k, array.name, `${scalarOf(array.elem)}x${n}` as ValueType);
  }
  protected ref(): MemRef {
    return { sh: this.array.name };
  }
  protected view(): ViewFields {
    return { vec: this.n };
  }
}

/** A mutable function-local (scalar, vector or coopmat). */
export class Var {
  constructor(private readonly k: StmtSink, readonly name: string, readonly type: Type) {}

  /** Reads the current value (eagerly, at this point of the program). */
  get(): Expr {
    return this.k.let(new Expr({ op: "get", name: this.name }, this.type), this.name);
  }
  set(value: ExprLike): void {
    this.k.emit({ s: "set", name: this.name, value: lift(value, this.type).node });
  }
  /** Element `i` of a coopmat var (see `KernelBuilder.cmLen`) or a vector component. */
  at(i: ExprLike): Expr {
    const t = scalarOf(this.type);
    const node: ExprNode = { op: "get", name: this.name, idx: lift(i, u32Like).node };
    return this.k.let(new Expr(node, t), this.name);
  }
  setAt(i: ExprLike, value: ExprLike): void {
    const v = lift(value, scalarOf(this.type));
    this.k.emit({ s: "set", name: this.name, idx: lift(i, u32Like).node, value: v.node });
  }
}

/** A fixed-size function-local array (register tiles, several coopmat accumulators). */
export class VarArray {
  constructor(
    private readonly k: StmtSink,
    readonly name: string,
    readonly elem: Type,
    readonly len: number,
  ) {}

  at(i: ExprLike): Expr {
    const node: ExprNode = { op: "get", name: this.name, idx: lift(i, u32Like).node };
    return this.k.let(new Expr(node, this.elem), this.name);
  }
  set(i: ExprLike, value: ExprLike): void {
    if (isCoopMat(this.elem) && !(value instanceof Expr)) {
      throw new Error(`${this.name}: a ${typeName(this.elem)} element needs an expression`);
    }
    const v = lift(value, this.elem);
    this.k.emit({ s: "set", name: this.name, idx: lift(i, u32Like).node, value: v.node });
  }
}
