// The kernel builder: reads like a small shader language and produces a KernelDesc (nodes.ts).
//
//   const k = kernel("add_f32", { workgroup: [256] });
//   const a = k.buffer("a", f32, "read"), b = k.buffer("b", f32, "read");
//   const out = k.buffer("out", f32, "write");
//   const { n } = k.push({ n: u32 });
//   const i = k.let(k.globalId.x, "i");
//   k.if(i.lt(n), () => out.store(i, a.load(i).add(b.load(i))));
//   const desc = k.finish();
import { Expr, lift, type ExprLike } from "./expr.js";
import { Buffer, Shared, Var, VarArray } from "./memory.js";
import {
  IR_VERSION,
  type Access, type Builtin, type ExprNode, type KernelDesc, type PushField, type SharedDesc,
  type SpecDesc, type Stmt, type SubgroupFn, type SubgroupMode,
} from "./nodes.js";
import {
  isCoopMat, scalarOf, typeName, typeEq, type CoopMatType, type ScalarType, type Type, type ValueType,
} from "./types.js";

export interface KernelOptions {
  /** Up to 3 sizes; a string names a u32 spec constant declared with `k.spec`. */
  workgroup: (number | string)[];
  subgroupSize?: number;
}

export interface ForOptions {
  step?: ExprLike;
  unroll?: boolean;
  name?: string;
}

type PushSpec = Record<string, PushField["type"]>;

export class KernelBuilder {
  private readonly bindings: Buffer[] = [];
  private readonly pushFields: PushField[] = [];
  private readonly specs: SpecDesc[] = [];
  private readonly sharedArrays: SharedDesc[] = [];
  private readonly blocks: Stmt[][] = [[]];
  private readonly used = new Map<string, number>();
  private readonly names = new Set<string>();
  private loopDepth = 0;
  private popped: Stmt[] = [];

  constructor(readonly name: string, readonly options: KernelOptions) {}

  // ---- declarations

  buffer(name: string, elem: Exclude<ScalarType, "bool">, access: Access): Buffer {
    const b = new Buffer(this, name, elem, access, this.bindings.length);
    this.bindings.push(b);
    return b;
  }

  /** Declares push-constant fields in order; returns an expression per field. */
  push<P extends PushSpec>(fields: P): { [K in keyof P]: Expr } {
    const out: Record<string, Expr> = {};
    for (const [name, type] of Object.entries(fields)) {
      this.pushFields.push({ name, type });
      out[name] = new Expr({ op: "push", name }, type);
    }
    return out as { [K in keyof P]: Expr };
  }

  /** A specialization constant; `id` defaults to the next free one. */
  spec(name: string, type: SpecDesc["type"], value: number | boolean, id?: number): Expr {
    const specId = id ?? this.specs.reduce((m, s) => Math.max(m, s.id + 1), 0);
    this.specs.push({ name, id: specId, type, value });
    return new Expr({ op: "spec", name }, type);
  }

  shared(name: string, elem: ValueType, len: number): Shared {
    this.sharedArrays.push({ name, elem, len });
    return new Shared(this, name, elem, len);
  }

  // ---- builtins

  builtin(name: Builtin): Expr {
    const vec3 = name === "global_id" || name === "local_id" || name === "workgroup_id" ||
      name === "num_workgroups";
    return new Expr({ op: "builtin", name }, vec3 ? "u32x3" : "u32");
  }
  get globalId(): Expr { return this.builtin("global_id"); }
  get localId(): Expr { return this.builtin("local_id"); }
  get workgroupId(): Expr { return this.builtin("workgroup_id"); }
  get numWorkgroups(): Expr { return this.builtin("num_workgroups"); }
  get localIndex(): Expr { return this.builtin("local_index"); }
  get subgroupId(): Expr { return this.builtin("subgroup_id"); }
  get subgroupSize(): Expr { return this.builtin("subgroup_size"); }
  get subgroupInvocation(): Expr { return this.builtin("subgroup_invocation"); }
  get numSubgroups(): Expr { return this.builtin("num_subgroups"); }

  // ---- values and locals

  /** Binds `value` to a fresh immutable name here and returns a reference to it. */
  let(value: ExprLike, hint = "v"): Expr {
    const e = value instanceof Expr ? value : lift(value, typeof value === "boolean" ? "bool" : "f32");
    const name = this.fresh(hint);
    this.emit({ s: "let", name, value: e.node });
    return new Expr({ op: "get", name }, e.type);
  }

  var(type: Type, init?: ExprLike, hint = "var"): Var {
    const name = this.fresh(hint);
    const stmt: Stmt = { s: "var", name, type };
    if (init !== undefined) stmt.init = lift(init, type).node;
    this.emit(stmt);
    return new Var(this, name, type);
  }

