// Reference reductions, normalization, losses, indexing and attention (float64, NumPy
// semantics where Alpha's own reference misplaces keepdims coordinates).
import { type RefTensor, numel, strides, unravel, ravel, broadcastShapes } from "./tensor.js";

/** [outer, dim, inner] view of `shape` around `axis`. */
function split(shape: readonly number[], axis: number): [number, number, number] {
  let outer = 1, inner = 1;
  for (let i = 0; i < axis; i++) outer *= shape[i];
  for (let i = axis + 1; i < shape.length; i++) inner *= shape[i];
  return [outer, shape[axis], inner];
}

function norm(axis: number, ndim: number): number {
  return axis < 0 ? axis + ndim : axis;
}

export function sum(a: RefTensor, axis?: number, keepdims = false, mean = false): RefTensor {
  if (axis === undefined) {
    let s = 0;
    for (const v of a.data) s += v;
    if (mean) s /= a.data.length;
    return { shape: keepdims ? a.shape.map(() => 1) : [], data: Float64Array.of(s) };
  }
  const ax = norm(axis, a.shape.length);
  const [outer, dim, inner] = split(a.shape, ax);
  const out = new Float64Array(outer * inner);
  for (let o = 0; o < outer; o++)
    for (let i = 0; i < inner; i++) {
      let s = 0;
      for (let j = 0; j < dim; j++) s += a.data[(o * dim + j) * inner + i];
      out[o * inner + i] = mean ? s / dim : s;
    }
  const shape = a.shape.flatMap((d, i) => (i === ax ? (keepdims ? [1] : []) : [d]));
  return { shape, data: out };
}

function alongAxis(a: RefTensor, axis: number | undefined, f: (line: number[]) => number[]): RefTensor {
  const ax = norm(axis ?? -1, a.shape.length);
  const [outer, dim, inner] = split(a.shape, ax);
  const out = new Float64Array(a.data.length);
  for (let o = 0; o < outer; o++)
    for (let i = 0; i < inner; i++) {
      const line: number[] = [];
      for (let j = 0; j < dim; j++) line.push(a.data[(o * dim + j) * inner + i]);
      const r = f(line);
      for (let j = 0; j < dim; j++) out[(o * dim + j) * inner + i] = r[j];
    }
  return { shape: [...a.shape], data: out };
}

export function softmax(a: RefTensor, axis?: number): RefTensor {
  return alongAxis(a, axis, (l) => {
    const m = Math.max(...l);
    const e = l.map((x) => Math.exp(x - m));
    const s = e.reduce((p, q) => p + q, 0);
    return e.map((x) => x / s);
  });
}

export function logSoftmax(a: RefTensor, axis?: number): RefTensor {
  return alongAxis(a, axis, (l) => {
    const m = Math.max(...l);
    const lse = m + Math.log(l.reduce((p, x) => p + Math.exp(x - m), 0));
    return l.map((x) => x - lse);
  });
}

export function layerNorm(x: RefTensor, w: RefTensor, b: RefTensor, eps: number): RefTensor {
  const dim = x.shape[x.shape.length - 1];
  const out = new Float64Array(x.data.length);
  for (let r = 0; r < x.data.length / dim; r++) {
    const row = x.data.subarray(r * dim, (r + 1) * dim);
    const mu = row.reduce((p, q) => p + q, 0) / dim;
    const v = row.reduce((p, q) => p + (q - mu) ** 2, 0) / dim;
    const inv = 1 / Math.sqrt(v + eps);
    for (let j = 0; j < dim; j++) out[r * dim + j] = (row[j] - mu) * inv * w.data[j] + b.data[j];
  }
  return { shape: [...x.shape], data: out };
}

export function layerNormBackward(x: RefTensor, w: RefTensor, g: RefTensor, eps: number) {
  const dim = x.shape[x.shape.length - 1];
  const dx = new Float64Array(x.data.length);
  const dw = new Float64Array(dim);
  const db = new Float64Array(dim);
  for (let r = 0; r < x.data.length / dim; r++) {
    const o = r * dim;
    let mu = 0;
    for (let j = 0; j < dim; j++) mu += x.data[o + j];
    mu /= dim;
    let v = 0;
    for (let j = 0; j < dim; j++) v += (x.data[o + j] - mu) ** 2;
    const inv = 1 / Math.sqrt(v / dim + eps);
    let s1 = 0, s2 = 0;
    for (let j = 0; j < dim; j++) {
      const xh = (x.data[o + j] - mu) * inv;
      dw[j] += g.data[o + j] * xh;
      db[j] += g.data[o + j];
      const dy = g.data[o + j] * w.data[j];
      s1 += dy;
      s2 += dy * xh;
    }
    for (let j = 0; j < dim; j++) {
      const xh = (x.data[o + j] - mu) * inv;
      dx[o + j] = inv * (g.data[o + j] * w.data[j] - (s1 + xh * s2) / dim);
    }
  }
  return {
    dx: { shape: [...x.shape], data: dx },
    dw: { shape: [dim], data: dw },
    db: { shape: [dim], data: db },
  };
}

