// Cooperative-matrix execution tests, for the GPU host (lavapipe has no cooperative matrices, so
// CI only runs spirv-val on these modules). Runs the IR's sample coopmat matmul on odd and
// regular shapes against an fp64 CPU reference, then every tensor-core flash attention forward
// (ts/kernels/attention-variants.ts) against float64 causal attention, then f32 attention forward
// and backward through HeliosBackend on every split (x3) forward kernel with the x3 backward
// (f32-accuracy gate, 1e-4 relative), and exits non-zero on any mismatch; skips cleanly, exit 0,
// when the device has no cooperative matrices. Also prints how the device rounds f32 -> bf16.
//
//   node dist/bench/coop-tests.js
import { coop2MatmulSample, coopMatmulSample, type CoopMatmulOptions } from "../lab/ir-samples-coop.js";
import { kernel, toBf16, type Expr, type KernelDesc } from "../ts/ir/index.js";
import { deviceSkipReason, native, pushBytes, randF32, runKernel } from "../__test__/ir-harness.js";
import { FLASH_FWD, type FlashKernelName } from "../ts/kernels/attention-variants.js";
import { adaptRuntime } from "./native-runtime.js";
import { attnErrors, flashGate, layoutProbeKernel, naive, naiveBackward, type Problem } from "./flash-check.js";
import { HeliosBackend } from "../ts/backend.js";
import { runtime } from "../ts/device.js";
import { flashReadsSplit } from "../ts/kernels/attention-variants.js";
import { f32ToBf16Bits } from "../ts/kernels/matmul/reference.js";
import type { TensorData } from "../ts/types.js";

function f16Bits(x: number): number {
  const f = new Float32Array([x]);
  const u = new Uint32Array(f.buffer)[0];
  const sign = (u >>> 16) & 0x8000;
  const exp = ((u >>> 23) & 0xff) - 127 + 15;
  let mant = u & 0x7fffff;
  if (exp <= 0) {
    if (exp < -10) return sign;
    mant |= 0x800000;
    const shift = 14 - exp;
    const r = (mant >>> shift) + ((mant >>> (shift - 1)) & 1);
    return sign | r;
  }
  if (exp >= 31) return sign | 0x7c00;
  const r = (exp << 10) | (mant >>> 13);
  return sign | (r + ((mant >>> 12) & 1));
}

function f16Value(h: number): number {
  const s = h & 0x8000 ? -1 : 1, e = (h >>> 10) & 31, m = h & 1023;
  if (e === 31) return m ? NaN : s * Infinity;
  return e === 0 ? s * m * 2 ** -24 : s * (1 + m / 1024) * 2 ** (e - 15);
}

function bf16Bits(x: number): number {
  const u = new Uint32Array(new Float32Array([x]).buffer)[0];
  return ((u + 0x7fff + ((u >>> 16) & 1)) >>> 16) & 0xffff;
}

function bf16Value(h: number): number {
  return new Float32Array(new Uint32Array([h << 16]).buffer)[0];
}

function runCase(o: CoopMatmulOptions, desc: KernelDesc, m: number, n: number, k: number): string | undefined {
  const enc = o.elem === "f16" ? f16Bits : bf16Bits;
  const dec = o.elem === "f16" ? f16Value : bf16Value;
  const A = Uint16Array.from(randF32(m * k, -1, 1, m * 31 + k), enc);
  const B = Uint16Array.from(randF32(k * n, -1, 1, n * 17 + k), enc);
  const outBytes = m * n * (o.acc === "f32" ? 4 : 2);
  const [, , out] = runKernel(desc, {
    buffers: [A, B, Math.max(4, (outBytes + 3) & ~3)],
    groups: [Math.ceil(n / 64), Math.ceil(m / 64)],
    push: pushBytes([["u32", m], ["u32", n], ["u32", k]]),
  });
  const got = o.acc === "f32" ? new Float32Array(out, 0, m * n) : Array.from(new Uint16Array(out, 0, m * n), f16Value);
  // Decode once: the reference loop runs m·n·k times (1e9 at 1000³).
  const a = Float64Array.from(A, dec), b = Float64Array.from(B, dec);
  let num = 0, den = 0;
  for (let i = 0; i < m; i++) {
    for (let j = 0; j < n; j++) {
      let s = 0;
      for (let q = 0; q < k; q++) s += a[i * k + q] * b[q * n + j];
      num += (got[i * n + j] - s) ** 2;
      den += s * s;
    }
  }
  const rel = Math.sqrt(num / Math.max(den, 1e-30));
  const tol = o.acc === "f32" ? 1e-2 : 2e-2;
  return rel <= tol ? undefined : `relative Frobenius error ${rel.toExponential(2)} > ${tol}`;
}

/**
 * Which (row, col) each lane's accumulator (f32) and A (f16) elements hold, 16x16: flash_fwd_cmacc
 * keeps P in registers only when the two agree element for element (else it goes through shared
 * memory, slower). Printed for the record; not a pass/fail check.
 */
