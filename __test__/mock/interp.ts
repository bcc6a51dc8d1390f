// A CPU interpreter for kernel IR descriptions (docs/kernel-ir.md), used by the mock runtime
// so backend tests run before (and alongside) the native compiler. Invocations of a
// workgroup run as generators that yield at barriers; expressions go through the IR's own
// pure evaluator (ts/ir/eval.ts) after push/builtin/spec reads are rewritten to names.
// Out-of-bounds buffer or shared accesses throw: on a GPU they would be silent garbage.
// Not supported (not used by backend kernels): subgroup ops, atomics, coopmats, array vars.
import { evalExpr, typeOfExpr, type Env, type Value } from "../../ts/ir/eval.js";
import type { ExprNode, KernelDesc, Stmt } from "../../ts/ir/nodes.js";
import type { Type, ValueType } from "../../ts/ir/types.js";
import { f16BitsToF32, f32ToF16Bits } from "../../ts/f16.js";

export interface Compiled {
  desc: KernelDesc;
  body: Stmt[];
  wg: [number, number, number];
  pushBytes: number;
}

function rewrite(n: unknown): unknown {
  if (Array.isArray(n)) return n.map(rewrite);
  if (!n || typeof n !== "object") return n;
  const o = n as Record<string, unknown>;
  if (o.op === "push") return { op: "get", name: `$p_${o.name}` };
  if (o.op === "builtin") return { op: "get", name: `$b_${o.name}` };
  if (o.op === "spec") return { op: "get", name: `$s_${o.name}` };
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(o)) out[k] = rewrite(v);
  return out;
}

export function compile(desc: KernelDesc): Compiled {
  const specVal = new Map((desc.spec ?? []).map((s) => [s.name, s.value]));
  const wg = [0, 1, 2].map((i) => {
    const w = desc.workgroup[i] ?? 1;
    return typeof w === "string" ? Number(specVal.get(w)) : w;
  }) as [number, number, number];
  const pushBytes = (desc.push ?? []).reduce((p, f) => p + (f.type.endsWith("x4") ? 16 : f.type.endsWith("x2") ? 8 : 4), 0);
  return { desc, body: rewrite(desc.body) as Stmt[], wg, pushBytes };
}

type Mem = { elem: string; view: Float32Array | Int32Array | Uint32Array | Uint16Array };

function memOf(elem: string, buf: ArrayBuffer): Mem {
  if (elem === "f32") return { elem, view: new Float32Array(buf) };
  if (elem === "i32") return { elem, view: new Int32Array(buf) };
  if (elem === "u32") return { elem, view: new Uint32Array(buf) };
  if (elem === "f16") return { elem, view: new Uint16Array(buf) };
  throw new Error(`interp: buffer element ${elem} unsupported`);
}

/** A binding seen through a reinterpreting view (`Buffer.as`): the same bytes, another type. */
function viewAs(m: Mem, as: string | undefined): Mem {
  return as === undefined || as === m.elem ? m : memOf(as, m.view.buffer as ArrayBuffer);
}

function readMem(m: Mem, i: number, what: string): number {
  if (!Number.isInteger(i) || i < 0 || i >= m.view.length) throw new Error(`interp: ${what}[${i}] out of bounds (length ${m.view.length})`);
  const v = m.view[i];
  return m.elem === "f16" ? f16BitsToF32(v) : v;
}

function writeMem(m: Mem, i: number, v: number, what: string): void {
  if (!Number.isInteger(i) || i < 0 || i >= m.view.length) throw new Error(`interp: ${what}[${i}] out of bounds (length ${m.view.length})`);
  m.view[i] = m.elem === "f16" ? f32ToF16Bits(v) : v;
}

const BREAK = 1, CONTINUE = 2, RETURN = 3;

interface Ctx {
  /** Local invocation index, subgroup size, and the workgroup's subgroup-op exchange slots. */
  li: number;
  sgSize: number;
  sgSeq: number;
  sgSlots: Map<number, (number | boolean)[]>;
  env: Env;
  bufs: Mem[];
  shared: Map<string, { elem: string; data: Float64Array | unknown[] }>;
  name: string;
}

function ev(c: Ctx, n: ExprNode): Value {
  return evalExpr(n, c.env);
}

const typeCache = new WeakMap<object, Type>();

/** Static type of a let value; loads take their memory's element type. */
function typeOf(c: Ctx, n: ExprNode): Type {
  const hit = typeCache.get(n);
  if (hit) return hit;
  let t: Type;
  if (n.op === "load") {
    const e = (n.b !== undefined ? n.as ?? c.bufs[n.b].elem : c.shared.get(n.sh as string)?.elem) as ValueType;
    t = n.vec ? (`${e}x${n.vec}` as ValueType) : e;
  }
  else t = typeOfExpr(n, c.env);
  typeCache.set(n, t);
  return t;
}

