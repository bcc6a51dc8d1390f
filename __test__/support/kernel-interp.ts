// The kernel interpreter (docs/kernel-ir.md), test-only and the only one: runs kernel descriptions
// on the CPU where no device can — cooperative-matrix kernels (lavapipe has none), every backend
// kernel under the mock runtime (__test__/mock/runtime.ts), and pure expressions as the reference
// of the IR property test (`evalExpr`). Every invocation of a workgroup is a generator that yields
// at barriers and subgroup operations (a scheduler releases a subgroup or the workgroup when all
// of it waits; divergent barriers throw); cooperative-matrix ops are evaluated whole by each
// invocation of the subgroup (redundant but exact), which is what the KHR semantics guarantee.
// Out-of-bounds buffer or shared accesses, reads of shared memory or variables never written,
// and integer division by zero throw: on a GPU they would be silent garbage, and kernels must
// never issue them. Arithmetic rounds per type (interp-scalar.ts). Not supported: atomics and
// subgroup scans.
import type { ExprNode, KernelDesc, Stmt } from "../../ts/ir/index.js";
import { isCoopMat, scalarOf, widthOf, type CoopMatType, type Type } from "../../ts/ir/index.js";
import { bitcastValue, decodeBuf, encodeBuf, packedHalf, packedWords, storePackedHalf, storePackedWord, unpackWords } from "./interp-halves.js";
import { binScalar, convert, roundTo, UN, type Scalar } from "./interp-scalar.js";

export { closeTo } from "./interp-scalar.js";

type Value = Scalar | Scalar[] | CoopVal;
interface CoopVal { t: CoopMatType; d: Float64Array }
type Env = Map<string, Value>;

function isCm(v: Value): v is CoopVal {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}

function lanes(v: Value, w: number): Scalar[] {
  return Array.isArray(v) ? v : new Array(w).fill(v);
}

/** Throws unless elements i·n .. i·n + n - 1 lie inside an array of `len` (a load or store). */
function checkRange(i: number, n: number, len: number, what: string): void {
  if (!(Number.isInteger(i) && i >= 0 && (i + 1) * n <= len)) throw new Error(`interp: ${what} at ${i} out of bounds (${len})`);
}

const is16 = (elem: string) => elem === "f16" || elem === "bf16";

/** What a suspended invocation waits for: its subgroup ("sg") or its workgroup ("wg"). */
type Wait = "sg" | "wg";
const SUBGROUP_OPS = new Set(["sg", "sg_any", "sg_all", "shuffle", "shuffle_xor", "broadcast", "broadcast_first", "elect"]);

interface Ctx {
  desc: KernelDesc;
  /** Subgroup-op exchange slots of this workgroup, by subgroup and per-lane sequence number. */
  sgx: Map<string, { a: Value[]; b: Value[]; reads: number }>;
  types: Map<string, Type>;
  push: Map<string, Value>;
  bindings: ArrayLike<number>[] & { [i: number]: { [j: number]: number; length: number } };
  shared: Map<string, Value[]>;
}

export class Interp {
  private readonly types = new Map<string, Type>();
  /** Names of array vars (`get` with an index returns an element of the declared type). */
  private readonly arrays = new Set<string>();
  private readonly body: (env: Env, ctx: Ctx) => Generator<Wait, "ret" | "brk" | "cont" | undefined>;
  /** Specialization constants at their declared values. */
  private readonly spec = new Map<string, Scalar>();
  constructor(readonly desc: KernelDesc) {
    for (const p of desc.push ?? []) this.types.set(`push:${p.name}`, p.type as Type);
    for (const c of desc.spec ?? []) {
      this.types.set(`spec:${c.name}`, c.type as Type);
      this.spec.set(c.name, convert(c.type, c.value));
    }
    this.body = this.block(desc.body);
  }

  /**
   * A pure expression's value and type (no memory, subgroup, push or builtin reads), with `env`'s
   * names bound: the reference the IR property test holds the device to.
   */
  static evaluate(node: ExprNode, env: ExprEnv = new Map(), typeOnly = false): { value?: ExprValue; type: Type } {
    const it = new Interp(PURE);
    const values: Env = new Map();
    for (const [name, b] of env) {
      it.types.set(name, b.type);
      values.set(name, b.value);
    }
    const type = it.typeOf(node);
    if (typeOnly) return { type };
    const value = it.expr(node)(values, undefined as never);
    if (isCm(value)) throw new Error("interp: a cooperative matrix is not a pure value");
    return { value, type };
  }

