// Matmul kernels on the real device (lavapipe in CI: SIMT variants only, small sizes) against the
// fp64 reference; coopmat variants run where the device has cooperative matrices.
import assert from "node:assert/strict";
import { test } from "node:test";
import { checkVariants, type CheckCase } from "../bench/matmul-check.js";
import { capsOf } from "../ts/kernels/matmul/autotune.js";
import type { MatmulRuntime } from "../ts/kernels/matmul/device.js";
import { nativeMatmulRuntime } from "../bench/native-runtime.js";
import { variantByName } from "../ts/kernels/matmul/variants.js";

async function device(): Promise<MatmulRuntime | null> {
  try {
    const rt = await nativeMatmulRuntime();
    rt.initDevice();
    return rt;
  } catch {
    return null;
  }
}

const CASES: CheckCase[] = [
  { name: "1x1x1", problem: { m: 1, n: 1, k: 1 }, full: true },
  { name: "17x33x65", problem: { m: 17, n: 33, k: 65 }, full: true },
  { name: "130x68x36_vec", problem: { m: 130, n: 68, k: 36 }, full: true },
  { name: "batched_NT", problem: { m: 20, n: 36, k: 24, batch: 2, transB: true }, full: true },
  { name: "TN_bias_gelu", problem: { m: 36, n: 20, k: 40, transA: true, epilogue: { bias: true, act: "gelu" } }, full: true },
  { name: "TT_scale_relu_res", problem: { m: 24, n: 28, k: 20, transA: true, transB: true, epilogue: { scale: 0.5, act: "relu", residual: true } }, full: true },
  // 16×11 tiles of 64: the grouped workgroup order with a partial last band
  { name: "grid_1000x700x8", problem: { m: 1000, n: 700, k: 8 }, full: true },
  { name: "splitk_silu", problem: { m: 9, n: 12, k: 1500, epilogue: { bias: true, act: "silu" } }, full: true },
  // the MLP backward's product times GELU's derivative (Epilogue.geluGrad): edge tiles, whole 128-tiles, split-K
  { name: "dgelu_37x50x19", problem: { m: 37, n: 50, k: 19, epilogue: { geluGrad: true } }, full: true },
  { name: "dgelu_bias_res_128x128x16", problem: { m: 128, n: 128, k: 16, epilogue: { bias: true, geluGrad: true, residual: true } }, full: true },
  { name: "splitk_dgelu", problem: { m: 9, n: 12, k: 1500, epilogue: { geluGrad: true } }, full: true },
];

test("matmul variants on the device vs fp64", { timeout: 300_000 }, async (t) => {
  const rt = await device();
  if (!rt) {
    t.skip("native runtime without compileKernel/batches yet");
    return;
  }
  const caps = capsOf(rt.getDeviceInfo());
  const names = ["simt_64x64_4x4", "simt_128x128_8x8_sm", "simt_128x128_8x16_t128_sm", "simt_64x64_4x4_sk4"];
  if (caps.coopMatSupported) names.push("cm_64x64x32_w2x2", "cm_128x128x32_w2x4");
  const rows = checkVariants(rt, caps, {
    variants: names.map(variantByName),
    modes: [{ name: "f32", dtype: "f32" }, { name: "f16", dtype: "f16" }],
    cases: CASES,
  });
  const bad = rows.filter((r) => !r.pass).map((r) => `${r.variant}/${r.mode}/${r.case}: ${r.error ?? r.relErr}`);
  assert.deepEqual(bad, []);
  // the GELU gradient well under the gates: f32 exact on the SIMT tiles; one f16 rounding elsewhere
  // (f16 output, or f32 operands on the coopmat tiles' f16 tensor cores: ~2.7e-4 in the
  // interpreter, which the H200 run of session 22 met where this asked 1e-5 of every f32 row)
  const gate = (r: (typeof rows)[number]) => (r.mode === "f32" && r.variant.startsWith("simt") ? 1e-5 : 1e-3);
  const loose = rows.filter((r) => r.case.includes("dgelu") && !r.skipped && !((r.relErr ?? 1) < gate(r)));
  assert.deepEqual(loose.map((r) => `${r.variant}/${r.mode}/${r.case}: ${r.relErr}`), []);
  assert.ok(rows.filter((r) => !r.skipped).length >= 14);
  const take = (rt as unknown as { takeValidationMessages?: () => string[] }).takeValidationMessages;
  if (take) assert.deepEqual(take().filter((m) => !/loader|ICD/i.test(m)).slice(0, 5), []);
});
