// The slice of the native runtime (issue 2 API) that running and timing a matmul needs. Typed here
// so the matmul code compiles against the contract, not against whatever index.d.ts holds today.
import type { KernelDesc } from "../../ir/index.js";

export interface ProfileEntry {
  label: string;
  gpuNs: number;
}

export interface MatmulDeviceInfo {
  deviceName: string;
  vendorId?: number;
  deviceType?: string;
  driverName?: string;
  driverVersion?: string | number;
  driverInfo?: string;
  apiVersion?: string | number;
  f16Supported?: boolean;
  bf16Supported?: boolean;
  coopMatSupported: boolean;
  coopMat2Supported?: boolean;
  coopMatShapes?: { m: number; n: number; k: number; a: string; b: string; c: string; result: string; scope?: string }[];
  subgroupSize: number;
  maxSharedMemoryBytes: number;
  timestampPeriodNs?: number;
}

export interface MatmulRuntime {
  initDevice(opts?: { device?: number | string; validation?: boolean }): MatmulDeviceInfo;
  getDeviceInfo(): MatmulDeviceInfo;
  createBuffer(byteLength: number, opts?: { hostVisible?: boolean }): number;
  uploadBuffer(handle: number, data: ArrayBuffer | ArrayBufferView, byteOffset?: number): void;
  readBuffer(handle: number, byteOffset?: number, byteLength?: number): ArrayBuffer;
  destroyBuffer(handle: number): void;
  compileKernel(desc: string | KernelDesc): number;
  /** Many descriptions (JSON) at once, compiled on several threads (the native addon has it). */
  compileKernels?(descs: string[], threads?: number): number[];
  beginBatch(opts?: { profile?: boolean }): void;
  recordDispatch(pipeline: number, buffers: number[], groups: number[], pushConstants?: ArrayBufferView): void;
  submitBatch(): number;
  waitTimeline(value: number, timeoutMs?: number): void;
  batchProfile(timelineValue: number): ProfileEntry[];
}