  private typeOf(n: ExprNode): Type {
    const d = this.desc;
    switch (n.op) {
      case "lit": case "vec": return n.t;
      case "cmlen": return "u32";
      case "get": {
        const t = this.types.get(n.name);
        if (!t) throw new Error(`interp: unknown name ${n.name}`);
        if (n.idx && this.arrays.has(n.name)) return t;
        if (n.idx && isCoopMat(t)) return t.elem;
        return n.idx && widthOf(t) > 1 ? scalarOf(t) : t;
      }
      case "push": return this.types.get(`push:${n.name}`) as Type;
      case "spec": return this.types.get(`spec:${n.name}`) as Type;
      case "dot": return scalarOf(this.typeOf(n.a));
      case "builtin": return ["global_id", "local_id", "workgroup_id", "num_workgroups"].includes(n.name) ? "u32x3" : "u32";
      case "load": {
        const elem = n.b !== undefined ? (n.as ?? d.bindings[n.b].elem) : (d.shared ?? []).find((s) => s.name === n.sh)!.elem;
        return (n.vec ? `${elem}x${n.vec}` : elem) as Type;
      }
      case "swz": { const s = scalarOf(this.typeOf(n.a)); return (n.c.length === 1 ? s : `${s}x${n.c.length}`) as Type; }
      case "cast": case "bitcast": case "cmfill": case "cmload": return n.t;
      case "cmmuladd": return this.typeOf(n.c);
      case "select": return this.typeOf(n.a);
      case "lt": case "le": case "gt": case "ge": case "eq": case "ne": {
        const w = widthOf(this.typeOf(n.a));
        return (w === 1 ? "bool" : `bool${"x"}${w}`) as Type;
      }
      case "mul": case "div": {
        const ta = this.typeOf(n.a), tb = this.typeOf(n.b);
        if (isCoopMat(tb) && !isCoopMat(ta)) return tb;
        if (!isCoopMat(ta) && !isCoopMat(tb) && widthOf(tb) > widthOf(ta)) return tb;
        return ta;
      }
      default:
        if ("a" in n) return this.typeOf(n.a as ExprNode);
        throw new Error(`interp: type of ${n.op}`);
    }
  }

