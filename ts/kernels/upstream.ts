// The upstream Helios's simple elementwise kernels, by their upstream names, described in the
// kernel IR so `getKernelSpirv` (ts/upstream-native.ts) can hand Alpha's raw scripts SPIR-V
// with the upstream contract. The backend never uses these: its elementwise path is the fused
// kernel (elementwise.ts), whose push block is typed.
//
// Contract (the upstream's, packages/helios/src/kernels/elementwise.ts):
// Bindings: the inputs in the order each op lists them (read), then the output C (write); all f32.
//   `<op>`: one element per thread. `<op>_vec4`: one f32x4 per thread (the buffers seen as
//   vectors; elements past 4 * floor(n / 4) are not touched). `<op>_vec4x2`: two f32x4 per
//   thread, vectors 2i and 2i + 1.
// Push: all f32, upstream's layout: [len, ...params] where len counts what a thread indexes
//   (elements, or vectors for the _vec4 forms) and params are `_unused` (still 4 bytes), `scalar`,
//   `lo, hi` or `cap` as the op's entry says.
// Dispatch: ceil(len / wg) workgroups in x (ceil(len / 2 / wg) for _vec4x2); the index is
//   gid.x + gid.y * groups.x * wg, so a y dimension extends the grid past 65535 groups.
// Numerics: len is pushed as f32 and converted to u32 (toward zero) for the bounds check, so
//   lengths are exact up to 2^24 and beyond that only where f32 holds them exactly (upstream
//   compared float(index) >= len, which also drops some indices past 2^24). tanh is clamped to
//   +-15 (softcap's upstream clamp of x/cap to +-80 gives the same f32 results).
import { exp, kernel, lift, log, max, select, sqrt, u32, vecOf, type Expr, type KernelDesc } from "../ir/index.js";
import { f32, flatIndex, safeTanh } from "./common.js";
import { gelu, geluGrad } from "./elementwise.js";

type Form = "" | "_vec4" | "_vec4x2";

interface UpstreamOp {
  /** Input bindings before the output, in upstream order. */
  inputs: readonly string[];
  /** f32 push fields after len. */
  params: readonly string[];
  forms: readonly Form[];
  /** The result from the loaded inputs and the push fields; on f32 or f32x4 alike. */
  fn: (x: Expr[], p: Record<string, Expr>) => Expr;
}

const AB = ["a", "b"] as const;
const A = ["a"] as const;
const UNUSED = ["_unused"] as const;
const ALL: readonly Form[] = ["", "_vec4", "_vec4x2"];
const ONE_AND_VEC4: readonly Form[] = ["", "_vec4"];

/** A scalar push field as the value's type (f32, or an f32x4 splat). */
function like(v: Expr, s: Expr): Expr {
  return v.type === f32 ? s : vecOf("f32x4", s);
}

const sigmoid = (x: Expr): Expr => lift(1, x.type).div(exp(x.neg()).add(1));

