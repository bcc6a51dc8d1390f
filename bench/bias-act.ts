// Unfused baselines for the fused-epilogue benchmark: out[i] = act(c[i] + bias[i % n]) in one
// kernel, or bias and act as separate kernels (withBias=false reads but ignores the bias binding).
//   bindings 0 c (read), 1 bias (read), 2 out (write); push {len: u32, n: u32}
//   dispatch [ceil(len / 256), 1, 1] (capped at 65535 rows of x: grid-stride loop)
import { f32, kernel, tanh, type KernelDesc } from "../ts/ir/index.js";

export function biasActKernel(dtype: "f16" | "f32", act: "gelu" | "none", withBias = true): { desc: KernelDesc; groups: (len: number) => [number, number, number] } {
  const k = kernel(`bench_${withBias ? "bias_" : ""}${act}_${dtype}`, { workgroup: [256] });
  const c = k.buffer("c", dtype, "read");
  const bias = k.buffer("bias", dtype, "read");
  const out = k.buffer("out", dtype, "write");
  const { len, n } = k.push({ len: "u32", n: "u32" });
  const stride = k.let(k.numWorkgroups.x.mul(256), "stride");
  k.for(k.globalId.x, len, (i) => {
    const v = c.load(i).cast(f32);
    const x = k.let(withBias ? v.add(bias.load(i.rem(n)).cast(f32)) : v, "x");
    if (act === "none") {
      out.store(i, x.cast(dtype));
      return;
    }
    const inner = k.let(x.mul(x).mul(x).mul(0.044715).add(x).mul(0.7978845608028654), "in");
    out.store(i, x.mul(0.5).mul(tanh(inner).add(1)).cast(dtype));
  }, { step: stride });
  return { desc: k.finish(), groups: (l) => [Math.min(65535, Math.ceil(l / 256)), 1, 1] };
}