function layoutProbe(): void {
  const idx = Float32Array.from({ length: 256 }, (_, i) => i);
  const [, , res] = runKernel(layoutProbeKernel(), { buffers: [idx, Uint16Array.from(idx, f16Bits), 4 * (2 + 32 * 64)], groups: [1] });
  const v = new Float32Array(res);
  const [nc, na] = [v[0], v[1]];
  const at = (lane: number, off: number, n: number) => Array.from(v.subarray(2 + lane * 64 + off, 2 + lane * 64 + off + n), (x) => `(${Math.floor(x / 16)},${x % 16})`).join(" ");
  let same = nc === na;
  for (let l = 0; l < 32 && same; l++) for (let i = 0; i < Math.min(nc, 32); i++) same &&= v[2 + l * 64 + i] === v[2 + l * 64 + 32 + i];
  console.log(`coopmat layout: acc f32 ${nc} elements per lane, A f16 ${na}; ${same ? "identical (flash keeps P in registers)" : "different (flash converts P through shared memory)"}`);
  console.log(`  lane 0 acc: ${at(0, 0, nc)}\n  lane 0 A:   ${at(0, 32, na)}\n  lane 5 acc: ${at(5, 0, nc)}\n  lane 5 A:   ${at(5, 32, na)}`);
}

/** The tensor-core flash forwards (not simt) on causal cases: tiles, softCap, several heads. */
function flashCases(): { ran: number; failed: number } {
  const rt = adaptRuntime(native as unknown as Record<string, unknown>);
  const info = rt.getDeviceInfo();
  const cases: Problem[] = [
    { bh: 1, t: 128, d: 64, cap: 0 }, { bh: 3, t: 256, d: 64, cap: 0 }, { bh: 2, t: 384, d: 32, cap: 0 },
    { bh: 2, t: 256, d: 64, cap: 2.5 }, { bh: 1, t: 512, d: 16, cap: 0 },
  ];
  let ran = 0, failed = 0;
  for (const name of Object.keys(FLASH_FWD) as FlashKernelName[]) {
    if (name === "simt") continue;
    for (const p of cases) {
      const label = `flash ${name} bh=${p.bh} T=${p.t} D=${p.d} softCap=${p.cap}`;
      if (!FLASH_FWD[name].applies(info, "f16", p.t, p.d)) continue;
      ran++;
      let err: string | undefined;
      try {
        const e = flashGate(rt, name, p);
        if (!e.ok) err = `output error ${e.out.toExponential(2)}, lse error ${e.lse.toExponential(2)}`;
      } catch (e) {
        err = (e as Error).message;
      }
      if (err) failed++;
      console.log(`${err ? "FAIL" : "ok  "} ${label}${err ? `: ${err}` : ""}`);
    }
  }
  return { ran, failed };
}

/**
 * f32 attention at f32 accuracy on the split (x3) kernels, through HeliosBackend (the q/k/v/dO
 * splits included): each x3 forward variant that serves the case, then the x3 backward, against
 * float64 (worst error relative to the largest reference value, over O, dQ, dK, dV; the
 * Frobenius-norm error is printed beside it).
 */
function x3Cases(): { ran: number; failed: number } {
  const info = runtime().getDeviceInfo();
  const cases: { bh: number; t: number; d: number }[] = [
    { bh: 2, t: 128, d: 64 }, { bh: 3, t: 256, d: 32 }, { bh: 1, t: 384, d: 16 }, { bh: 2, t: 192, d: 48 },
    { bh: 1, t: 128, d: 16 }, { bh: 1, t: 384, d: 32 }, { bh: 1, t: 512, d: 64 },
  ];
  let ran = 0, failed = 0;
  for (const name of Object.keys(FLASH_FWD) as FlashKernelName[]) {
    if (!flashReadsSplit(name)) continue;
    const B = new HeliosBackend({ config: { flashVariant: name, attnBackward: "cm" } });
    for (const c of cases) {
      if (!FLASH_FWD[name].applies(info, "f32", c.t, c.d)) continue;
      ran++;
      const label = `flash x3 ${name} fwd+bwd bh=${c.bh} T=${c.t} D=${c.d}`;
      let err: string | undefined;
      try {
        const [q, k, v, dO] = [0, 1, 2, 3].map(() => B.randn([c.bh, c.t, c.d]));
        const scale = 1 / Math.sqrt(c.d);
        const f = B.flashAttention(q, k, v, c.t, scale, 0);
        const g = B.flashAttentionBackward(q, k, v, f.output, dO, f.lse, c.t, scale, 0);
        const host = (x: TensorData) => Float64Array.from(x.data as Float32Array);
        const ref = naive(host(q), host(k), host(v), c.bh, c.t, c.d, scale, 0);
        const refG = naiveBackward(host(q), host(k), host(v), host(dO), c.bh, c.t, c.d, scale);
        let worst = 0;
        const parts: string[] = [];
        for (const [part, got, want] of [["O", f.output, ref.o], ["dQ", g.dQ, refG.dq], ["dK", g.dK, refG.dk], ["dV", g.dV, refG.dv]] as const) {
          const { maxRel, frob } = attnErrors(host(got), want);
          worst = Math.max(worst, maxRel);
          parts.push(`${part} ${maxRel.toExponential(1)}/${frob.toExponential(1)}`);
        }
        console.log(`     ${label}: max-abs/Frobenius ${parts.join(", ")}`);
        if (!(worst <= 1e-4)) err = `error ${worst.toExponential(2)} > 1e-4`;
        for (const t of [q, k, v, dO, f.output, f.lse, g.dQ, g.dK, g.dV]) B.releaseGpuTensor(t);
      } catch (e) {
        err = (e as Error).message;
      }
      if (err) failed++;
      console.log(`${err ? "FAIL" : "ok  "} ${label}${err ? `: ${err}` : ""}`);
    }
  }
  return { ran, failed };
}