  array(type: Type, len: number, hint = "arr"): VarArray {
    const name = this.fresh(hint);
    this.emit({ s: "var", name, type, len });
    return new VarArray(this, name, type, len);
  }

  // ---- control flow

  if(cond: Expr, then: () => void, otherwise?: () => void): void {
    const stmt: Stmt = { s: "if", cond: cond.node, then: this.block(then) };
    if (otherwise) stmt.else = this.block(otherwise);
    this.emit(stmt);
  }

  /** `for (i = from; i < to; i += step)`; from/to/step are evaluated once, before the loop. */
  for(from: ExprLike, to: ExprLike, body: (i: Expr) => void, opts: ForOptions = {}): void {
    const f = from instanceof Expr ? from : to instanceof Expr ? lift(from, to.type) : lift(from, "u32");
    const t = lift(to, f.type);
    const name = this.fresh(opts.name ?? "i");
    const i = new Expr({ op: "get", name }, f.type);
    const stmt: Stmt = { s: "for", var: name, from: f.node, to: t.node, body: this.loopBlock(() => body(i)) };
    if (opts.step !== undefined) stmt.step = lift(opts.step, f.type).node;
    if (opts.unroll !== undefined) stmt.unroll = opts.unroll;
    this.emit(stmt);
  }

  /** `while (cond()) body()`; `cond` may read memory (it is rebuilt every iteration). */
  while(cond: () => Expr, body: () => void): void {
    let c: Expr | undefined;
    const head = this.block(() => { c = cond(); });
    if (!c) throw new Error(`${this.name}: while condition returned nothing`);
    const condNode = c.node;
    if (head.length === 0) {
      this.emit({ s: "while", cond: condNode, body: this.loopBlock(body) });
      return;
    }
    const exit: Stmt = { s: "if", cond: { op: "not", a: condNode }, then: [{ s: "break" }] };
    this.emit({ s: "loop", body: [...head, exit, ...this.loopBlock(body)] });
  }

  loop(body: () => void): void {
    this.emit({ s: "loop", body: this.loopBlock(body) });
  }

  break(): void { this.emit({ s: "break" }); }
  continue(): void { this.emit({ s: "continue" }); }
  return(): void { this.emit({ s: "return" }); }

  /** Control barrier; by default workgroup scope, workgroup memory, AcquireRelease. */
  barrier(opts: { scope?: "workgroup" | "subgroup"; mem?: ("workgroup" | "storage")[] } = {}): void {
    const stmt: Stmt = { s: "barrier" };
    if (opts.scope) stmt.scope = opts.scope;
    if (opts.mem) stmt.mem = opts.mem;
    this.emit(stmt);
  }

  fence(mem: ("workgroup" | "storage")[], scope?: "workgroup" | "subgroup"): void {
    this.emit(scope ? { s: "fence", scope, mem } : { s: "fence", mem });
  }

  /** Evaluates an expression for its side effects. */
  eval(e: Expr): void {
    this.emit({ s: "eval", value: e.node });
  }

  // ---- subgroup operations (eager: their position in control flow matters)

  sgReduce(fn: SubgroupFn, a: Expr): Expr { return this.sg(fn, "reduce", a); }
  sgInclusive(fn: SubgroupFn, a: Expr): Expr { return this.sg(fn, "inclusive", a); }
  sgExclusive(fn: SubgroupFn, a: Expr): Expr { return this.sg(fn, "exclusive", a); }
  sg(fn: SubgroupFn, mode: SubgroupMode, a: Expr): Expr {
    return this.let(new Expr({ op: "sg", fn, mode, a: a.node }, a.type), "sg");
  }
  shuffle(a: Expr, lane: ExprLike): Expr { return this.lane("shuffle", a, lane); }
  shuffleXor(a: Expr, mask: ExprLike): Expr { return this.lane("shuffle_xor", a, mask); }
  broadcast(a: Expr, lane: ExprLike): Expr { return this.lane("broadcast", a, lane); }
  broadcastFirst(a: Expr): Expr {
    return this.let(new Expr({ op: "broadcast_first", a: a.node }, a.type), "sg");
  }
  elect(): Expr { return this.let(new Expr({ op: "elect" }, "bool"), "elect"); }
  sgAll(a: Expr): Expr { return this.let(new Expr({ op: "sg_all", a: a.node }, "bool"), "sg"); }
  sgAny(a: Expr): Expr { return this.let(new Expr({ op: "sg_any", a: a.node }, "bool"), "sg"); }

