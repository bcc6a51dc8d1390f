// Minimal safetensors reader/writer (f32 and i32 tensors): 8-byte little-endian header length,
// a JSON header {name: {dtype, shape, data_offsets}, __metadata__: {string: string}}, then the
// raw little-endian data. Used for checkpoints and for the initial weights both the Helios
// and the PyTorch benchmark load.
import { readFileSync, writeFileSync, renameSync } from "node:fs";

export interface STensor {
  readonly shape: readonly number[];
  readonly data: Float32Array | Int32Array;
}

const DTYPE = { F32: Float32Array, I32: Int32Array } as const;

export function writeSafetensors(path: string, tensors: Map<string, STensor>, metadata: Record<string, string> = {}): void {
  const header: Record<string, unknown> = { __metadata__: metadata };
  let off = 0;
  for (const [name, t] of tensors) {
    const n = t.shape.reduce((a, b) => a * b, 1);
    if (n !== t.data.length) throw new Error(`safetensors: ${name} has ${t.data.length} values for shape [${t.shape}]`);
    const bytes = t.data.byteLength;
    header[name] = { dtype: t.data instanceof Int32Array ? "I32" : "F32", shape: [...t.shape], data_offsets: [off, off + bytes] };
    off += bytes;
  }
  let json = JSON.stringify(header);
  json += " ".repeat((8 - (json.length % 8)) % 8); // keeps the data 8-byte aligned
  const head = Buffer.from(json, "utf8");
  const buf = Buffer.alloc(8 + head.length + off);
  buf.writeBigUInt64LE(BigInt(head.length), 0);
  head.copy(buf, 8);
  let p = 8 + head.length;
  for (const t of tensors.values()) {
    Buffer.from(t.data.buffer, t.data.byteOffset, t.data.byteLength).copy(buf, p);
    p += t.data.byteLength;
  }
  // Write then rename, so an interrupted save never leaves a truncated checkpoint.
  writeFileSync(path + ".tmp", buf);
  renameSync(path + ".tmp", path);
}

export function readSafetensors(path: string): { tensors: Map<string, STensor>; metadata: Record<string, string> } {
  const buf = readFileSync(path);
  if (buf.length < 8) throw new Error(`${path}: not a safetensors file (${buf.length} bytes)`);
  const hlen = Number(buf.readBigUInt64LE(0));
  if (8 + hlen > buf.length) throw new Error(`${path}: header length ${hlen} exceeds the file`);
  const header = JSON.parse(buf.subarray(8, 8 + hlen).toString("utf8")) as Record<string, unknown>;
  const base = 8 + hlen;
  const tensors = new Map<string, STensor>();
  let metadata: Record<string, string> = {};
  for (const [name, v] of Object.entries(header)) {
    if (name === "__metadata__") {
      metadata = (v ?? {}) as Record<string, string>;
      continue;
    }
    const e = v as { dtype: string; shape: number[]; data_offsets: [number, number] };
    const Ctor = DTYPE[e.dtype as keyof typeof DTYPE];
    if (!Ctor) throw new Error(`${path}: ${name} has dtype ${e.dtype} (only F32 and I32 are read)`);
    const [s, t] = e.data_offsets;
    if (s < 0 || t < s || base + t > buf.length) throw new Error(`${path}: ${name} offsets [${s}, ${t}] are out of the file`);
    const n = e.shape.reduce((a, b) => a * b, 1);
    if ((t - s) !== n * 4) throw new Error(`${path}: ${name} has ${t - s} bytes for shape [${e.shape}]`);
    // Copy out: the Buffer's offset need not be 4-byte aligned.
    const data = new Ctor(n);
    new Uint8Array(data.buffer).set(buf.subarray(base + s, base + t));
    tensors.set(name, { shape: e.shape, data });
  }
  return { tensors, metadata };
}
