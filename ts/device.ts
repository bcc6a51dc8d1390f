// Device lifetime for the package exports: initDevice / destroyDevice / getDeviceInfo over
// the native runtime (which is itself idempotent and process-wide). The addon is loaded on
// first use, not at import, so HeliosBackend can run on an injected runtime (tests) on a
// machine without the built addon.
import { fileURLToPath } from "node:url";
import { loadAddon } from "./native-load.js";
import { bindRuntime, type DeviceInfo, type Runtime } from "./exec/runtime.js";
import { startup } from "./startup/index.js";

let bound: Runtime | null = null;

export function runtime(): Runtime {
  if (!bound) {
    // The same addon ts/native.ts loads (native/index.cjs, or a Bun executable's helios_vk.node).
    bound = bindRuntime(loadAddon());
  }
  return bound;
}

/**
 * The package's shipped pipeline-cache seeds (data/pipeline-cache/README.md): this file is
 * dist/ts/device.js. A device with no cache file of its own starts its driver's pipeline cache
 * from the seed for its GPU model and driver build, when there is one.
 */
export const PIPELINE_SEED_DIR = fileURLToPath(new URL("../../data/pipeline-cache", import.meta.url));

export interface DeviceOptions {
  /** Physical-device index or name substring (overrides HELIOS_DEVICE). */
  device?: number | string;
  validation?: boolean;
  /** Able to share memory with CUDA (the distributed layer). */
  shareable?: boolean;
  /** Where seeds are looked for; PIPELINE_SEED_DIR by default (HELIOS_PIPELINE_SEED=0: never). */
  pipelineSeedDir?: string;
}

/**
 * initDevice on `rt` with the package's seed directory; the startup trace records where the
 * pipeline cache started from (DeviceInfo.pipelineCacheSource: own, seed or empty).
 */
export function openDevice<I>(rt: { initDevice(opts: DeviceOptions): I }, opts: DeviceOptions = {}): I {
  const info = rt.initDevice({ ...opts, pipelineSeedDir: opts.pipelineSeedDir ?? PIPELINE_SEED_DIR });
  const source = (info as { pipelineCacheSource?: unknown }).pipelineCacheSource;
  if (typeof source === "string") startup().trace?.setPipelineCacheSource(source);
  return info;
}

export function initDevice(opts?: DeviceOptions): DeviceInfo {
  return openDevice(runtime(), opts);
}

/**
 * Writes the device's pipeline cache as a seed in `dir` (created if missing), named for its GPU
 * model and driver build; returns the file's path. Run it once the kernels a job needs are
 * compiled (`helios warmup --export-pipeline-seed=DIR` does); ship the file in the package's
 * data/pipeline-cache. Errors: ERR_HELIOS_INVALID_ARGUMENT (dir not a directory, not writable).
 */
export function exportPipelineSeed(dir: string): string {
  const rt = runtime();
  if (!rt.exportPipelineSeed) throw new Error("@alpha/helios: the native addon lacks exportPipelineSeed (rebuild it: npm run build:native)");
  return rt.exportPipelineSeed(dir);
}

let generation = 0;

/** Bumped by destroyDevice(): pipelines and batches from before it are gone. */
export function deviceGeneration(): number {
  return generation;
}

export function destroyDevice(): void {
  generation++;
  runtime().destroy();
}

export function getDeviceInfo(): DeviceInfo {
  return runtime().getDeviceInfo();
}
