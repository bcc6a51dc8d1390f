// Host side of argmax, top-k, gather, masks and dropout.
import type { Shape, TensorData } from "../types.js";
import { type Engine, run } from "../engine.js";
import type { HeliosTensor } from "../tensor.js";
import { broadcastShape, checkShape, contiguousStrides, fail, fmt, normalizeAxis, sameShape, size, splitAxis } from "../shape.js";
import { grid1d } from "../kernels/common.js";
import { hostIndices } from "./indices.js";
import { LINES_PUSH, TOPK_PUSH, GATHER_PUSH, GATHER_RANK, argmaxKernel, topkKernel, gatherKernel } from "../kernels/gather.js";
import { CAUSAL_PUSH, DROPOUT_PUSH, causalMaskKernel, dropoutMaskKernel } from "../kernels/copy.js";

export function argmax(E: Engine, a: TensorData, axis?: number): HeliosTensor {
  const op = "argmax";
  if (size(a.shape) === 0) fail(op, `argmax of an empty tensor ${fmt(a.shape)}`);
  let outer: number, dim: number, inner: number, shape: number[];
  if (axis === undefined) {
    [outer, dim, inner] = [1, size(a.shape), 1];
    shape = [];
  } else {
    const ax = normalizeAxis(op, axis, a.shape.length);
    [outer, dim, inner] = splitAxis(a.shape, ax);
    shape = a.shape.filter((_, i) => i !== ax);
    if (shape.length === 0) shape = [1]; // Alpha returns [1] for a 1-D argmax over axis 0
  }
  const out = E.alloc(shape, "i32");
  run(E, op, { argmax: a.dtype }, () => argmaxKernel(a.dtype), LINES_PUSH, { outer, dim, inner }, [a], [out], grid1d(outer * inner));
  return out;
}

export function topk(E: Engine, a: TensorData, k: number, axis?: number): { values: HeliosTensor; indices: HeliosTensor } {
  const op = "topk";
  if (a.shape.length === 0) fail(op, "needs a tensor of rank >= 1");
  const ax = normalizeAxis(op, axis ?? -1, a.shape.length);
  const [outer, dim, inner] = splitAxis(a.shape, ax);
  if (!Number.isInteger(k) || k < 0 || k > dim) fail(op, `k=${k} must be in [0, ${dim}] for axis ${ax} of ${fmt(a.shape)}`);
  const shape = [...a.shape];
  shape[ax] = k;
  const values = E.alloc(shape, a.dtype);
  const indices = E.alloc(shape, "i32");
  if (size(shape) > 0) {
    run(E, op, { topk: a.dtype }, () => topkKernel(a.dtype), TOPK_PUSH, { outer, dim, inner, k }, [a], [values, indices], grid1d(outer * inner));
  }
  return { values, indices };
}

export function gather(E: Engine, a: TensorData, axis: number, idx: TensorData): HeliosTensor {
  const op = "gather";
  const nd = a.shape.length;
  const ax = normalizeAxis(op, axis, nd);
  if (idx.dtype !== "i32") fail(op, `indices must be i32, got ${idx.dtype}`);
  if (idx.shape.length !== nd) fail(op, `indices ${fmt(idx.shape)} must have the rank of input ${fmt(a.shape)}`);
  for (let d = 0; d < nd; d++) {
    if (d !== ax && idx.shape[d] > a.shape[d]) fail(op, `indices ${fmt(idx.shape)} exceed input ${fmt(a.shape)} at dim ${d}`);
  }
  if (nd > GATHER_RANK) fail(op, `rank ${nd} above ${GATHER_RANK} is not supported`);
  const host = hostIndices(idx);
  if (host) {
    for (let i = 0; i < host.length; i++) {
      if (!(host[i] >= 0 && host[i] < a.shape[ax])) fail(op, `indices[${i}] = ${host[i]} out of range [0, ${a.shape[ax]}) for input ${fmt(a.shape)}`);
    }
  }
  const out = E.alloc(idx.shape, a.dtype);
  const n = size(idx.shape);
  if (n === 0) return out;
  const pad = GATHER_RANK - nd;
  const st = contiguousStrides(a.shape);
  const push: Record<string, number> = { n, axis: ax + pad, axisLen: a.shape[ax] };
  for (let d = 0; d < GATHER_RANK; d++) {
    push[`d${d}`] = d < pad ? 1 : idx.shape[d - pad];
    push[`s${d}`] = d < pad ? 0 : st[d - pad];
  }
  run(E, op, { gather: a.dtype }, () => gatherKernel(a.dtype), GATHER_PUSH, push, [a, idx], [out], grid1d(n), [E.indexFlag()]);
  return out;
}

export function causalMask(E: Engine, n: number): HeliosTensor {
  if (!Number.isInteger(n) || n < 0) fail("causalMask", `size ${n} must be a non-negative integer`);
  const out = E.alloc([n, n], "f32");
  if (n === 0) return out;
  run(E, "causalMask", { causal: 1 }, causalMaskKernel, CAUSAL_PUSH, { n: n * n, size: n }, [], [out], grid1d(n * n));
  return out;
}

/**
 * Alpha's maskedFill: value where mask != 0. A mask that broadcasts (NumPy) is used as is;
 * otherwise Alpha tiles a smaller mask over a's trailing elements, which is the broadcast
 * of a flat mask over a flattened view.
 */
export function maskedFill(E: Engine, a: TensorData, mask: TensorData, value: number): HeliosTensor {
  const op = "maskedFill";
  let ok = true;
  try {
    const s = broadcastShape(op, a.shape, mask.shape);
    ok = sameShape(s, a.shape);
  } catch {
    ok = false;
  }
  if (ok) return E.binary(op, a, mask, "maskedFill", [value], a.dtype);
  const n = size(a.shape);
  const m = size(mask.shape);
  if (m === 0 || n % m !== 0) fail(op, `mask ${fmt(mask.shape)} neither broadcasts to nor tiles ${fmt(a.shape)}`);
  const flatMask = E.viewOrUpload(op, mask, [m]);
  const flatA = E.viewOrUpload(op, a, [n / m, m]);
  const r = E.binary(op, flatA, flatMask, "maskedFill", [value], a.dtype);
  const out = E.viewOrUpload(op, r, a.shape);
  E.release(flatMask);
  E.release(flatA);
  E.release(r);
  return out;
}

export function dropoutMask(E: Engine, shape: Shape, seed: number, counter: number, p: number): HeliosTensor {
  const op = "dropoutMask";
  checkShape(op, shape);
  if (!(p >= 0 && p < 1)) fail(op, `p=${p} must be in [0, 1)`);
  const out = E.alloc(shape, "f32");
  const n = size(shape);
  if (n === 0) return out;
  const threshold = Math.min(0xffffffff, Math.floor(p * 4294967296));
  const push = { n, seed: (seed | 0) >>> 0, counter: (counter | 0) >>> 0, threshold, keep: Math.fround(1 / (1 - p)) };
  run(E, op, { dropout: 1 }, dropoutMaskKernel, DROPOUT_PUSH, push, [], [out], grid1d(n));
  return out;
}
