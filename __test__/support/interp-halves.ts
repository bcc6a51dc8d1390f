// The interpreter's memory (docs/kernel-ir.md, "Wide memory access"): bindings and shared arrays
// hold element values (decoded from a buffer's bytes before a dispatch and encoded after it), so
// u32 views pack two halves into a word, the lower address in the low half.
import { bf16BitsToF32, f16BitsToF32, f32ToBf16Bits, f32ToF16Bits } from "../../ts/kernels/matmul/reference.js";

export function halfBits(elem: string, x: number): number {
  if (elem === "f16") return f32ToF16Bits(x);
  if (elem === "bf16") return f32ToBf16Bits(x);
  throw new Error(`interp: a u32 view of ${elem} data`);
}

export function bitsHalf(elem: string, h: number): number {
  if (elem === "f16") return f16BitsToF32(h);
  if (elem === "bf16") return bf16BitsToF32(h);
  throw new Error(`interp: ${elem} from packed halves`);
}

/** `vec` u32 words of halves `2·vec·i ..` of a 16-bit binding. */
export function packedWords(buf: ArrayLike<number>, elem: string, i: number, vec: number, b: number): number[] {
  if ((i + 1) * vec * 2 > buf.length) throw new Error(`interp: binding ${b} u32x${vec} view load at ${i} out of bounds (${buf.length} halves)`);
  return Array.from({ length: vec }, (_, q) => (halfBits(elem, buf[2 * (i * vec + q)]) | (halfBits(elem, buf[2 * (i * vec + q) + 1]) << 16)) >>> 0);
}

/** Half `h` of a shared array of u32xN words. */
export function packedHalf(arr: ArrayLike<unknown>, w: number, h: number, elem: string, sh: string): number {
  const v = arr[Math.floor(h / (2 * w))] as number[] | undefined;
  if (v === undefined) throw new Error(`interp: cmload ${sh} half ${h} read before written`);
  const word = v[Math.floor(h / 2) % w];
  return bitsHalf(elem, (h & 1 ? word >>> 16 : word) & 0xffff);
}

/** Stores u32 words (a u32xN value: the view's width) over halves `2·N·i ..` of a 16-bit binding. */
export function unpackWords(buf: number[], elem: string, i: number, words: number[], b: number): void {
  const w = words.length;
  if ((i + 1) * w * 2 > buf.length) throw new Error(`interp: binding ${b} u32x${w} view store at ${i} out of bounds (${buf.length} halves)`);
  words.forEach((word, q) => {
    buf[2 * (i * w + q)] = bitsHalf(elem, word & 0xffff);
    buf[2 * (i * w + q) + 1] = bitsHalf(elem, (word >>> 16) & 0xffff);
  });
}

/** Writes `x` as half `h` of a shared array of u32xN words (a coopmat store through that view). */
export function storePackedHalf(arr: (number[] | undefined)[], w: number, h: number, elem: string, x: number, sh: string): void {
  const at = Math.floor(h / (2 * w));
  if (at >= arr.length) throw new Error(`interp: cmstore ${sh} half ${h} out of bounds (${arr.length} x u32x${w})`);
  const words = (arr[at] ?? new Array(w).fill(0)).slice();
  const q = Math.floor(h / 2) % w, bits = halfBits(elem, x);
  words[q] = (h & 1 ? (words[q] & 0xffff) | (bits << 16) : (words[q] & 0xffff0000) | bits) >>> 0;
  arr[at] = words;
}

/** Writes f32 `x` as word `e` of a shared array of u32xN words (a 32-bit coopmat store through that view). */
export function storePackedWord(arr: (number[] | undefined)[], w: number, e: number, x: number, sh: string): void {
  const at = Math.floor(e / w);
  if (at >= arr.length) throw new Error(`interp: cmstore ${sh} element ${e} out of bounds (${arr.length} x u32x${w})`);
  const words = (arr[at] ?? new Array(w).fill(0)).slice();
  const view = new DataView(new ArrayBuffer(4));
  view.setFloat32(0, x, true);
  words[e % w] = view.getUint32(0, true);
  arr[at] = words;
}

/** OpBitcast between equal-width types (e.g. bf16x2 -> u32, u32x4 -> f32x4), through the bytes. */
export function bitcastValue(from: string, to: string, v: number | number[]): number | number[] {
  const src = Array.isArray(v) ? v : [v];
  const fromBytes = from === "f16" || from === "bf16" ? 2 : 4;
  const toBytes = to === "f16" || to === "bf16" ? 2 : 4;
  const view = new DataView(new ArrayBuffer(src.length * fromBytes));
  src.forEach((x, i) => {
    if (fromBytes === 2) view.setUint16(2 * i, halfBits(from, x), true);
    else if (from === "f32") view.setFloat32(4 * i, x, true);
    else if (from === "i32") view.setInt32(4 * i, x, true);
    else view.setUint32(4 * i, x, true);
  });
  const n = view.byteLength / toBytes;
  if (!Number.isInteger(n)) throw new Error(`interp: bitcast ${from} -> ${to} of unequal widths`);
  const out = Array.from({ length: n }, (_, i) => {
    if (toBytes === 2) return bitsHalf(to, view.getUint16(2 * i, true));
    if (to === "f32") return view.getFloat32(4 * i, true);
    if (to === "i32") return view.getInt32(4 * i, true);
    return view.getUint32(4 * i, true);
  });
  return n === 1 ? out[0] : out;
}

/** A buffer's bytes as element values of `elem`. */
export function decodeBuf(bytes: Uint8Array, elem: string): number[] {
  const buf = bytes.buffer.slice(bytes.byteOffset, bytes.byteOffset + bytes.byteLength);
  if (elem === "f32") return Array.from(new Float32Array(buf));
  if (elem === "u32") return Array.from(new Uint32Array(buf));
  if (elem === "i32") return Array.from(new Int32Array(buf));
  const h = new Uint16Array(buf);
  return Array.from(h, elem === "f16" ? f16BitsToF32 : bf16BitsToF32);
}

/** Element values of `elem` written back over the start of `into`. */
export function encodeBuf(vals: number[], elem: string, into: Uint8Array): void {
  const buf = into.buffer;
  if (elem === "f32") new Float32Array(buf, into.byteOffset, vals.length).set(vals);
  else if (elem === "u32") new Uint32Array(buf, into.byteOffset, vals.length).set(vals);
  else if (elem === "i32") new Int32Array(buf, into.byteOffset, vals.length).set(vals);
  else {
    const h = new Uint16Array(buf, into.byteOffset, vals.length);
    const enc = elem === "f16" ? f32ToF16Bits : f32ToBf16Bits;
    vals.forEach((v, i) => { h[i] = enc(v); });
  }
}