function load(c: Ctx, n: ExprNode & { op: "load" }): number {
  const idx = ev(c, n.idx) as number;
  if (n.vec) {
    const w = n.vec;
    if (n.b === undefined) {
      // vector view of a shared array of scalars (idx counts vectors)
      const sh = c.shared.get(n.sh as string);
      if (!sh) throw new Error(`interp: shared ${n.sh}`);
      return Array.from({ length: w }, (_, j) => {
        const k = idx * w + j;
        if (!Number.isInteger(k) || k < 0 || k >= sh.data.length) throw new Error(`interp: ${c.name}: shared ${n.sh}[${k}] out of bounds`);
        return sh.data[k] as number;
      }) as unknown as number;
    }
    const m = viewAs(c.bufs[n.b], n.as);
    return Array.from({ length: w }, (_, j) => readMem(m, idx * w + j, `${c.name}: binding ${n.b}`)) as unknown as number;
  }
  if (n.b !== undefined) return readMem(viewAs(c.bufs[n.b], n.as), idx, `${c.name}: binding ${n.b}`);
  const sh = c.shared.get(n.sh as string);
  if (!sh) throw new Error(`interp: shared ${n.sh}`);
  if (!Number.isInteger(idx) || idx < 0 || idx >= sh.data.length) throw new Error(`interp: ${c.name}: shared ${n.sh}[${idx}] out of bounds`);
  const v = sh.data[idx];
  return (Array.isArray(v) ? [...v] : v) as number;
}

function* run(c: Ctx, stmts: Stmt[]): Generator<void, number, void> {
  for (const s of stmts) {
    switch (s.s) {
      case "let": {
        if (s.value.op === "sg") {
          // every lane parks its operand, all lanes reach this point (a yield), then reduce
          const node = s.value as ExprNode & { op: "sg"; fn: string; mode: string; a: ExprNode };
          if (node.mode !== "reduce") throw new Error("interp: only subgroup reduce is supported");
          const seq = c.sgSeq++;
          const slots = c.sgSlots.get(seq) ?? [];
          c.sgSlots.set(seq, slots);
          slots[c.li] = ev(c, node.a) as number;
          yield;
          const base = c.li - (c.li % c.sgSize);
          const lanes = slots.slice(base, base + c.sgSize).filter((x) => x !== undefined) as number[];
          const r = lanes.reduce((p, q) => (node.fn === "add" ? Math.fround(p + q) : node.fn === "max" ? Math.max(p, q) : node.fn === "min" ? Math.min(p, q) : NaN));
          c.env.set(s.name, { value: r, type: typeOf(c, node.a) });
          break;
        }
        const v = s.value.op === "load" ? load(c, s.value as ExprNode & { op: "load" }) : ev(c, s.value);
        c.env.set(s.name, { value: v, type: typeOf(c, s.value) });
        break;
      }
      case "var": {
        if (s.len !== undefined) throw new Error("interp: array vars unsupported");
        const v = s.init ? ev(c, s.init) : 0;
        c.env.set(s.name, { value: v, type: s.type });
        break;
      }
      case "set": {
        const cur = c.env.get(s.name);
        if (!cur || s.idx) throw new Error(`interp: set ${s.name}`);
        c.env.set(s.name, { value: ev(c, s.value), type: cur.type });
        break;
      }
      case "store": {
        const idx = ev(c, s.idx) as number;
        const v = ev(c, s.value) as number | number[];
        if (Array.isArray(v) && s.b !== undefined) {
          const m = viewAs(c.bufs[s.b], s.as);
          v.forEach((x, j) => writeMem(m, idx * v.length + j, x, `${c.name}: binding ${s.b}`));
        } else if (s.b !== undefined) writeMem(viewAs(c.bufs[s.b], s.as), idx, v as number, `${c.name}: binding ${s.b}`);
        else {
          const sh = c.shared.get(s.sh as string);
          // a vector into a shared array of scalars is a vector view: write its components
          const split = Array.isArray(v) && sh !== undefined && !String(sh.elem).includes("x");
          const vals = split ? (v as number[]) : [v];
          const at = split ? idx * vals.length : idx;
          vals.forEach((x, j) => {
            if (!sh || !Number.isInteger(at + j) || at + j < 0 || at + j >= sh.data.length) throw new Error(`interp: ${c.name}: shared ${s.sh}[${at + j}] out of bounds`);
            (sh.data as unknown[])[at + j] = Array.isArray(x) ? [...x] : x;
          });
        }
        break;
      }
      case "if": {
        const r = ev(c, s.cond) ? yield* run(c, s.then) : s.else ? yield* run(c, s.else) : 0;
        if (r) return r;
        break;
      }
      case "for": {
        const from = ev(c, s.from) as number;
        const to = ev(c, s.to) as number;
        const step = s.step ? (ev(c, s.step) as number) : 1;
        const t = typeOf(c, s.from);
        for (let i = from; i < to; i += step) {
          c.env.set(s.var, { value: i, type: t });
          const r = yield* run(c, s.body);
          if (r === BREAK) break;
          if (r === RETURN) return r;
        }
        break;
      }
      case "while": {
        while (ev(c, s.cond)) {
          const r = yield* run(c, s.body);
          if (r === BREAK) break;
          if (r === RETURN) return r;
        }
        break;
      }
      case "loop": {
        for (;;) {
          const r = yield* run(c, s.body);
          if (r === BREAK) break;
          if (r === RETURN) return r;
        }
        break;
      }
      case "break": return BREAK;
      case "continue": return CONTINUE;
      case "return": return RETURN;
      case "barrier": yield; break;
      case "fence": break;
      case "eval": ev(c, s.value); break;
      default: throw new Error(`interp: statement ${(s as Stmt).s} unsupported`);
    }
  }
  return 0;
}

