// The test kernels paired with their binding layouts; the contract of each kernel
// (bindings, push constants, dispatch shape) is written at the top of its .spvasm file.
import * as spirv from "./spirv.js";

export type Access = "read" | "write" | "readwrite";

export interface TestKernel {
  spirv: Uint32Array;
  layout: { bindings: Access[]; pushConstantBytes: number; label: string };
  /** Invocations per workgroup along x; dispatch ceil(n / localSize) groups for n elements. */
  localSize: number;
}

function kernel(name: keyof typeof spirv, bindings: Access[], pushConstantBytes: number, localSize: number): TestKernel {
  return { spirv: spirv[name], layout: { bindings, pushConstantBytes, label: name }, localSize };
}

export const KERNELS = {
  /** y = x * a + b (f32); push {n: u32, a: f32, b: f32}. */
  axpb: kernel("axpb", ["read", "write"], 12, 64),
  /** x = x + 1 (u32); push {n: u32}. */
  inc: kernel("inc", ["readwrite"], 4, 64),
  /** dst = src (u32); push {n: u32}. */
  copy: kernel("copy", ["read", "write"], 4, 64),
  /** out[4w..4w+3] = (x, y, z, w ^ 0xA5A5A5A5) per workgroup; no push constants. */
  wgid: kernel("wgid", ["write"], 0, 1),
  /** x = lcg^iters(x) (u32); push {n: u32, iters: u32}. */
  slow: kernel("slow", ["readwrite"], 8, 64),
  /** out[slot] += sum x[j] * (2j + 1) (u32); push {n: u32, slot: u32}; dispatch [1]. */
  checksum: kernel("checksum", ["read", "readwrite"], 8, 64),
  /** Touches nothing; push {n: u32}. */
  noop: kernel("noop", ["read"], 4, 64),
} satisfies Record<string, TestKernel>;

export const WGID_MARKER = 0xa5a5a5a5;

/** CPU reference of one `slow` step. */
export function lcg(v: number): number {
  return (Math.imul(v, 1664525) + 1013904223) >>> 0;
}

/** CPU reference of the `checksum` kernel's contribution for words x. */
export function checksumOf(x: Uint32Array): number {
  let acc = 0;
  for (let j = 0; j < x.length; j++) acc = (acc + Math.imul(x[j], 2 * j + 1)) >>> 0;
  return acc;
}

/** Packs push constants: `u` for u32 fields, `f` for f32 fields, in order. */
export function push(fields: Array<["u" | "f", number]>): Uint8Array {
  const view = new DataView(new ArrayBuffer(4 * fields.length));
  fields.forEach(([kind, v], i) => {
    if (kind === "u") view.setUint32(i * 4, v >>> 0, true);
    else view.setFloat32(i * 4, v, true);
  });
  return new Uint8Array(view.buffer);
}