  private expr(n: ExprNode): (env: Env, ctx: Ctx) => Value {
    const t = this.typeOf(n);
    switch (n.op) {
      case "lit": {
        const conv = (x: unknown): Scalar => x === "inf" ? Infinity : x === "-inf" ? -Infinity : x === "nan" ? NaN : convert(scalarOf(t), x as Scalar);
        const v: Value = Array.isArray(n.v) ? n.v.map(conv) : widthOf(t) > 1 ? new Array(widthOf(t)).fill(conv(n.v)) : conv(n.v);
        return () => v;
      }
      case "get": {
        const name = n.name;
        if (n.idx) {
          const idx = this.expr(n.idx);
          // a coopmat var: the interpreter gives every invocation the whole matrix (cmlen = rows·cols)
          return (env, ctx) => { const v = env.get(name) as Scalar[] | CoopVal; const i = idx(env, ctx) as number; return Array.isArray(v) ? v[i] : (v as CoopVal).d[i]; };
        }
        return (env) => { const v = env.get(name); if (v === undefined) throw new Error(`interp: ${name} read before set`); return v; };
      }
      case "push": { const name = n.name; return (_e, ctx) => ctx.push.get(name) as Value; }
      case "spec": { const v = this.spec.get(n.name); if (v === undefined) throw new Error(`interp: unknown spec constant ${n.name}`); return () => v; }
      case "builtin": { const name = n.name; return (env) => env.get(`@${name}`) as Value; }
      case "load": {
        const idx = this.expr(n.idx);
        const vec = n.vec ?? 0;
        if (n.b !== undefined && n.as !== undefined && n.as !== this.desc.bindings[n.b].elem) {
          const b = n.b; const elem = this.desc.bindings[b].elem; const w = vec || 1; const as = n.as;
          if (is16(elem)) {
            // u32 words of a 16-bit binding: each word is two halves, the lower address in its low half
            if (as !== "u32") throw new Error(`interp: binding view as ${as}`);
            return (env, ctx) => { const words = packedWords(ctx.bindings[b], elem, idx(env, ctx) as number, w, b); return vec ? words : words[0]; };
          }
          // a 32-bit binding seen as another 32-bit type: each element's bits
          return (env, ctx) => {
            const buf = ctx.bindings[b]; const i = idx(env, ctx) as number;
            checkRange(i, w, buf.length, `binding ${b} ${as}x${w} view load`);
            const words = Array.from({ length: w }, (_, q) => bitcastValue(elem, as, buf[i * w + q]) as number);
            return vec ? words : words[0];
          };
        }
        if (n.b !== undefined) {
          const b = n.b;
          return (env, ctx) => {
            const buf = ctx.bindings[b];
            const i = idx(env, ctx) as number;
            checkRange(i, vec || 1, buf.length, `binding ${b} ${vec ? `vec${vec} ` : ""}load`);
            return vec ? Array.from({ length: vec }, (_, q) => buf[i * vec + q]) : buf[i];
          };
        }
        const sh = n.sh as string;
        if (vec) {
          // a vector view of a shared array of scalars: idx counts vectors
          return (env, ctx) => {
            const arr = ctx.shared.get(sh)!; const i = idx(env, ctx) as number;
            checkRange(i, vec, arr.length, `shared ${sh} vec${vec} load`);
            return Array.from({ length: vec }, (_, q) => {
              const v = arr[i * vec + q];
              if (v === undefined) throw new Error(`interp: shared ${sh}[${i * vec + q}] read before written`);
              return v as Scalar;
            });
          };
        }
        return (env, ctx) => {
          const arr = ctx.shared.get(sh)!;
          const i = idx(env, ctx) as number;
          checkRange(i, 1, arr.length, `shared ${sh} load`);
          const v = arr[i];
          if (v === undefined) throw new Error(`interp: shared ${sh}[${i}] read before written`);
          return v;
        };
      }
      case "swz": {
        const a = this.expr(n.a);
        const ix = [...n.c].map((ch) => "xyzw".indexOf(ch));
        return (env, ctx) => { const v = a(env, ctx) as Scalar[]; return ix.length === 1 ? v[ix[0]] : ix.map((i) => v[i]); };
      }
      case "vec": {
        const args = n.args.map((x) => this.expr(x));
        const w = widthOf(t);
        return (env, ctx) => { const out = args.flatMap((f) => { const v = f(env, ctx); return Array.isArray(v) ? v : [v]; }); return out.length === 1 ? new Array(w).fill(out[0]) : out; };
      }
      case "select": {
        const c = this.expr(n.c), a = this.expr(n.a), b = this.expr(n.b);
        return (env, ctx) => { const cv = c(env, ctx); if (Array.isArray(cv)) { const av = a(env, ctx) as Scalar[], bv = b(env, ctx) as Scalar[]; return cv.map((x, i) => (x ? av[i] : bv[i])); } return cv ? a(env, ctx) : b(env, ctx); };
      }
      case "cast": {
        const a = this.expr(n.a);
        if (isCoopMat(n.t)) { const ct = n.t; return (env, ctx) => { const v = a(env, ctx) as CoopVal; return { t: ct, d: v.d.map((x) => roundTo(ct.elem, x)) }; }; }
        const s = scalarOf(t);
        return (env, ctx) => { const v = a(env, ctx) as Value; return Array.isArray(v) ? v.map((x) => convert(s, x)) : convert(s, v as Scalar); };
      }
      case "bitcast": {
        const a = this.expr(n.a);
        const from = scalarOf(this.typeOf(n.a)), to = scalarOf(t);
        return (env, ctx) => bitcastValue(from, to, a(env, ctx) as number | number[]) as Value;
      }
      case "cmlen": { const ct = n.t; return () => ct.rows * ct.cols; }
      case "cmfill": {
        const a = this.expr(n.a); const ct = n.t;
        return (env, ctx) => ({ t: ct, d: new Float64Array(ct.rows * ct.cols).fill(roundTo(ct.elem, a(env, ctx) as number)) });
      }
      case "cmload": {
        const idx = this.expr(n.idx), stride = this.expr(n.stride); const ct = n.t; const col = n.layout === "col";
        const b = n.b, sh = n.sh;
        // through a vector view, offset and stride count vectors; a row (column) runs on in elements
        const vec = n.vec ?? 1;
        const decl = sh !== undefined ? String((this.desc.shared ?? []).find((x) => x.name === sh)!.elem) : "";
        if (decl.startsWith("u32x")) {
          // a 16-bit matrix in an array of u32xW words: offset and stride count words of 2W halves
          const w = Number(decl.slice(4));
          return (env, ctx) => {
            const mem = ctx.shared.get(sh as string)!;
            const i0 = idx(env, ctx) as number, st = stride(env, ctx) as number;
            const d = new Float64Array(ct.rows * ct.cols);
            for (let r = 0; r < ct.rows; r++) for (let c = 0; c < ct.cols; c++) {
              const h = col ? (i0 + c * st) * 2 * w + r : (i0 + r * st) * 2 * w + c;
              if (h >= mem.length * 2 * w) throw new Error(`interp: cmload ${sh} half ${h} out of bounds (${mem.length} x u32x${w})`);
              d[r * ct.cols + c] = packedHalf(mem, w, h, ct.elem, sh as string);
            }
            return { t: ct, d };
          };
        }
        return (env, ctx) => {
          const mem: ArrayLike<unknown> = b !== undefined ? ctx.bindings[b] : ctx.shared.get(sh as string)!;
          const i0 = idx(env, ctx) as number, st = stride(env, ctx) as number;
          const d = new Float64Array(ct.rows * ct.cols);
          for (let r = 0; r < ct.rows; r++) for (let c = 0; c < ct.cols; c++) {
            const i = col ? (i0 + c * st) * vec + r : (i0 + r * st) * vec + c;
            checkRange(i, 1, mem.length, `cmload ${b ?? sh}`);
            const v = mem[i];
            if (v === undefined) throw new Error(`interp: cmload ${sh}[${i}] read before written`);
            d[r * ct.cols + c] = roundTo(ct.elem, v as number);
          }
          return { t: ct, d };
        };
      }
      case "cmmuladd": {
        const a = this.expr(n.a), b = this.expr(n.b), c = this.expr(n.c);
        return (env, ctx) => {
          const A = a(env, ctx) as CoopVal, B = b(env, ctx) as CoopVal, C = c(env, ctx) as CoopVal;
          const M = A.t.rows, K = A.t.cols, N = B.t.cols;
          const d = new Float64Array(M * N);
          for (let i = 0; i < M; i++) for (let j = 0; j < N; j++) {
            let s = C.d[i * N + j];
            for (let q = 0; q < K; q++) s += A.d[i * K + q] * B.d[q * N + j];
            d[i * N + j] = roundTo(C.t.elem, s);
          }
          return { t: C.t, d };
        };
      }
      case "dot": {
        const a = this.expr(n.a), b = this.expr(n.b); const s = scalarOf(t);
        return (env, ctx) => {
          const x = a(env, ctx) as number[], y = b(env, ctx) as number[];
          let acc = 0;
          for (let i = 0; i < x.length; i++) acc = roundTo(s, acc + roundTo(s, x[i] * y[i]));
          return acc;
        };
      }
      case "fma": case "mix": case "clamp": {
        const a = this.expr(n.a), b = this.expr(n.b), c = this.expr(n.c); const s = scalarOf(t); const w = widthOf(t); const op = n.op;
        const f = (x: number, y: number, z: number) => op === "fma" ? roundTo(s, x * y + z) : op === "mix" ? roundTo(s, x + (y - x) * z) : Math.min(Math.max(x, y), z);
        return (env, ctx) => {
          const av = a(env, ctx), bv = b(env, ctx), cv = c(env, ctx);
          if (w === 1) return f(av as number, bv as number, cv as number);
          const A = lanes(av, w), B = lanes(bv, w), C = lanes(cv, w);
          return A.map((x, i) => f(x as number, B[i] as number, C[i] as number));
        };
      }
      default: {
        if ("b" in n && "a" in n && n.op !== "shuffle") {
          const a = this.expr(n.a as ExprNode), b = this.expr(n.b as ExprNode);
          const s = scalarOf(this.typeOf(n.a as ExprNode)); const w = widthOf(t); const op = n.op;
          if (isCoopMat(t)) {
            return (env, ctx) => {
              const av = a(env, ctx), bv = b(env, ctx);
              const A = av as CoopVal; const ct = A.t;
              if (isCm(bv)) return { t: ct, d: A.d.map((x, i) => binScalar(op, ct.elem, x, bv.d[i]) as number) };
              return { t: ct, d: A.d.map((x) => binScalar(op, ct.elem, x, bv as number) as number) };
            };
          }
          return (env, ctx) => {
            const av = a(env, ctx), bv = b(env, ctx);
            if (!Array.isArray(av) && !Array.isArray(bv)) return binScalar(op, s, av as Scalar, bv as Scalar);
            const wa = Math.max(w, Array.isArray(av) ? av.length : 1, Array.isArray(bv) ? bv.length : 1);
            const A = lanes(av, wa), B = lanes(bv, wa);
            return A.map((x, i) => binScalar(op, s, x, B[i]));
          };
        }
        if ("a" in n && UN[n.op]) {
          const a = this.expr(n.a as ExprNode); const f = UN[n.op]; const s = scalarOf(t);
          return (env, ctx) => { const v = a(env, ctx); return Array.isArray(v) ? v.map((x) => roundTo(s, f(x as number))) : roundTo(s, f(v as number)); };
        }
        if (n.op === "not") { const a = this.expr(n.a); return (env, ctx) => { const v = a(env, ctx); return Array.isArray(v) ? v.map((x) => !x) : !v; }; }
        throw new Error(`interp: unsupported op ${n.op}`);
      }
    }
  }

