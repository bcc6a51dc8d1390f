// Shared helpers for the kernel-IR tests: loading the addon, running a kernel on the device
// (lavapipe in CI) and random data. Tests skip cleanly when the runtime exports are missing
// or no device can be initialized.
import { createRequire } from "node:module";
import { execFileSync } from "node:child_process";
import { existsSync, mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import type { KernelDesc } from "../ts/ir/index.js";

const require = createRequire(import.meta.url);
// dist/__test__/x.js -> repo root
export const repoRoot = resolve(new URL(".", import.meta.url).pathname, "..", "..");
// eslint-disable-next-line @typescript-eslint/no-explicit-any
export const native: any = require(join(repoRoot, "native", "index.cjs"));

let deviceState: "unknown" | "ok" | "none" = "unknown";
let deviceWhy = "";

/** Initializes the device once; returns a reason string when tests must skip. */
export function deviceSkipReason(): string | undefined {
  if (typeof native.initDevice !== "function" || typeof native.createBuffer !== "function") {
    return "the runtime exports (initDevice, createBuffer, ...) are not in this build";
  }
  if (deviceState === "unknown") {
    try {
      native.initDevice();
      deviceState = "ok";
    } catch (e) {
      deviceState = "none";
      deviceWhy = `no device: ${(e as Error).message}`;
    }
  }
  return deviceState === "ok" ? undefined : deviceWhy;
}

export type Data = Float32Array | Int32Array | Uint32Array | Uint16Array;

export interface RunSpec {
  /** One entry per binding: input data, or a byte length for an output-only buffer. */
  buffers: (Data | number)[];
  groups: number[];
  push?: ArrayBuffer;
}

/** Compiles, uploads, dispatches once, waits and reads back every binding. */
export function runKernel(desc: KernelDesc, spec: RunSpec): ArrayBuffer[] {
  const pipeline = native.compileKernel(desc);
  const handles: number[] = spec.buffers.map((b) => {
    const bytes = typeof b === "number" ? b : b.byteLength;
    const h = native.createBuffer(Math.max(4, bytes));
    if (typeof b !== "number") native.uploadBuffer(h, b);
    return h;
  });
  try {
    native.beginBatch();
    try {
      native.recordDispatch(pipeline, handles, spec.groups, spec.push);
    } catch (e) {
      native.submitBatch(); // a refused dispatch leaves the batch open: close it before rethrowing
      throw e;
    }
    native.waitTimeline(native.submitBatch());
    return handles.map((h) => native.readBuffer(h) as ArrayBuffer);
  } finally {
    for (const h of handles) native.destroyBuffer(h);
  }
}

/** Packs push constants: u32/i32/f32 fields, std430 order as declared. */
export function pushBytes(fields: [type: "u32" | "i32" | "f32", value: number][]): ArrayBuffer {
  const buf = new ArrayBuffer(Math.max(4, fields.length * 4));
  const dv = new DataView(buf);
  fields.forEach(([t, v], i) => {
    if (t === "f32") dv.setFloat32(i * 4, v, true);
    else if (t === "i32") dv.setInt32(i * 4, v, true);
    else dv.setUint32(i * 4, v, true);
  });
  return buf;
}

/** Deterministic xorshift random numbers (tests are reproducible; never zeros). */
export function rng(seed = 1234567): () => number {
  let s = seed >>> 0 || 1;
  return () => {
    s ^= s << 13;
    s >>>= 0;
    s ^= s >>> 17;
    s ^= s << 5;
    s >>>= 0;
    return s / 4294967296;
  };
}

export function randF32(n: number, lo = -1, hi = 1, seed = 1): Float32Array {
  const r = rng(seed);
  return Float32Array.from({ length: n }, () => lo + (hi - lo) * r());
}

export function randI32(n: number, lo: number, hi: number, seed = 2): Int32Array {
  const r = rng(seed);
  return Int32Array.from({ length: n }, () => lo + Math.floor((hi - lo) * r()));
}

export function randU32(n: number, lo: number, hi: number, seed = 3): Uint32Array {
  const r = rng(seed);
  return Uint32Array.from({ length: n }, () => lo + Math.floor((hi - lo) * r()));
}

/** Max relative error (|a-b| / max(1,|b|)) over two arrays; NaN/inf must match exactly. */
export function maxRelErr(got: ArrayLike<number>, want: ArrayLike<number>): number {
  let worst = 0;
  for (let i = 0; i < want.length; i++) {
    const a = got[i];
    const b = want[i];
    if (Number.isNaN(b) || !Number.isFinite(b)) {
      if (!(Object.is(a, b) || (Number.isNaN(a) && Number.isNaN(b)))) return Infinity;
      continue;
    }
    worst = Math.max(worst, Math.abs(a - b) / Math.max(1, Math.abs(b)));
  }
  return worst;
}

/** spirv-val that knows cooperative matrices (.tools/spirv, see scripts/install-spirv-tools.sh). */
export function spirvValPath(): { path: string; modern: boolean } | undefined {
  const local = join(repoRoot, ".tools", "spirv", "bin", "spirv-val");
  if (existsSync(local)) return { path: local, modern: true };
  try {
    execFileSync("spirv-val", ["--version"], { stdio: "ignore" });
    return { path: "spirv-val", modern: false };
  } catch {
    return undefined;
  }
}

let scratch: string | undefined;

/** Runs spirv-val --target-env vulkan1.3; returns the error text or undefined when valid. */
export function spirvVal(tool: string, name: string, words: Uint32Array): string | undefined {
  scratch ??= mkdtempSync(join(tmpdir(), "helios-spv-"));
  const file = join(scratch, `${name.replace(/[^A-Za-z0-9_.-]/g, "_")}.spv`);
  writeFileSync(file, Buffer.from(words.buffer, words.byteOffset, words.byteLength));
  try {
    execFileSync(tool, ["--target-env", "vulkan1.3", file], { stdio: "pipe" });
    return undefined;
  } catch (e) {
    const err = e as { stdout?: Buffer; stderr?: Buffer; message: string };
    return `${err.stdout?.toString() ?? ""}${err.stderr?.toString() ?? ""}` || err.message;
  }
}
