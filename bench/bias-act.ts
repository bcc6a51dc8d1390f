// Unfused baselines for the fused-epilogue benchmark: out[i] = act(c[i] + bias[i % n]) in one
// kernel, or bias and act as separate kernels (withBias=false reads but ignores the bias binding).
// Eight elements per thread (16-byte loads and stores of f16, two of f32) and the GELU the fused
// epilogue computes (geluSigmoid), so the comparison measures fusion, not a slower baseline.
//   bindings 0 c (read), 1 bias (read), 2 out (write); push {len: u32, n: u32}, len % 8 == n % 8 == 0
//   dispatch [min(ceil(len / 2048), 65535), 1, 1] (grid-stride loop over groups of 8 elements)
import { f32, kernel, packHalves, vecOf, type Expr, type KernelDesc, type ValueType } from "../ts/ir/index.js";
import { geluSigmoid } from "../ts/kernels/matmul/common.js";

const WG = 256;

export function biasActKernel(dtype: "f16" | "f32", act: "gelu" | "none", withBias = true): { desc: KernelDesc; groups: (len: number) => [number, number, number] } {
  const k = kernel(`bench_${withBias ? "bias_" : ""}${act}_${dtype}_x8`, { workgroup: [WG] });
  const c = k.buffer("c", dtype, "read");
  const bias = k.buffer("bias", dtype, "read");
  const out = k.buffer("out", dtype, "write");
  const { len, n } = k.push({ len: "u32", n: "u32" });
  const stride = k.let(k.numWorkgroups.x.mul(WG), "stride");
  /** The 8 elements from element e on, as f32. */
  const eight = (buf: typeof c, e: Expr): Expr[] => {
    const quad = buf.as(dtype, 4);
    return [0, 1].flatMap((h) => {
      const v = quad.load(e.div(4).add(h));
      return [0, 1, 2, 3].map((q) => v.swz("xyzw"[q]).cast(f32));
    });
  };
  k.for(k.globalId.x, len.div(8), (g) => {
    const e = k.let(g.mul(8), "e");
    const xs = eight(c, e);
    const bs = withBias ? eight(bias, k.let(e.rem(n), "col")) : [];
    const ys = xs.map((x, q) => {
      const v = k.let(withBias ? x.add(bs[q]) : x, "x");
      return act === "gelu" ? geluSigmoid(k, v) : v;
    });
    if (dtype === "f32") {
      for (let h = 0; h < 2; h++) out.as("f32", 4).store(e.div(4).add(h), vecOf("f32x4", ...ys.slice(4 * h, 4 * h + 4)));
    } else {
      const pair = (q: number) => vecOf(`${dtype}x2` as ValueType, ys[q].cast(dtype), ys[q + 1].cast(dtype));
      out.as("u32", 4).store(e.div(8), packHalves([0, 2, 4, 6].map(pair)));
    }
  }, { step: stride });
  return { desc: k.finish(), groups: (l) => [Math.min(65535, Math.ceil(l / (8 * WG))), 1, 1] };
}