  private block(stmts: Stmt[]): (env: Env, ctx: Ctx) => Generator<Wait, "ret" | "brk" | "cont" | undefined> {
    const fns = stmts.map((s) => this.stmt(s));
    return function* (env, ctx) {
      for (const f of fns) {
        const r = yield* f(env, ctx);
        if (r) return r;
      }
      return undefined;
    };
  }

  /**
   * A subgroup operation: every lane parks its operands, waits for its whole subgroup (like a
   * subgroup barrier), then reads the others'. Lanes that have returned count as inactive.
   */
  private subgroupLet(name: string, n: ExprNode): (env: Env, ctx: Ctx) => Generator<Wait, "ret" | "brk" | "cont" | undefined> {
    const node = n as ExprNode & { a?: ExprNode; b?: ExprNode; fn?: string; mode?: string };
    this.types.set(name, node.op === "sg_any" || node.op === "sg_all" || node.op === "elect" ? "bool" : this.typeOf(n));
    const a = node.a ? this.expr(node.a) : () => 0;
    const b = node.b ? this.expr(node.b) : () => 0;
    const op = node.op;
    const s = node.a ? scalarOf(this.typeOf(node.a)) : "u32";
    return function* (env, ctx) {
      const sgId = env.get("@subgroup_id") as number, lane = env.get("@subgroup_invocation") as number;
      const seq = ((env.get("@sgseq") as number | undefined) ?? 0) + 1;
      env.set("@sgseq", seq);
      const key = `${sgId}:${seq}`;
      const slot = ctx.sgx.get(key) ?? { a: [] as Value[], b: [] as Value[], reads: 0 };
      ctx.sgx.set(key, slot);
      slot.a[lane] = a(env, ctx);
      slot.b[lane] = b(env, ctx);
      yield "sg";
      const act = slot.a.map((x, i) => [i, x] as const).filter(([, x]) => x !== undefined);
      if (++slot.reads === act.length) ctx.sgx.delete(key);
      const vals = act.map(([, x]) => x as number);
      let out: Value;
      switch (op) {
        case "sg_any": out = vals.some((x) => !!x); break;
        case "sg_all": out = vals.every((x) => !!x); break;
        case "elect": out = act[0][0] === lane; break;
        case "broadcast_first": out = act[0][1]; break;
        case "shuffle": case "broadcast": out = slot.a[slot.b[lane] as number] as Value; break;
        case "shuffle_xor": out = slot.a[lane ^ (slot.b[lane] as number)] as Value; break;
        case "sg": {
          if (node.mode !== "reduce") throw new Error("interp: only subgroup reduce is supported");
          const fn = node.fn as string;
          out = vals.reduce((p, q) => (fn === "add" ? roundTo(s, p + q) : fn === "mul" ? roundTo(s, p * q) : fn === "max" ? Math.max(p, q) : fn === "min" ? Math.min(p, q) : binScalar(fn === "and" ? "band" : fn === "or" ? "bor" : "bxor", s, p, q) as number));
          break;
        }
        default: throw new Error(`interp: subgroup op ${op}`);
      }
      if (out === undefined) throw new Error(`interp: ${op} read an inactive lane`);
      env.set(name, out);
      return undefined;
    };
  }

