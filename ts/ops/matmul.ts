// Host side of matmul and its transposed variants (SIMT path).
import type { Dtype, TensorData } from "../types.js";
import { type Engine, run, promote } from "../engine.js";
import type { HeliosTensor } from "../tensor.js";
import { contiguousStrides, fail, matmulGeometry, size } from "../shape.js";
import { MATMUL_PUSH, matmulKernel, type MatmulTile } from "../kernels/matmul.js";
import { broadcast } from "./layout.js";

export function matmul(E: Engine, op: string, a: TensorData, b: TensorData, transA: boolean, transB: boolean): HeliosTensor {
  if (a.dtype === "i32" || b.dtype === "i32") fail(op, `expects floating-point operands, got ${a.dtype} x ${b.dtype}`);
  const g = matmulGeometry(op, a.shape, b.shape, transA, transB);
  const outDtype: Dtype = promote(a.dtype, b.dtype);
  const out = E.alloc(g.outShape, outDtype);
  if (size(g.outShape) === 0) return out;
  if (g.k === 0) return E.filled(g.outShape, outDtype, 0);
  let A = a, B = b;
  let sa = g.batchStrideA, sb = g.batchStrideB;
  const temps: HeliosTensor[] = [];
  if (g.batchIndex) {
    // Batch broadcasting that one stride cannot express: expand operands to the full batch.
    const bs = g.batchIndex.shape;
    const ea = broadcast(E, a, [...bs, ...a.shape.slice(-2)]);
    const eb = broadcast(E, b, [...bs, ...b.shape.slice(-2)]);
    temps.push(ea, eb);
    A = ea;
    B = eb;
    sa = g.m * g.k;
    sb = g.k * g.n;
  }
  if (g.batch > 65535) fail(op, `batch ${g.batch} exceeds 65535`);
  // 128-wide tiles (8x8 per thread) once the output fills enough of them to occupy the GPU
  const tile: MatmulTile = g.m >= 128 && g.n >= 128 && g.m * g.n * g.batch >= 512 * 512 ? 128 : 64;
  const variant = { aDtype: A.dtype, bDtype: B.dtype, outDtype, transA, transB, tile };
  run(E, op, { matmul: variant }, () => matmulKernel(variant), MATMUL_PUSH,
    { M: g.m, N: g.n, K: g.k, strideA: sa, strideB: sb }, [A, B], [out],
    [Math.ceil(g.n / tile), Math.ceil(g.m / tile), g.batch]);
  for (const t of temps) E.release(t);
  void contiguousStrides;
  return out;
}
