// Public entry point of @alpha/helios.
export { native } from "./native.js";
export { HeliosBackend, type HeliosBackendOptions, type HeliosStats, type CapturedBatch, type AdamwTensors, type AdamwStepScalars } from "./backend.js";
export { ERR_CAPTURE } from "./exec/scheduler.js";
export { initDevice, destroyDevice, getDeviceInfo, exportPipelineSeed } from "./device.js";
export { getNative, getKernelSpirv, ERR_UNKNOWN_KERNEL, type NativeAddon, type UpstreamDeviceInfo } from "./upstream-native.js";
export type { Backend, TensorData, Dtype, Shape, TensorArray, NumericArray } from "./types.js";
export type { DeviceInfo, PoolStats } from "./exec/runtime.js";
export { readConfig, type HeliosConfig } from "./config.js";
export { heliosRegistry, BackendRegistry } from "./registry.js";