  private stmt(s: Stmt): (env: Env, ctx: Ctx) => Generator<Wait, "ret" | "brk" | "cont" | undefined> {
    switch (s.s) {
      case "let": {
        if (SUBGROUP_OPS.has(s.value.op)) return this.subgroupLet(s.name, s.value);
        const v = this.expr(s.value); this.types.set(s.name, this.typeOf(s.value)); const name = s.name;
        return function* (env, ctx) { env.set(name, v(env, ctx)); return undefined; };
      }
      case "var": {
        this.types.set(s.name, s.type);
        if (s.len !== undefined) this.arrays.add(s.name);
        const init = s.init ? this.expr(s.init) : undefined; const name = s.name; const len = s.len;
        return function* (env, ctx) { env.set(name, len ? new Array(len).fill(0) : init ? init(env, ctx) : (undefined as unknown as Value)); return undefined; };
      }
      case "set": {
        const v = this.expr(s.value); const name = s.name; const idx = s.idx ? this.expr(s.idx) : undefined;
        return function* (env, ctx) {
          const val = v(env, ctx);
          if (idx) {
            const cur = env.get(name) as Scalar[] | CoopVal; const i = idx(env, ctx) as number;
            if (Array.isArray(cur)) { const arr = cur.slice(); arr[i] = val as Scalar; env.set(name, arr); }
            else { const d = cur.d.slice(); d[i] = roundTo(cur.t.elem, val as number); env.set(name, { t: cur.t, d }); }
          } else env.set(name, val);
          return undefined;
        };
      }
      case "store": {
        const idx = this.expr(s.idx), v = this.expr(s.value);
        const view = s as { b?: number; as?: string };
        if (view.b !== undefined && view.as !== undefined && view.as !== this.desc.bindings[view.b].elem) {
          const b = view.b; const elem = this.desc.bindings[b].elem; const as = view.as;
          if (is16(elem) && as !== "u32") throw new Error(`interp: binding view as ${as}`);
          return function* (env, ctx) {
            const buf = ctx.bindings[b] as unknown as number[]; const i = idx(env, ctx) as number; const val = v(env, ctx);
            // the value's width is the view's: idx counts words of that width
            const words = (Array.isArray(val) ? val : [val]) as number[];
            // u32 words into a 16-bit binding: each word is two halves, the lower address in its low half
            if (is16(elem)) unpackWords(buf, elem, i, words, b);
            else {
              checkRange(i, words.length, buf.length, `binding ${b} ${as}x${words.length} view store`);
              words.forEach((x, q) => { buf[i * words.length + q] = bitcastValue(as, elem, x) as number; });
            }
            return undefined;
          };
        }
        if (s.b !== undefined) {
          const b = s.b; const elem = this.desc.bindings[b].elem;
          return function* (env, ctx) {
            const buf = ctx.bindings[b] as unknown as number[]; const i = idx(env, ctx) as number; const val = v(env, ctx);
            if (Array.isArray(val)) {
              checkRange(i, val.length, buf.length, `binding ${b} vec${val.length} store`);
              val.forEach((x, q) => { buf[i * val.length + q] = roundTo(elem, x as number); });
            } else {
              checkRange(i, 1, buf.length, `binding ${b} store`);
              buf[i] = roundTo(elem, val as number);
            }
            return undefined;
          };
        }
        const sh = s.sh as string; const decl = (this.desc.shared ?? []).find((x) => x.name === sh)!.elem; const elem = scalarOf(decl);
        // a vector into an array of scalars is a vector-view store: idx counts vectors
        const scalarArray = !String(decl).includes("x");
        return function* (env, ctx) {
          const arr = ctx.shared.get(sh)!; const i = idx(env, ctx) as number;
          const val = v(env, ctx);
          if (scalarArray && Array.isArray(val)) {
            const w = val.length;
            checkRange(i, w, arr.length, `shared ${sh} vec${w} store`);
            val.forEach((x, q) => { arr[i * w + q] = roundTo(elem, x as number); });
            return undefined;
          }
          checkRange(i, 1, arr.length, `shared ${sh} store`);
          arr[i] = Array.isArray(val) ? val.map((x) => roundTo(elem, x as number)) : roundTo(elem, val as number);
          return undefined;
        };
      }
      case "cmstore": {
        const idx = this.expr(s.idx), stride = this.expr(s.stride), v = this.expr(s.value); const col = s.layout === "col";
        const b = s.b, sh = s.sh; const vec = (s as { vec?: number }).vec ?? 1;
        const decl = sh !== undefined ? String((this.desc.shared ?? []).find((x) => x.name === sh)!.elem) : "";
        if (decl.startsWith("u32x")) {
          // a 16-bit matrix into an array of u32xW words: offset and stride count words of 2W halves;
          // a 32-bit one: words of W elements, each element's bits one word (read back by a bitcast)
          const w = Number(decl.slice(4));
          return function* (env, ctx) {
            const mem = ctx.shared.get(sh as string)! as unknown as (number[] | undefined)[];
            const m = v(env, ctx) as CoopVal; const i0 = idx(env, ctx) as number, st = stride(env, ctx) as number;
            if (m.t.elem === "f32") {
              for (let r = 0; r < m.t.rows; r++) for (let c = 0; c < m.t.cols; c++) {
                const e = col ? (i0 + c * st) * w + r : (i0 + r * st) * w + c;
                storePackedWord(mem, w, e, m.d[r * m.t.cols + c], sh as string);
              }
              return undefined;
            }
            for (let r = 0; r < m.t.rows; r++) for (let c = 0; c < m.t.cols; c++) {
              const h = col ? (i0 + c * st) * 2 * w + r : (i0 + r * st) * 2 * w + c;
              storePackedHalf(mem, w, h, m.t.elem, m.d[r * m.t.cols + c], sh as string);
            }
            return undefined;
          };
        }
        const elem = b !== undefined ? this.desc.bindings[b].elem : scalarOf((this.desc.shared ?? []).find((x) => x.name === sh)!.elem);
        return function* (env, ctx) {
          const mem = (b !== undefined ? ctx.bindings[b] : ctx.shared.get(sh as string)!) as unknown as number[];
          const m = v(env, ctx) as CoopVal; const i0 = idx(env, ctx) as number, st = stride(env, ctx) as number;
          for (let r = 0; r < m.t.rows; r++) for (let c = 0; c < m.t.cols; c++) {
            const i = col ? (i0 + c * st) * vec + r : (i0 + r * st) * vec + c;
            checkRange(i, 1, mem.length, `cmstore ${b ?? sh}`);
            mem[i] = roundTo(elem, m.d[r * m.t.cols + c]);
          }
          return undefined;
        };
      }
      case "if": {
        const c = this.expr(s.cond), th = this.block(s.then), el = s.else ? this.block(s.else) : undefined;
        return function* (env, ctx) { if (c(env, ctx)) return yield* th(env, ctx); if (el) return yield* el(env, ctx); return undefined; };
      }
      case "for": {
        const from = this.expr(s.from), to = this.expr(s.to), step = s.step ? this.expr(s.step) : undefined;
        this.types.set(s.var, this.typeOf(s.from));
        const body = this.block(s.body); const name = s.var;
        return function* (env, ctx) {
          const end = to(env, ctx) as number; const st = step ? (step(env, ctx) as number) : 1;
          for (let i = from(env, ctx) as number; i < end; i += st) {
            env.set(name, i);
            const r = yield* body(env, ctx);
            if (r === "brk") break;
            if (r === "ret") return r;
          }
          return undefined;
        };
      }
      case "while": {
        const c = this.expr(s.cond), body = this.block(s.body);
        return function* (env, ctx) { while (c(env, ctx)) { const r = yield* body(env, ctx); if (r === "brk") break; if (r === "ret") return r; } return undefined; };
      }
      case "loop": {
        const body = this.block(s.body);
        return function* (env, ctx) { for (;;) { const r = yield* body(env, ctx); if (r === "brk") break; if (r === "ret") return r; } return undefined; };
      }
      case "break": return function* () { return "brk"; };
      case "continue": return function* () { return "cont"; };
      case "return": return function* () { return "ret"; };
      case "barrier": {
        const kind: Wait = s.scope === "subgroup" ? "sg" : "wg";
        return function* () { yield kind; return undefined; };
      }
      case "fence": case "eval": return function* () { return undefined; };
      default: throw new Error(`interp: statement ${(s as Stmt).s}`);
    }
  }