/** Mean over rows of -log softmax(logits)[target]. */
export function crossEntropy(logits: RefTensor, targets: ArrayLike<number>): RefTensor {
  const [n, c] = logits.shape;
  const lp = logSoftmax(logits, 1);
  let loss = 0;
  for (let i = 0; i < n; i++) loss -= lp.data[i * c + targets[i]];
  return { shape: [], data: Float64Array.of(loss / n) };
}

export function crossEntropyBackward(logits: RefTensor, targets: ArrayLike<number>, g: number): RefTensor {
  const [n, c] = logits.shape;
  const p = softmax(logits, 1);
  const out = new Float64Array(n * c);
  for (let i = 0; i < n; i++)
    for (let j = 0; j < c; j++) out[i * c + j] = (p.data[i * c + j] - (targets[i] === j ? 1 : 0)) * (g / n);
  return { shape: [n, c], data: out };
}

export function embedding(w: RefTensor, idx: { shape: number[]; data: ArrayLike<number> }): RefTensor {
  const dim = w.shape[1];
  const out = new Float64Array(idx.data.length * dim);
  for (let i = 0; i < idx.data.length; i++)
    for (let d = 0; d < dim; d++) out[i * dim + d] = w.data[idx.data[i] * dim + d];
  return { shape: [...idx.shape, dim], data: out };
}

export function embeddingBackward(idx: ArrayLike<number>, g: RefTensor, vocab: number): RefTensor {
  const dim = g.shape[g.shape.length - 1];
  const out = new Float64Array(vocab * dim);
  for (let i = 0; i < idx.length; i++)
    for (let d = 0; d < dim; d++) out[idx[i] * dim + d] += g.data[i * dim + d];
  return { shape: [vocab, dim], data: out };
}

export function transpose(a: RefTensor, d0: number, d1: number): RefTensor {
  const nd = a.shape.length;
  d0 = norm(d0, nd);
  d1 = norm(d1, nd);
  const shape = [...a.shape];
  [shape[d0], shape[d1]] = [shape[d1], shape[d0]];
  const st = strides(shape);
  const out = new Float64Array(a.data.length);
  for (let i = 0; i < a.data.length; i++) {
    const c = unravel(i, a.shape);
    [c[d0], c[d1]] = [c[d1], c[d0]];
    out[ravel(c, st)] = a.data[i];
  }
  return { shape, data: out };
}

/** Batched matmul with NumPy broadcasting of the batch dims. */
export function matmul(a: RefTensor, b: RefTensor): RefTensor {
  const m = a.shape[a.shape.length - 2], k = a.shape[a.shape.length - 1];
  const n = b.shape[b.shape.length - 1];
  const batch = broadcastShapes(a.shape.slice(0, -2), b.shape.slice(0, -2));
  const nb = numel(batch);
  const out = new Float64Array(nb * m * n);
  for (let bi = 0; bi < nb; bi++) {
    const c = unravel(bi, batch);
    const offOf = (t: RefTensor, mat: number) => {
      const bs = t.shape.slice(0, -2);
      let f = 0, acc = mat;
      for (let d = bs.length - 1; d >= 0; d--) {
        f += (bs[d] === 1 ? 0 : c[d + batch.length - bs.length]) * acc;
        acc *= bs[d];
      }
      return f;
    };
    const ao = offOf(a, m * k), bo = offOf(b, k * n);
    for (let i = 0; i < m; i++)
      for (let j = 0; j < n; j++) {
        let s = 0;
        for (let p = 0; p < k; p++) s += a.data[ao + i * k + p] * b.data[bo + p * n + j];
        out[bi * m * n + i * n + j] = s;
      }
  }
  return { shape: [...batch, m, n], data: out };
}

export function slice(a: RefTensor, starts: number[], ends: number[]): RefTensor {
  const shape = starts.map((s, d) => ends[d] - s);
  const st = strides(a.shape);
  const out = new Float64Array(numel(shape));
  for (let i = 0; i < out.length; i++) {
    const c = unravel(i, shape).map((v, d) => v + starts[d]);
    out[i] = a.data[ravel(c, st)];
  }
  return { shape, data: out };
}

export function scatterSlice(g: RefTensor, orig: number[], starts: number[]): RefTensor {
  const st = strides(orig);
  const out = new Float64Array(numel(orig));
  for (let i = 0; i < g.data.length; i++) {
    const c = unravel(i, g.shape).map((v, d) => v + starts[d]);
    out[ravel(c, st)] = g.data[i];
  }
  return { shape: [...orig], data: out };
}