/**
 * How the device's own f32 -> bf16 conversion rounds (a plain OpFConvert), beside toBf16 (integer
 * round to nearest even, what the hi/lo splits use): values whose bf16 neighbours tell the modes
 * apart. Informational: the splits do not depend on the answer.
 */
function bf16Rounding(): void {
  // 1 + 2^-8 + 2^-10: RNE -> 1 + 2^-7 (0x3f81), truncation -> 1 (0x3f80); 1 + 2^-8 (a tie): RNE -> 1 (even)
  const xs = Float32Array.from([1 + 2 ** -8 + 2 ** -10, 1 + 2 ** -8, -(1 + 2 ** -8 + 2 ** -10), 3 + 2 ** -6 + 2 ** -9]);
  const probe = (name: string, convert: (x: Expr) => Expr): KernelDesc => {
    const k = kernel(name, { workgroup: [32] });
    const src = k.buffer("src", "f32", "read"), dst = k.buffer("dst", "bf16", "write");
    k.if(k.globalId.x.lt(xs.length), () => dst.store(k.globalId.x, convert(src.load(k.globalId.x))));
    return k.finish();
  };
  const rne = Array.from(xs, (x) => f32ToBf16Bits(x));
  const hex = (bits: number[]) => bits.map((b) => `0x${b.toString(16)}`).join(" ");
  for (const [label, desc] of [
    ["native conversion", probe("bf16_convert_probe", (x) => x.cast("bf16"))],
    ["toBf16", probe("bf16_round_probe", (x) => toBf16(x))],
  ] as const) {
    try {
      const [, out] = runKernel(desc, { buffers: [xs, xs.length * 2], groups: [1, 1, 1] });
      const bits = Array.from(new Uint16Array(out).slice(0, xs.length));
      const same = bits.every((b, i) => b === rne[i]);
      console.log(`bf16 ${label}: ${hex(bits)} (round to nearest even: ${hex(rne)}) -> ${same ? "RNE" : "NOT round-to-nearest-even"}`);
    } catch (e) {
      console.log(`bf16 ${label} probe skipped: ${(e as Error).message}`);
    }
  }
}

function main(): number {
  const why = deviceSkipReason();
  if (why) {
    console.log(`coop-tests: skipped (${why})`);
    return 0;
  }
  const variants: { label: string; o: CoopMatmulOptions; desc: KernelDesc }[] = [
    { label: "khr f16->f32", o: { elem: "f16", acc: "f32" }, desc: coopMatmulSample({ elem: "f16", acc: "f32" }) },
    { label: "khr f16->f16", o: { elem: "f16", acc: "f16" }, desc: coopMatmulSample({ elem: "f16", acc: "f16" }) },
    { label: "khr bf16->f32", o: { elem: "bf16", acc: "f32" }, desc: coopMatmulSample({ elem: "bf16", acc: "f32" }) },
    { label: "nv-coopmat2 tensor f16->f32", o: { elem: "f16", acc: "f32" }, desc: coop2MatmulSample() },
  ];
  const shapes: [number, number, number][] = [[1, 1, 1], [17, 33, 65], [64, 64, 64], [128, 96, 80], [100, 200, 300], [1000, 1000, 1000]];
  let failed = 0, ran = 0;
  for (const { label, o, desc } of variants) {
    try {
      native.compileKernel(desc);
    } catch (e) {
      console.log(`coop-tests: ${label} skipped: ${(e as Error).message}`);
      continue;
    }
    for (const [m, n, k] of shapes) {
      const err = runCase(o, desc, m, n, k);
      ran++;
      if (err) failed++;
      console.log(`${err ? "FAIL" : "ok  "} ${label} ${m}x${n}x${k}${err ? `: ${err}` : ""}`);
    }
  }
  try {
    layoutProbe();
  } catch (e) {
    console.log(`coopmat layout probe failed: ${(e as Error).message}`);
  }
  bf16Rounding();
  for (const part of [flashCases(), x3Cases()]) {
    ran += part.ran;
    failed += part.failed;
  }
  if (ran === 0) console.log("coop-tests: skipped (the device supports none of the variants: no cooperative matrices)");
  console.log(`${ran - failed} passed, ${failed} failed`);
  return failed ? 1 : 0;
}

process.exitCode = main();