  /**
   * One dispatch over buffers' bytes: each binding decoded to element values, the kernel run, and
   * every binding it may write encoded back.
   */
  dispatch(buffers: Uint8Array[], groups: [number, number, number], push: ArrayBuffer, subgroupSize?: number): void {
    const d = this.desc;
    if (buffers.length !== d.bindings.length) throw new Error(`${d.name}: ${buffers.length} buffers for ${d.bindings.length} bindings`);
    // One buffer bound at several bindings (packed attention q, k, v; dk and dv written into one
    // tensor) is one array of values, as it is one memory on a device.
    const same = (x: Uint8Array, y: Uint8Array) => x.buffer === y.buffer && x.byteOffset === y.byteOffset && x.byteLength === y.byteLength;
    const first = buffers.map((x) => buffers.findIndex((y) => same(x, y)));
    const vals: number[][] = [];
    d.bindings.forEach((b, i) => {
      const j = first[i];
      if (j !== i && d.bindings[j].elem === b.elem) return vals.push(vals[j]);
      if (j !== i && (b.access !== "read" || d.bindings[j].access !== "read")) throw new Error(`${d.name}: one buffer bound as ${d.bindings[j].elem} and ${b.elem}`);
      // (a buffer only read through two element types is decoded twice)
      first[i] = i;
      vals.push(decodeBuf(buffers[i], b.elem));
    });
    this.run(vals, groups, push, subgroupSize);
    d.bindings.forEach((b, i) => {
      // a buffer bound twice is written back once, from the first binding that writes it
      if (b.access !== "read" && d.bindings.findIndex((c, j) => first[j] === first[i] && c.access !== "read") === i) encodeBuf(vals[i], b.elem, buffers[i]);
    });
  }