export function cat(ts: RefTensor[], axis: number): RefTensor {
  const ax = norm(axis, ts[0].shape.length);
  const shape = [...ts[0].shape];
  shape[ax] = ts.reduce((p, t) => p + t.shape[ax], 0);
  const st = strides(shape);
  const out = new Float64Array(numel(shape));
  let off = 0;
  for (const t of ts) {
    for (let i = 0; i < t.data.length; i++) {
      const c = unravel(i, t.shape);
      c[ax] += off;
      out[ravel(c, st)] = t.data[i];
    }
    off += t.shape[ax];
  }
  return { shape, data: out };
}

/** First maximal index (ties resolve to the lowest index, like NumPy). */
export function argmax(a: RefTensor, axis?: number): RefTensor {
  if (axis === undefined) {
    let bi = 0;
    for (let i = 1; i < a.data.length; i++) if (a.data[i] > a.data[bi]) bi = i;
    return { shape: [], data: Float64Array.of(bi) };
  }
  const ax = norm(axis, a.shape.length);
  const [outer, dim, inner] = split(a.shape, ax);
  const out = new Float64Array(outer * inner);
  for (let o = 0; o < outer; o++)
    for (let i = 0; i < inner; i++) {
      let bj = 0;
      for (let j = 1; j < dim; j++)
        if (a.data[(o * dim + j) * inner + i] > a.data[(o * dim + bj) * inner + i]) bj = j;
      out[o * inner + i] = bj;
    }
  const shape = a.shape.filter((_, i) => i !== ax);
  return { shape: shape.length ? shape : [1], data: out };
}

export function topk(a: RefTensor, k: number, axis?: number): { values: RefTensor; indices: RefTensor } {
  const ax = norm(axis ?? -1, a.shape.length);
  const [outer, dim, inner] = split(a.shape, ax);
  const shape = [...a.shape];
  shape[ax] = k;
  const vals = new Float64Array(outer * k * inner);
  const idx = new Float64Array(outer * k * inner);
  for (let o = 0; o < outer; o++)
    for (let i = 0; i < inner; i++) {
      const pairs: [number, number][] = [];
      for (let j = 0; j < dim; j++) pairs.push([a.data[(o * dim + j) * inner + i], j]);
      pairs.sort((x, y) => y[0] - x[0] || x[1] - y[1]);
      for (let j = 0; j < k; j++) {
        vals[(o * k + j) * inner + i] = pairs[j][0];
        idx[(o * k + j) * inner + i] = pairs[j][1];
      }
    }
  return { values: { shape, data: vals }, indices: { shape: [...shape], data: idx } };
}

export function gather(a: RefTensor, axis: number, idx: { shape: number[]; data: ArrayLike<number> }): RefTensor {
  const ax = norm(axis, a.shape.length);
  const st = strides(a.shape);
  const out = new Float64Array(idx.data.length);
  for (let i = 0; i < out.length; i++) {
    const c = unravel(i, idx.shape);
    c[ax] = idx.data[i];
    out[i] = a.data[ravel(c, st)];
  }
  return { shape: [...idx.shape], data: out };
}

export function causalMask(n: number): RefTensor {
  const out = new Float64Array(n * n);
  for (let i = 0; i < n; i++) for (let j = 0; j < n; j++) out[i * n + j] = j > i ? -Infinity : 0;
  return { shape: [n, n], data: out };
}

/** Alpha's maskedFill: the mask tiles over the leading elements of `a` (mask size divides a's). */
export function maskedFill(a: RefTensor, mask: ArrayLike<number>, value: number): RefTensor {
  const out = a.data.slice();
  for (let i = 0; i < out.length; i++) if (mask[i % mask.length] !== 0) out[i] = value;
  return { shape: [...a.shape], data: out };
}

/** Alpha's DropoutRng hash, reproduced from its documented arithmetic (float64 then ToInt32). */
export function dropoutMask(n: number, seed: number, counter: number, p: number): Float32Array {
  const out = new Float32Array(n);
  const keep = 1 / (1 - p);
  for (let i = 0; i < n; i++) {
    let h = ((seed | 0) + counter * 2654435761 + i * 2246822519) | 0;
    h = Math.imul(h ^ (h >>> 16), 0x85ebca6b);
    h = Math.imul(h ^ (h >>> 13), 0xc2b2ae35);
    h = h ^ (h >>> 16);
    out[i] = (h >>> 0) / 4294967296 > p ? keep : 0;
  }
  return out;
}

export function adamw(
  p: Float64Array, g: Float64Array, m: Float64Array, v: Float64Array,
  lr: number, b1: number, b2: number, eps: number, wd: number, bc1: number, bc2: number, gs = 1,
): void {
  for (let i = 0; i < p.length; i++) {
    const gi = g[i] * gs;
    if (wd > 0) p[i] -= lr * wd * p[i];
    m[i] = b1 * m[i] + (1 - b1) * gi;
    v[i] = b2 * v[i] + (1 - b2) * gi * gi;
    p[i] -= (lr * (m[i] / bc1)) / (Math.sqrt(v[i] / bc2) + eps);
  }
}

