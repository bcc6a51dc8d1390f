// IEEE 754 binary16 <-> binary32 conversion on the host. f16 tensors are stored as raw
// bits (Uint16Array), as Alpha does. Rounding is round-to-nearest-even, matching the
// GPU's OpFConvert with default rounding, so host and device conversions agree bit for bit.

const f32 = new Float32Array(1);
const u32 = new Uint32Array(f32.buffer);

export function f32ToF16Bits(value: number): number {
  f32[0] = value;
  const x = u32[0];
  const sign = (x >>> 16) & 0x8000;
  const exp = (x >>> 23) & 0xff;
  let mant = x & 0x7fffff;
  if (exp === 0xff) {
    // Inf stays Inf; NaN keeps a quiet payload bit so it stays NaN.
    return sign | 0x7c00 | (mant !== 0 ? 0x200 | (mant >>> 13) : 0);
  }
  const e = exp - 127 + 15;
  if (e >= 0x1f) return sign | 0x7c00;
  if (e <= 0) {
    if (e < -10) return sign; // underflows to signed zero
    mant |= 0x800000;
    const shift = 14 - e;
    const half = 1 << (shift - 1);
    const rem = mant & ((1 << shift) - 1);
    let r = mant >>> shift;
    if (rem > half || (rem === half && (r & 1) === 1)) r++;
    return sign | r;
  }
  let r = (e << 10) | (mant >>> 13);
  const rem = mant & 0x1fff;
  if (rem > 0x1000 || (rem === 0x1000 && (r & 1) === 1)) r++; // may carry into Inf: correct
  return sign | r;
}

export function f16BitsToF32(bits: number): number {
  const sign = bits & 0x8000 ? -1 : 1;
  const exp = (bits >>> 10) & 0x1f;
  const mant = bits & 0x3ff;
  if (exp === 0) return sign * mant * 2 ** -24;
  if (exp === 0x1f) return mant ? NaN : sign * Infinity;
  return sign * (1 + mant / 1024) * 2 ** (exp - 15);
}

export function toF16Array(values: ArrayLike<number>): Uint16Array {
  const out = new Uint16Array(values.length);
  for (let i = 0; i < values.length; i++) out[i] = f32ToF16Bits(values[i]);
  return out;
}

export function fromF16Array(bits: Uint16Array): Float32Array {
  const out = new Float32Array(bits.length);
  for (let i = 0; i < bits.length; i++) out[i] = f16BitsToF32(bits[i]);
  return out;
}

/** Rounds a number through f16 and back: what an f16 tensor can hold. */
export function roundF16(value: number): number {
  return f16BitsToF32(f32ToF16Bits(value));
}