  /** The workgroup size, specialization constants resolved. */
  get workgroup(): [number, number, number] {
    const wg = this.desc.workgroup.map((x) => Number(typeof x === "string" ? this.spec.get(x) : x));
    while (wg.length < 3) wg.push(1);
    return wg as [number, number, number];
  }

  /**
   * Runs the kernel over `groups` workgroups; `bindings[i]` are element values, mutated in place.
   * Subgroups are the description's required size, else `subgroupSize` (the device's).
   */
  run(bindings: number[][], groups: [number, number, number], push: ArrayBuffer, subgroupSize = 32): void {
    const d = this.desc;
    const pushVals = new Map<string, Value>();
    const dv = new DataView(push);
    let off = 0;
    for (const p of d.push ?? []) {
      const w = p.type.includes("x") ? Number(p.type.slice(-1)) : 1;
      const align = w === 1 ? 4 : w === 2 ? 8 : 16;
      off = Math.ceil(off / align) * align;
      const rd = (o: number) => p.type.startsWith("f32") ? dv.getFloat32(o, true) : p.type.startsWith("i32") ? dv.getInt32(o, true) : dv.getUint32(o, true);
      pushVals.set(p.name, w === 1 ? rd(off) : Array.from({ length: w }, (_, i) => rd(off + 4 * i)));
      off += 4 * w;
    }
    const wgSize = this.workgroup;
    const nInv = wgSize[0] * wgSize[1] * wgSize[2];
    const sgSize = d.subgroupSize ?? subgroupSize;
    for (let gz = 0; gz < groups[2]; gz++) for (let gy = 0; gy < groups[1]; gy++) for (let gx = 0; gx < groups[0]; gx++) {
      const shared = new Map<string, Value[]>();
      for (const s of d.shared ?? []) shared.set(s.name, new Array(s.len));
      const ctx: Ctx = { desc: d, sgx: new Map(), types: this.types, push: pushVals, bindings: bindings as never, shared };
      const gens: Generator<Wait>[] = [];
      for (let li = 0; li < nInv; li++) {
        const env: Env = new Map();
        const lx = li % wgSize[0], ly = Math.floor(li / wgSize[0]) % wgSize[1], lz = Math.floor(li / (wgSize[0] * wgSize[1]));
        env.set("@local_index", li);
        env.set("@local_id", [lx, ly, lz]);
        env.set("@workgroup_id", [gx, gy, gz]);
        env.set("@num_workgroups", [...groups]);
        env.set("@global_id", [gx * wgSize[0] + lx, gy * wgSize[1] + ly, gz * wgSize[2] + lz]);
        env.set("@subgroup_id", Math.floor(li / sgSize));
        env.set("@subgroup_invocation", li % sgSize);
        env.set("@subgroup_size", sgSize);
        env.set("@num_subgroups", Math.ceil(nInv / sgSize));
        gens.push(this.body(env, ctx));
      }
      schedule(gens, sgSize, d.name);
    }
  }
}

