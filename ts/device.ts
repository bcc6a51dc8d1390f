// Device lifetime for the package exports: initDevice / destroyDevice / getDeviceInfo over
// the native runtime (which is itself idempotent and process-wide). The addon is loaded on
// first use, not at import, so HeliosBackend can run on an injected runtime (tests) on a
// machine without the built addon.
import { loadAddon } from "./native-load.js";
import { bindRuntime, type DeviceInfo, type Runtime } from "./exec/runtime.js";

let bound: Runtime | null = null;

export function runtime(): Runtime {
  if (!bound) {
    // The same addon ts/native.ts loads (native/index.cjs, or a Bun executable's helios_vk.node).
    bound = bindRuntime(loadAddon());
  }
  return bound;
}

export function initDevice(opts?: { device?: number | string; validation?: boolean }): DeviceInfo {
  return runtime().initDevice(opts);
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
