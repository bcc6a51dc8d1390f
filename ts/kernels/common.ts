// Helpers every kernel file shares: storage element types per tensor dtype, f32 compute
// conversions, the flat-index convention for 1-D grids, and typed push-constant packing
// (one spec object declares a kernel's push block for both the generator and the dispatcher).
import type { Dtype } from "../types.js";
import { HeliosSizeError } from "../shape.js";
import {
  clamp, f16, f32, i32, lit, max, min, tanh, u32,
  type Buffer, type Expr, type KernelBuilder, type PushField, type ScalarType,
} from "../ir/index.js";

/** Threads per workgroup for 1-D elementwise-style kernels. */
export const WG = 256;
/** Vulkan guarantees 65535 workgroups per grid dimension. */
export const MAX_GROUPS = 65535;

export type StorageElem = Exclude<ScalarType, "bool" | "bf16" | "u32">;

/** f64 tensors are stored as f32 on the device (no f64 compute on the targets). */
export function storageOf(d: Dtype): StorageElem {
  return d === "f16" ? f16 : d === "i32" ? i32 : f32;
}

export function storageBytes(d: Dtype): number {
  return d === "f16" ? 2 : 4;
}

export function toF32(x: Expr): Expr {
  return x.cast(f32);
}

/** Conversion for a store into a buffer of `d`; f32 -> i32 truncates toward zero. */
export function fromF32(x: Expr, d: Dtype): Expr {
  return x.cast(storageOf(d));
}

/** Grid for `n` threads of a WG-wide 1-D kernel; y takes over past 65535 groups. */
export function grid1d(n: number, wg = WG): [number, number, number] {
  const groups = Math.max(1, Math.ceil(n / wg));
  if (groups <= MAX_GROUPS) return [groups, 1, 1];
  const y = Math.ceil(groups / MAX_GROUPS);
  return [Math.ceil(groups / y), y, 1];
}

/** Flat thread index matching grid1d: gid.x + gid.y * (groups.x * wg). */
export function flatIndex(k: KernelBuilder, wg = WG): Expr {
  const g = k.globalId;
  return k.let(g.x.add(g.y.mul(k.numWorkgroups.x.mul(wg))), "i");
}

/** Rows handled one per workgroup, with the same 2-D fallback as grid1d. */
export function gridRows(rows: number): [number, number, number] {
  return grid1d(rows, 1);
}

/**
 * Row of a one-workgroup-per-row kernel. The 2-D grid may overshoot `rows`; those whole
 * workgroups return here, before any barrier, so control flow stays uniform.
 */
export function rowIndex(k: KernelBuilder, rows: Expr): Expr {
  const w = k.workgroupId;
  const row = k.let(w.x.add(w.y.mul(k.numWorkgroups.x)), "row");
  k.if(row.ge(rows), () => k.return());
  return row;
}

/** tanh that stays finite for huge arguments on every driver. */
export function safeTanh(x: Expr): Expr {
  return tanh(clamp(x, -15, 15));
}

export type PushSpec = Record<string, PushField["type"]>;

/** Packs push constants in declaration order (all fields here are 4-byte scalars). */
export function packPush(spec: PushSpec, values: Record<string, number>): Uint32Array {
  const names = Object.keys(spec);
  const words = new Uint32Array(Math.max(1, names.length));
  const f = new Float32Array(words.buffer);
  const s = new Int32Array(words.buffer);
  names.forEach((name, i) => {
    const v = values[name];
    if (v === undefined) throw new Error(`helios: internal error: push constant '${name}' missing`);
    const t = spec[name];
    if (t === "f32") f[i] = v;
    else if (t === "i32") s[i] = v;
    else if (t === "u32") words[i] = checkU32(name, v);
    else throw new Error(`helios: internal error: push type ${t} not packed`);
  });
  return words;
}

/**
 * A u32 push constant (an element count, stride or index), refused rather than wrapped: a
 * Uint32Array store would keep it modulo 2^32 and the kernel would index a different tensor.
 */