  private lane(op: "shuffle" | "shuffle_xor" | "broadcast", a: Expr, b: ExprLike): Expr {
    return this.let(new Expr({ op, a: a.node, b: lift(b, "u32").node }, a.type), "sg");
  }

  // ---- cooperative matrices

  cmFill(t: CoopMatType, value: ExprLike): Expr {
    return new Expr({ op: "cmfill", t, a: lift(value, scalarOf(t)).node }, t);
  }
  /** `a × b + c`; the result has c's type. */
  cmMulAdd(a: Expr, b: Expr, c: Expr, saturating = false): Expr {
    const node: ExprNode = { op: "cmmuladd", a: a.node, b: b.node, c: c.node };
    if (saturating) node.sat = true;
    return new Expr(node, c.type);
  }
  /**
   * Accumulator -> A/B (attention's P·V). Workgroup scope (coopmat2): one `cast` (component type,
   * then OpCooperativeMatrixConvertNV). Subgroup scope (KHR has no use conversion): a round trip
   * through `scratch`, this subgroup's own rows x cols tile at element `offset` of a shared array
   * of `t`'s element type: cast, cmStore (row-major), subgroup barrier, cmLoad. A barrier before the
   * store also orders it after this subgroup's earlier reads of the tile (next loop iteration).
   */
  cmToUse(acc: Expr, t: CoopMatType, scratch?: { mem: Shared; offset: ExprLike }): Expr {
    if (!isCoopMat(acc.type) || acc.type.coopmat !== "acc" || t.coopmat === "acc") {
      throw new Error(`cmToUse converts an accumulator to a or b, got ${typeName(acc.type)} -> ${typeName(t)}`);
    }
    if (t.scope === "workgroup") return this.let(acc.cast(t), "cm");
    if (!scratch) throw new Error("cmToUse at subgroup scope needs a shared scratch tile");
    const sameElem = { ...acc.type, elem: t.elem };
    const v = this.let(acc.cast(sameElem), "cm");
    const sync = { scope: "subgroup" as const, mem: ["workgroup" as const] };
    this.barrier(sync);
    scratch.mem.cmStore(v, scratch.offset, t.cols, "row");
    this.barrier(sync);
    return scratch.mem.cmLoad(t, scratch.offset, t.cols, "row");
  }

  /** Number of elements of `t` this invocation holds (index range of `Var.at`). */
  cmLen(t: CoopMatType): Expr {
    return new Expr({ op: "cmlen", t }, "u32");
  }

  // ---- output

  finish(): KernelDesc {
    if (this.blocks.length !== 1) throw new Error(`${this.name}: finish() inside a block`);
    const desc: KernelDesc = {
      version: IR_VERSION,
      name: this.name,
      workgroup: this.options.workgroup,
      bindings: this.bindings.map((b) => ({ name: b.name, elem: b.elem as Exclude<ScalarType, "bool">, access: b.access })),
      body: this.blocks[0],
    };
    if (this.pushFields.length) desc.push = this.pushFields;
    if (this.specs.length) desc.spec = this.specs;
    if (this.sharedArrays.length) desc.shared = this.sharedArrays;
    if (this.options.subgroupSize !== undefined) desc.subgroupSize = this.options.subgroupSize;
    return desc;
  }

  json(): string {
    return JSON.stringify(this.finish());
  }

  // ---- internals used by memory.ts

  emit(stmt: Stmt): void {
    this.blocks[this.blocks.length - 1].push(stmt);
  }

  private block(fill: () => void): Stmt[] {
    this.blocks.push([]);
    try {
      fill();
    } finally {
      // popped even when user code throws, so the builder's block stack stays balanced
      this.popped = this.blocks.pop() as Stmt[];
    }
    return this.popped;
  }

  private loopBlock(fill: () => void): Stmt[] {
    this.loopDepth++;
    try {
      return this.block(fill);
    } finally {
      this.loopDepth--;
    }
  }

  /** A name no other value of this kernel uses (the IR forbids shadowing). */
  private fresh(hint: string): string {
    let n = this.used.get(hint) ?? 0;
    let name: string;
    do {
      name = n === 0 ? hint : `${hint}_${n}`;
      n++;
    } while (this.names.has(name));
    this.used.set(hint, n);
    this.names.add(name);
    return name;
  }
}

/** Starts a kernel description. */
export function kernel(name: string, options: KernelOptions): KernelBuilder {
  return new KernelBuilder(name, options);
}

export function assertType(e: Expr, t: Type, what: string): void {
  if (!typeEq(e.type, t)) throw new Error(`${what}: expected ${typeName(t)}, got ${typeName(e.type)}`);
}
