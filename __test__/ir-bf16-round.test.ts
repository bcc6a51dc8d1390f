// roundToBf16 (ts/ir/bf16.ts): f32 -> nearest bf16 value (ties to even) in integer arithmetic, the
// rounding every hi/lo split uses because a device's own f32 -> bf16 conversion may truncate.
// Runs on the Vulkan device (it needs only f32 and u32, so lavapipe runs it) and in the IR
// interpreter, scalar and 4-wide, against the host's round-to-nearest-even on random values,
// exact ties, bf16 neighbours, subnormals, the largest finite values, infinities and NaN.
import { test } from "node:test";
import assert from "node:assert/strict";
import { f32, kernel, roundToBf16, type KernelDesc } from "../ts/ir/index.js";
import { f32ToBf16Bits } from "../ts/kernels/matmul/reference.js";
import { deviceSkipReason, pushBytes, runKernel } from "./ir-harness.js";
import { InterpRuntime } from "./support/interp-runtime.js";

function roundKernel(vec4: boolean): KernelDesc {
  const k = kernel(`bf16_round_probe${vec4 ? "_x4" : ""}`, { workgroup: [64] });
  const src = k.buffer("src", f32, "read"), dst = k.buffer("dst", f32, "write");
  const pc = k.push({ n: "u32" });
  k.if(k.globalId.x.lt(pc.n), () => {
    const i = k.globalId.x;
    if (vec4) dst.as("f32", 4).store(i, roundToBf16(src.loadVec(i, 4)));
    else dst.store(i, roundToBf16(src.load(i)));
  });
  return k.finish();
}

function inputs(): Float32Array {
  const xs: number[] = [0, -0, 1, -1, 1 + 2 ** -8, 1 + 3 * 2 ** -8, 1 + 2 ** -8 + 2 ** -20, -(1 + 2 ** -8 + 2 ** -10),
    3.0000001, 1e-40, -2.5e-39, 3.4028234e38, -3.4e38, Infinity, -Infinity, 65504, 1 / 3, Math.PI];
  let s = 99991;
  while (xs.length < 4096) {
    s = (Math.imul(s, 1664525) + 1013904223) >>> 0;
    const u = new Uint32Array([s]);
    const f = new Float32Array(u.buffer)[0];
    if (Number.isFinite(f)) xs.push(f);
  }
  return Float32Array.from(xs);
}

/** The host's answer: bf16 bits (round to nearest even) widened back to f32 bits. */
function expected(x: Float32Array): Uint32Array {
  return Uint32Array.from(x, (v) => (f32ToBf16Bits(v) << 16) >>> 0);
}

function check(got: ArrayBuffer, x: Float32Array, label: string): void {
  const bits = new Uint32Array(got), want = expected(x);
  for (let i = 0; i < x.length; i++) assert.equal(bits[i], want[i], `${label}: x = ${x[i]} (bits 0x${new Uint32Array(x.buffer)[i].toString(16)})`);
}

for (const vec4 of [false, true]) {
  test(`roundToBf16${vec4 ? " (f32x4)" : ""} rounds to nearest even on the device`, (t) => {
    const why = deviceSkipReason();
    if (why) return t.skip(why);
    const x = inputs();
    const n = vec4 ? x.length / 4 : x.length;
    const [, out] = runKernel(roundKernel(vec4), { buffers: [x, x.byteLength], groups: [Math.ceil(n / 64), 1, 1], push: pushBytes([["u32", n]]) });
    check(out, x, "device");
  });
}

test("roundToBf16 rounds to nearest even in the interpreter; NaN stays NaN", () => {
  const rt = new InterpRuntime();
  const x = Float32Array.from([...inputs().slice(0, 256), NaN]);
  const src = rt.createBuffer(x.byteLength), dst = rt.createBuffer(x.byteLength);
  rt.uploadBuffer(src, x);
  rt.beginBatch();
  rt.recordDispatch(rt.compileKernel(JSON.stringify(roundKernel(false))), [src, dst], [Math.ceil(x.length / 64), 1, 1], new Uint8Array(pushBytes([["u32", x.length]])));
  rt.submitBatch();
  const got = new Float32Array(rt.readBuffer(dst));
  check(got.buffer.slice(0, 256 * 4), x.slice(0, 256), "interpreter");
  assert.ok(Number.isNaN(got[256]), "NaN in, NaN out");
});