/**
 * Runs the invocations of one workgroup: a subgroup barrier (or subgroup op) releases when every
 * unfinished lane of the subgroup waits at one, a workgroup barrier when every unfinished
 * invocation does. Anything else is a divergent barrier (a real GPU hangs or misbehaves): error.
 */
function schedule(gens: Generator<Wait>[], sgSize: number, name: string): void {
  const state: (Wait | "run" | "done")[] = gens.map(() => "run");
  for (;;) {
    for (let i = 0; i < gens.length; i++) {
      if (state[i] !== "run") continue;
      const r = gens[i].next();
      state[i] = r.done ? "done" : r.value;
    }
    let runnable = false;
    for (let g = 0; g < gens.length; g += sgSize) {
      const lanes = state.slice(g, g + sgSize);
      if (lanes.includes("sg") && lanes.every((x) => x === "sg" || x === "done")) {
        for (let i = g; i < Math.min(g + sgSize, gens.length); i++) if (state[i] === "sg") state[i] = "run";
        runnable = true;
      }
    }
    if (runnable) continue;
    if (state.every((x) => x === "done")) return;
    if (!state.some((x) => x === "run" || x === "sg")) {
      for (let i = 0; i < gens.length; i++) if (state[i] === "wg") state[i] = "run";
      continue;
    }
    throw new Error(`interp: ${name}: divergent barriers (${[...new Set(state)].join(", ")})`);
  }
}

/** Names bound in a pure expression (`evalExpr`): each with its value and type. */
export type ExprValue = Scalar | Scalar[];
export type ExprEnv = Map<string, { value: ExprValue; type: Type }>;

const PURE: KernelDesc = { version: 1, name: "pure", workgroup: [1], bindings: [], body: [] };

/** The value of a pure expression tree (see `Interp.evaluate`). */
export function evalExpr(node: ExprNode, env: ExprEnv = new Map()): ExprValue {
  return Interp.evaluate(node, env).value as ExprValue;
}

/** The type of a pure expression tree, by the same rules as src/ir. */
export function typeOfExpr(node: ExprNode, env: ExprEnv = new Map()): Type {
  return Interp.evaluate(node, env, true).type;
}
