// Device lifetime for the package exports: initDevice / destroyDevice / getDeviceInfo over
// the native runtime (which is itself idempotent and process-wide).
import { native } from "./native.js";
import { bindRuntime, type DeviceInfo, type Runtime } from "./exec/runtime.js";

let bound: Runtime | null = null;

export function runtime(): Runtime {
  if (!bound) bound = bindRuntime(native);
  return bound;
}

export function initDevice(opts?: { device?: number | string; validation?: boolean }): DeviceInfo {
  return runtime().initDevice(opts);
}

export function destroyDevice(): void {
  runtime().destroy();
}

export function getDeviceInfo(): DeviceInfo {
  return runtime().getDeviceInfo();
}