export function checkU32(name: string, v: number): number {
  if (!Number.isInteger(v) || v < 0 || v > 0xffffffff) {
    throw new HeliosSizeError("dispatch", `push constant '${name}' = ${v} does not fit a kernel's u32 (sizes and strides are limited to 2^32 - 1 elements)`);
  }
  return v;
}

/** Loads element `idx` of a tensor buffer as f32. */
export function loadF32(b: Buffer, idx: Expr | number): Expr {
  return toF32(b.load(idx));
}

export { u32, f32, i32, f16 };

/** Threads per workgroup for one-workgroup-per-row kernels (softmax, layerNorm, reductions). */
export const ROW_WG = 256;

/**
 * Workgroup tree reduction through shared memory (no subgroup ops, so it runs the same on
 * every device). Every thread passes its value; every thread gets the result. Ends with a
 * barrier so `sh` can be reused.
 */
export function wgReduce(
  k: KernelBuilder, sh: { store(i: Expr | number, v: Expr): void; load(i: Expr | number): Expr },
  t: Expr, value: Expr, combine: (a: Expr, b: Expr) => Expr, wg = ROW_WG,
): Expr {
  sh.store(t, value);
  k.barrier();
  for (let s = wg / 2; s > 0; s >>= 1) {
    k.if(t.lt(s), () => sh.store(t, combine(sh.load(t), sh.load(t.add(s)))));
    k.barrier();
  }
  const r = sh.load(0);
  k.barrier();
  return r;
}

const varCounters = new WeakMap<KernelBuilder, number>();

/**
 * A mutable local with a name unique in the kernel. Works around the builder naming a
 * Var's reads after the var itself (`get()` binds `fresh(varName)`), which collides when
 * two vars share a hint (reported to the IR owner).
 */
export function uvar(k: KernelBuilder, type: "f32" | "u32" | "i32" | "f32x4", init: Expr | number, hint: string) {
  const n = varCounters.get(k) ?? 0;
  varCounters.set(k, n + 1);
  return k.var(type, init, `${hint}${n}v`);
}

/** Pairwise sum: keeps expression depth logarithmic (the IR caps nesting at 64). */
export function sumTree(terms: Expr[]): Expr {
  if (terms.length === 0) throw new Error("helios: internal error: empty sum");
  let level = terms;
  while (level.length > 1) {
    const next: Expr[] = [];
    for (let i = 0; i < level.length; i += 2) next.push(i + 1 < level.length ? level[i].add(level[i + 1]) : level[i]);
    level = next;
  }
  return level[0];
}

/**
 * Clamps an i32 index into [0, len) and stores 1 into `flag[0]` when it had to, so indices
 * that only live on the device (and were not range-checked on the host) are reported by
 * HeliosBackend.stats().clampedIndices instead of reading out of bounds. Every writer
 * stores the same value, so no atomic is needed.
 */
export function clampIndex(k: KernelBuilder, raw: Expr, len: Expr, flag: Buffer, hint: string): Expr {
  const c = k.let(min(max(raw, lit(i32, 0)), len.cast(i32).sub(1)), `${hint}c`);
  k.if(c.ne(raw), () => flag.store(0, lit(u32, 1)));
  return k.let(c.cast(u32), hint);
}

/**
 * Workgroup reduction through subgroup operations: each subgroup reduces in registers, one
 * lane per subgroup parks its partial in shared memory, and every thread folds the few
 * partials. Two barriers instead of wgReduce's log2(ROW_WG). Correct for any subgroup size.
 */
export function wgReduceSg(
  k: KernelBuilder, sh: { store(i: Expr | number, v: Expr): void; load(i: Expr | number): Expr },
  value: Expr, fn: "add" | "max",
): Expr {
  const r = k.sgReduce(fn, value);
  k.if(k.subgroupInvocation.eq(0), () => sh.store(k.subgroupId, r));
  k.barrier();
  const acc = uvar(k, "f32", fn === "max" ? -Infinity : 0, "wr");
  k.for(lit(u32, 0), k.numSubgroups, (j) => {
    const v = sh.load(j);
    acc.set(fn === "max" ? max(acc.get(), v) : acc.get().add(v));
  });
  const out = acc.get();
  k.barrier();
  return out;
}