/** Executes a dispatch: every workgroup, every invocation, barriers honored. */
export function execute(k: Compiled, buffers: ArrayBuffer[], groups: [number, number, number], push: ArrayBuffer | null, sgSize = 8): void {
  const d = k.desc;
  if (buffers.length !== d.bindings.length) throw new Error(`${d.name}: ${buffers.length} buffers for ${d.bindings.length} bindings`);
  const pushEnv: [string, { value: Value; type: Type }][] = [];
  if (k.pushBytes > 0) {
    if (!push || push.byteLength < k.pushBytes) throw new Error(`${d.name}: push constants ${push?.byteLength ?? 0} bytes, needs ${k.pushBytes}`);
    const u = new Uint32Array(push), f = new Float32Array(push), s = new Int32Array(push);
    (d.push ?? []).forEach((p, i) => {
      const v = p.type === "f32" ? f[i] : p.type === "i32" ? s[i] : u[i];
      pushEnv.push([`$p_${p.name}`, { value: v, type: p.type }]);
    });
  }
  const bufs = buffers.map((b, i) => memOf(d.bindings[i].elem, b));
  const [wx, wy, wz] = k.wg;
  const size = wx * wy * wz;
  for (let gz = 0; gz < groups[2]; gz++)
    for (let gy = 0; gy < groups[1]; gy++)
      for (let gx = 0; gx < groups[0]; gx++) {
        const shared = new Map((d.shared ?? []).map((s) => {
          const w = Number((s.elem as string).split("x")[1] ?? 1);
          const data = w > 1 ? Array.from({ length: s.len }, () => new Array(w).fill(0)) : new Float64Array(s.len);
          return [s.name, { elem: s.elem as string, data }];
        }));
        const gens: Generator<void, number, void>[] = [];
        const sgSlots = new Map<number, (number | boolean)[]>();
        for (let li = 0; li < size; li++) {
          const lx = li % wx, ly = Math.floor(li / wx) % wy, lz = Math.floor(li / (wx * wy));
          const env: Env = new Map(pushEnv);
          const u3 = (a: number[]) => ({ value: a, type: "u32x3" as Type });
          env.set("$b_global_id", u3([gx * wx + lx, gy * wy + ly, gz * wz + lz]));
          env.set("$b_local_id", u3([lx, ly, lz]));
          env.set("$b_workgroup_id", u3([gx, gy, gz]));
          env.set("$b_num_workgroups", u3([groups[0], groups[1], groups[2]]));
          env.set("$b_local_index", { value: li, type: "u32" });
          env.set("$b_subgroup_size", { value: sgSize, type: "u32" });
          env.set("$b_subgroup_invocation", { value: li % sgSize, type: "u32" });
          env.set("$b_subgroup_id", { value: Math.floor(li / sgSize), type: "u32" });
          env.set("$b_num_subgroups", { value: Math.ceil(size / sgSize), type: "u32" });
          gens.push(run({ li, sgSize, sgSeq: 0, sgSlots, env, bufs, shared, name: d.name }, k.body));
        }
        let live = gens.length;
        const done = new Array(gens.length).fill(false);
        while (live > 0) {
          for (let i = 0; i < gens.length; i++) {
            if (done[i]) continue;
            if (gens[i].next().done) {
              done[i] = true;
              live--;
            }
          }
        }
      }
}