/** Scores s = cap*tanh(q.k*scale/cap) (cap > 0) or q.k*scale; causal; lse = log sum exp s. */
function scores(q: RefTensor, k: RefTensor, bh: number, t: number, d: number, scale: number, cap: number, i: number, j: number) {
  let s = 0;
  for (let e = 0; e < d; e++) s += q.data[(bh * t + i) * d + e] * k.data[(bh * t + j) * d + e];
  s *= scale;
  return cap > 0 ? cap * Math.tanh(s / cap) : s;
}

/**
 * Part p of a tensor in the rows head layout (ts/ops/attention.ts AttentionLayout: [B*T, W], head h
 * of part p at columns p H D + h D ..) as [B*H, T, D].
 */
export function rowsToHeads(x: RefTensor, T: number, H: number, D: number, p: number): RefTensor {
  const [N, W] = x.shape;
  const B = N / T;
  const data = new Float64Array(N * H * D);
  for (let b = 0; b < B; b++) for (let h = 0; h < H; h++) for (let t = 0; t < T; t++) for (let d = 0; d < D; d++) {
    data[((b * H + h) * T + t) * D + d] = x.data[(b * T + t) * W + p * H * D + h * D + d];
  }
  return { shape: [B * H, T, D], data };
}

/** [B*H, T, D] parts side by side in rows: [B*T, parts.length * H * D]. */
export function headsToRows(parts: RefTensor[], T: number, H: number): RefTensor {
  const [BH, , D] = parts[0].shape;
  const B = BH / H, W = parts.length * H * D;
  const data = new Float64Array(B * T * W);
  parts.forEach((x, p) => {
    for (let b = 0; b < B; b++) for (let h = 0; h < H; h++) for (let t = 0; t < T; t++) for (let d = 0; d < D; d++) {
      data[(b * T + t) * W + p * H * D + h * D + d] = x.data[((b * H + h) * T + t) * D + d];
    }
  });
  return { shape: [B * T, W], data };
}

export function attention(q: RefTensor, k: RefTensor, v: RefTensor, scale: number, cap: number) {
  const [nbh, t, d] = q.shape;
  const o = new Float64Array(q.data.length);
  const lse = new Float64Array(nbh * t);
  for (let b = 0; b < nbh; b++)
    for (let i = 0; i < t; i++) {
      const s: number[] = [];
      for (let j = 0; j <= i; j++) s.push(scores(q, k, b, t, d, scale, cap, i, j));
      const m = Math.max(...s);
      const l = s.reduce((p, x) => p + Math.exp(x - m), 0);
      lse[b * t + i] = m + Math.log(l);
      for (let j = 0; j <= i; j++) {
        const pij = Math.exp(s[j] - lse[b * t + i]);
        for (let e = 0; e < d; e++) o[(b * t + i) * d + e] += pij * v.data[(b * t + j) * d + e];
      }
    }
  return { output: { shape: [nbh, t, d], data: o }, lse: { shape: [nbh, t], data: lse } };
}

export function attentionBackward(q: RefTensor, k: RefTensor, v: RefTensor, dO: RefTensor, scale: number, cap: number) {
  const [nbh, t, d] = q.shape;
  const { output, lse } = attention(q, k, v, scale, cap);
  const dq = new Float64Array(q.data.length), dk = new Float64Array(q.data.length), dv = new Float64Array(q.data.length);
  for (let b = 0; b < nbh; b++)
    for (let i = 0; i < t; i++) {
      const row = (b * t + i) * d;
      let di = 0;
      for (let e = 0; e < d; e++) di += dO.data[row + e] * output.data[row + e];
      for (let j = 0; j <= i; j++) {
        const col = (b * t + j) * d;
        const s = scores(q, k, b, t, d, scale, cap, i, j);
        const p = Math.exp(s - lse.data[b * t + i]);
        let dp = 0;
        for (let e = 0; e < d; e++) {
          dv[col + e] += p * dO.data[row + e];
          dp += dO.data[row + e] * v.data[col + e];
        }
        let ds = p * (dp - di);
        if (cap > 0) ds *= 1 - (s / cap) ** 2;
        ds *= scale;
        for (let e = 0; e < d; e++) {
          dq[row + e] += ds * k.data[col + e];
          dk[col + e] += ds * q.data[row + e];
        }
      }
    }
  const sh = [nbh, t, d];
  return { dQ: { shape: sh, data: dq }, dK: { shape: [...sh], data: dk }, dV: { shape: [...sh], data: dv } };
}
