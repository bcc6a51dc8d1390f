// Cooperative-matrix execution tests, for the GPU host (lavapipe has no cooperative matrices, so
// CI only runs spirv-val on these modules). Runs the IR's sample coopmat matmul on odd and
// regular shapes against an fp64 CPU reference, then every tensor-core flash attention forward
// (ts/kernels/attention-variants.ts) against float64 causal attention, and exits non-zero on any
// mismatch; skips cleanly, exit 0, when the device has no cooperative matrices.
//
//   node dist/bench/coop-tests.js
import { coop2MatmulSample, coopMatmulSample, type CoopMatmulOptions } from "../ts/kernels/ir-samples-coop.js";
import type { KernelDesc } from "../ts/ir/index.js";
import { deviceSkipReason, native, pushBytes, randF32, runKernel } from "../__test__/ir-harness.js";
import { FLASH_FWD, type FlashKernelName } from "../ts/kernels/attention-variants.js";
import { adaptRuntime } from "./native-runtime.js";
import { flashGate, layoutProbeKernel, type Problem } from "./flash-check.js";

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
  const [, , res] = runKernel(layoutProbeKernel(), { buffers: [idx, Uint16Array.from(idx, f16Bits), 4 * (2 + 32 * 64)], groups: [1], push: new ArrayBuffer(4) });
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
  const flash = flashCases();
  ran += flash.ran;
  failed += flash.failed;
  if (ran === 0) console.log("coop-tests: skipped (the device supports none of the variants: no cooperative matrices)");
  console.log(`${ran - failed} passed, ${failed} failed`);
  return failed ? 1 : 0;
}

process.exitCode = main();