const OPS: Record<string, UpstreamOp> = {
  add: { inputs: AB, params: UNUSED, forms: ALL, fn: ([a, b]) => a.add(b) },
  sub: { inputs: AB, params: UNUSED, forms: ALL, fn: ([a, b]) => a.sub(b) },
  mul: { inputs: AB, params: UNUSED, forms: ALL, fn: ([a, b]) => a.mul(b) },
  div: { inputs: AB, params: UNUSED, forms: ONE_AND_VEC4, fn: ([a, b]) => a.div(b) },
  neg: { inputs: A, params: UNUSED, forms: ONE_AND_VEC4, fn: ([a]) => a.neg() },
  scale: { inputs: A, params: ["scalar"], forms: ALL, fn: ([a], p) => a.mul(p.scalar) },
  exp: { inputs: A, params: UNUSED, forms: ONE_AND_VEC4, fn: ([a]) => exp(a) },
  log: { inputs: A, params: UNUSED, forms: ONE_AND_VEC4, fn: ([a]) => log(a) },
  sqrt: { inputs: A, params: UNUSED, forms: ONE_AND_VEC4, fn: ([a]) => sqrt(a) },
  relu: { inputs: A, params: UNUSED, forms: ALL, fn: ([a]) => max(a, 0) },
  gelu: { inputs: A, params: UNUSED, forms: ALL, fn: ([a]) => gelu(a) },
  clamp_min: { inputs: A, params: ["scalar"], forms: ONE_AND_VEC4, fn: ([a], p) => max(a, like(a, p.scalar)) },
  clamp: { inputs: A, params: ["lo", "hi"], forms: ONE_AND_VEC4, fn: ([a], p) => max(a, like(a, p.lo)).min(like(a, p.hi)) },
  gelu_backward: { inputs: ["input", "grad"], params: UNUSED, forms: ONE_AND_VEC4, fn: ([x, g]) => g.mul(geluGrad(x)) },
  silu_backward: {
    inputs: ["input", "grad"], params: UNUSED, forms: ONE_AND_VEC4,
    fn: ([x, g]) => { const s = sigmoid(x); return g.mul(s.mul(x.mul(s.neg().add(1)).add(1))); },
  },
  relu_backward: { inputs: ["input", "grad"], params: UNUSED, forms: [""], fn: ([x, g]) => select(x.gt(0), g, 0) },
  clamp_backward: {
    inputs: ["input", "grad"], params: ["lo", "hi"], forms: [""],
    fn: ([x, g], p) => select(x.gt(like(x, p.lo)).and(x.lt(like(x, p.hi))), g, 0),
  },
  softcap_forward: { inputs: A, params: ["cap"], forms: ONE_AND_VEC4, fn: ([x], p) => safeTanh(x.div(p.cap)).mul(p.cap) },
  softcap_backward: {
    inputs: ["grad", "input"], params: ["cap"], forms: ONE_AND_VEC4,
    fn: ([g, x], p) => { const t = safeTanh(x.div(p.cap)); return g.mul(t.mul(t).neg().add(1)); },
  },
};


/** A typed key for one upstream kernel: the op and its form. */
export interface UpstreamKey {
  readonly op: string;
  readonly form: Form;
}

const BY_NAME = new Map<string, UpstreamKey>(
  Object.entries(OPS).flatMap(([op, o]) => o.forms.map((form): [string, UpstreamKey] => [op + form, { op, form }])),
);

/** The upstream names this family provides, in table order. */
export function upstreamKernelNames(): string[] {
  return [...BY_NAME.keys()];
}

/** The key of an upstream kernel name, or undefined when this family does not provide it. */
export function upstreamKey(name: string): UpstreamKey | undefined {
  return BY_NAME.get(name);
}

/** The description of one upstream kernel with `wg` threads per workgroup. */
export function upstreamKernel(key: UpstreamKey, wg: number): KernelDesc {
  const o = OPS[key.op];
  const k = kernel(`upstream_${key.op}${key.form}`, { workgroup: [wg] });
  const ins = o.inputs.map((name) => k.buffer(name, f32, "read"));
  const out = k.buffer("c", f32, "write");
  const pc = k.push(Object.fromEntries(["len", ...o.params].map((name) => [name, f32])));
  const i = flatIndex(k, wg);
  const n = k.let(pc.len.cast(u32), "n");
  const per = key.form === "_vec4x2" ? 2 : 1;
  for (let j = 0; j < per; j++) {
    const idx = per === 1 ? i : k.let(i.mul(2).add(j), "idx");
    // the first vector of a _vec4x2 thread is stored before the second one's check
    k.if(idx.ge(n), () => k.return());
    const x = ins.map((b) => (key.form === "" ? b.load(idx) : b.loadVec(idx, 4)));
    out.store(idx, o.fn(x, pc));
  }
  return k.finish();
}
