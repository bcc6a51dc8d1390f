// Float64 reference tensors for tests: contiguous, row-major, NumPy semantics.

export interface RefTensor {
  readonly shape: number[];
  readonly data: Float64Array;
}

export function ref(shape: readonly number[], data: ArrayLike<number>): RefTensor {
  const n = shape.reduce((a, b) => a * b, 1);
  if (data.length !== n) throw new Error(`ref: ${data.length} values for shape [${shape}]`);
  return { shape: [...shape], data: Float64Array.from(data) };
}

export function numel(shape: readonly number[]): number {
  return shape.reduce((a, b) => a * b, 1);
}

export function strides(shape: readonly number[]): number[] {
  const s = new Array<number>(shape.length);
  let acc = 1;
  for (let i = shape.length - 1; i >= 0; i--) {
    s[i] = acc;
    acc *= shape[i];
  }
  return s;
}

export function unravel(flat: number, shape: readonly number[]): number[] {
  const c = new Array<number>(shape.length);
  for (let d = shape.length - 1; d >= 0; d--) {
    c[d] = flat % shape[d];
    flat = Math.floor(flat / shape[d]);
  }
  return c;
}

export function ravel(coords: readonly number[], st: readonly number[]): number {
  let f = 0;
  for (let d = 0; d < coords.length; d++) f += coords[d] * st[d];
  return f;
}

export function broadcastShapes(a: readonly number[], b: readonly number[]): number[] {
  const n = Math.max(a.length, b.length);
  const out: number[] = [];
  for (let i = 0; i < n; i++) {
    const da = a[a.length - n + i] ?? 1;
    const db = b[b.length - n + i] ?? 1;
    if (da !== db && da !== 1 && db !== 1) throw new Error(`ref: cannot broadcast [${a}] [${b}]`);
    out.push(da === 1 ? db : da);
  }
  return out;
}

/** Value of `t` at output coordinates `c` of a broadcast result. */
export function bcastAt(t: RefTensor, c: readonly number[]): number {
  const off = c.length - t.shape.length;
  let f = 0;
  let acc = 1;
  for (let d = t.shape.length - 1; d >= 0; d--) {
    const coord = t.shape[d] === 1 ? 0 : c[d + off];
    f += coord * acc;
    acc *= t.shape[d];
  }
  return t.data[f];
}

export function broadcastTo(t: RefTensor, shape: readonly number[]): RefTensor {
  const n = numel(shape);
  const out = new Float64Array(n);
  for (let i = 0; i < n; i++) out[i] = bcastAt(t, unravel(i, shape));
  return { shape: [...shape], data: out };
}
