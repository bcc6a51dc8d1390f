// Which runtime backend tests run on: the native addon when it has the runtime and kernel
// compiler (validation on, and no validation messages allowed). HELIOS_TEST_MOCK=1 runs them on
// the CPU mock runtime that interprets the same kernel descriptions instead; without it a
// broken or missing addon fails the suite (a silent fallback would hide it).
import { HeliosBackend, type HeliosBackendOptions } from "../ts/backend.js";
import { bindRuntime, type Runtime } from "../ts/exec/runtime.js";
import { MockRuntime } from "./mock/runtime.js";
import assert from "node:assert/strict";
import { afterEach } from "node:test";

let nativeRt: Runtime | null | undefined;

function nativeRuntime(): Runtime | null {
  if (nativeRt !== undefined) return nativeRt;
  nativeRt = null;
  if (process.env.HELIOS_TEST_MOCK === "1") return null;
  try {
    // eslint-disable-next-line @typescript-eslint/no-require-imports
    const mod = require("../../native/index.cjs");
    nativeRt = bindRuntime(mod);
    nativeRt.initDevice({ validation: true });
  } catch (e) {
    throw new Error(`backend tests: the native runtime is unavailable (${(e as Error).message.split("\n")[0]}); set HELIOS_TEST_MOCK=1 to run on the CPU mock`);
  }
  return nativeRt;
}

import { createRequire } from "node:module";
const require = createRequire(import.meta.url);

let mock: MockRuntime | null = null;

/** One runtime per process, like the native addon (backends share its single open batch). */
export function testRuntime(): Runtime {
  return nativeRuntime() ?? (mock ??= new MockRuntime());
}

export const onNative = (): boolean => nativeRuntime() !== null;

export function makeBackend(config: HeliosBackendOptions["config"] = {}): HeliosBackend {
  return new HeliosBackend({ runtime: testRuntime(), config, validation: true });
}

/**
 * Runs `body` on a backend whose device reports itself a discrete GPU, so the matmul tuner runs for
 * real (SIMT candidates on lavapipe), with a fresh tuning cache dir and HELIOS_AUTOTUNE unset
 * (deferred: classes met untuned are tuned by `G.tunePending()`); the environment is restored after.
 */
export async function withGpuLikeBackend(
  config: HeliosBackendOptions["config"], body: (G: HeliosBackend, cacheDir: string) => void | Promise<void>,
): Promise<void> {
  const { mkdtempSync } = await import("node:fs");
  const { tmpdir } = await import("node:os");
  const { join } = await import("node:path");
  const dir = mkdtempSync(join(tmpdir(), "helios-tune-"));
  const saved = { cache: process.env.HELIOS_CACHE_DIR, tune: process.env.HELIOS_AUTOTUNE };
  process.env.HELIOS_CACHE_DIR = dir;
  delete process.env.HELIOS_AUTOTUNE;
  try {
    const base = testRuntime();
    const gpuLike = { ...base, getDeviceInfo: () => ({ ...base.getDeviceInfo(), deviceType: "discrete-gpu" }) };
    await body(new HeliosBackend({ runtime: gpuLike, validation: true, config }), dir);
  } finally {
    if (saved.cache === undefined) delete process.env.HELIOS_CACHE_DIR;
    else process.env.HELIOS_CACHE_DIR = saved.cache;
    if (saved.tune !== undefined) process.env.HELIOS_AUTOTUNE = saved.tune;
  }
}

/** Drains validation messages on the native runtime; [] on the mock. */
export function validationMessages(): string[] {
  const rt = nativeRuntime() as unknown as { takeValidationMessages?: () => string[] } | null;
  return rt?.takeValidationMessages ? rt.takeValidationMessages() : [];
}

// On the native runtime every backend test must leave the validation layer silent.
afterEach((t) => {
  if (!onNative()) return;
  const msgs = validationMessages();
  assert.deepEqual(msgs, [], `validation messages after "${t.name}":\n${msgs.join("\n")}`);
});

/**
 * A backend on the test runtime that records the name of every kernel it compiles, each native
 * compile call (`many`: compileKernels, with its kernel count) and how many buffers it leased from
 * the runtime. Its runtime object is its own, so it gets a scheduler (and pending pipelines) of
 * its own.
 */
export function recordingBackend(config: HeliosBackendOptions["config"] = {}): {
  B: HeliosBackend; names: Set<string>; calls: { many: boolean; kernels: number }[]; leases: { n: number };
} {
  const names = new Set<string>();
  const calls: { many: boolean; kernels: number }[] = [];
  const leases = { n: 0 };
  const nameOf = (desc: string | object) => (typeof desc === "string" ? JSON.parse(desc) : desc).name as string;
  const rt = testRuntime();
  const spy = new Proxy(rt, {
    get(target, key, recv) {
      if (key === "compileKernel") {
        return (desc: string | object) => {
          names.add(nameOf(desc));
          calls.push({ many: false, kernels: 1 });
          return target.compileKernel(desc);
        };
      }
      if (key === "leaseBuffer") {
        return (bytes: number) => {
          leases.n++;
          return target.leaseBuffer(bytes);
        };
      }
      if (key === "compileKernels" && target.compileKernels) {
        return (descs: string[], threads?: number) => {
          for (const d of descs) names.add(nameOf(d));
          calls.push({ many: true, kernels: descs.length });
          return (target.compileKernels as NonNullable<Runtime["compileKernels"]>)(descs, threads);
        };
      }
      const v = Reflect.get(target, key, recv);
      return typeof v === "function" ? v.bind(target) : v;
    },
  });
  return { B: new HeliosBackend({ runtime: spy, config, validation: true }), names, calls, leases };
}

/**
 * Whether two kernels computing the same f32 expressions agree bit for bit on this device: on
 * lavapipe they do; NVIDIA's compiler contracts multiplies and adds into FMAs differently per
 * kernel (H200: LayerNorm dx a few ulps apart), so there "the same" means equal to rounding.
 */
export function bitExactDevice(B: { getDeviceInfo(): { deviceName: string } }): boolean {
  return /llvmpipe|lavapipe|mock/i.test(B.getDeviceInfo().deviceName);
}

/**
 * `a` equals `b` bit for bit on a bit-exact device, else within `rel` of |b| plus `rel` of the
 * mean |b| (so an element near zero after cancellation is held to the tensor's scale).
 */
export function assertSameOrRounding(exact: boolean, a: ArrayLike<number>, b: ArrayLike<number>, rel: number, what: string): void {
  if (exact) {
    assert.deepEqual(Array.from(a), Array.from(b), what);
    return;
  }
  assert.equal(a.length, b.length, `${what}: length`);
  let mean = 0;
  for (let i = 0; i < b.length; i++) mean += Math.abs(b[i]) / b.length;
  for (let i = 0; i < b.length; i++) {
    const d = Math.abs(a[i] - b[i]);
    if (!(d <= rel * (Math.abs(b[i]) + mean))) assert.fail(`${what}: element ${i} is ${a[i]}, expected ${b[i]} to rounding (rel ${rel})`);
  }
}
