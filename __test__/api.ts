// The native API exactly as issue 2 specifies it, so the tests state the contract they
// check independently of the generated index.d.ts. helpers.ts assigns the addon to this
// type without a cast, so a signature that drifts from issue 2 fails to compile.
export type Handle = number;

export interface DeviceInfo {
  deviceName: string;
  vendorId: number;
  deviceType: string;
  driverName: string;
  driverVersion: string | number;
  apiVersion: string | number;
  f16Supported: boolean;
  bf16Supported: boolean;
  coopMatSupported: boolean;
  coopMat2Supported: boolean;
  coopMatShapes: Array<{ m: number; n: number; k: number; a: string; b: string; c: string; result: string }>;
  coopMatM: number;
  coopMatN: number;
  coopMatK: number;
  subgroupSize: number;
  maxWorkgroupSize: number | number[];
  /** maxComputeWorkGroupCount (x, y, z). */
  maxWorkgroupCount: number[];
  maxSharedMemoryBytes: number;
  /** maxStorageBufferRange as reported, maxBufferSize (maintenance4), and the effective limit. */
  maxStorageBufferRange: number;
  maxBufferSize: number;
  maxBindingBytes: number;
  hasAsyncTransfer: boolean;
  hasPushDescriptors: boolean;
  hasBDA: boolean;
  timestampPeriodNs: number;
  /** Whether the validation layer is active (an addition beyond issue 2's list). */
  validation?: boolean;
}

export interface PoolStats {
  leasedBytes: number;
  freeBytes: number;
  peakBytes: number;
  /** Additions beyond issue 2's list: the live-set peak and reuses inside an open batch. */
  peakLeasedBytes?: number;
  allocations: number;
  reuses: number;
  inBatchReuses?: number;
}

export interface PipelineLayout {
  bindings: Array<"read" | "write" | "readwrite">;
  pushConstantBytes?: number;
  entryPoint?: string;
  label?: string;
}

export interface HeliosNative {
  initDevice(opts?: { device?: number | string; validation?: boolean }): DeviceInfo;
  getDeviceInfo(): DeviceInfo;
  destroy(): void;
  takeValidationMessages(): string[];

  createBuffer(byteLength: number, opts?: { hostVisible?: boolean }): Handle;
  uploadBuffer(handle: Handle, data: ArrayBuffer | ArrayBufferView, byteOffset?: number): void;
  readBuffer(handle: Handle, byteOffset?: number, byteLength?: number): ArrayBuffer;
  readBufferInto(handle: Handle, dst: ArrayBuffer | ArrayBufferView, byteOffset?: number): void;
  readBufferAsync(handle: Handle, byteOffset?: number, byteLength?: number): Promise<ArrayBuffer>;
  fillBuffer(handle: Handle, u32Pattern: number, byteOffset?: number, byteLength?: number): void;
  copyBuffer(src: Handle, dst: Handle, srcOffset: number, dstOffset: number, byteLength: number): void;
  destroyBuffer(handle: Handle): void;

  leaseBuffer(byteLength: number): Handle;
  releaseBuffer(handle: Handle): void;
  poolStats(): PoolStats;
  trimPool(): void;

  createPipeline(spirv: Uint32Array, layout: PipelineLayout): Handle;
  destroyPipeline(handle: Handle): void;

  beginBatch(opts?: { profile?: boolean; overlapAllocations?: boolean }): void;
  recordDispatch(pipeline: Handle, buffers: Handle[], groups: number[], pushConstants?: ArrayBufferView): void;
  recordDispatchMany(packed: Uint32Array, count: number): void;
  submitBatch(): number;
  waitTimeline(value: number, timeoutMs?: number): void;
  waitTimelineAsync(value: number): Promise<void>;
  getCompleted(): number;

  captureBatch(): Handle;
  replayBatch(graph: Handle): number;
  destroyCapture(graph: Handle): void;

  batchProfile(value: number): Array<{ label: string; gpuNs: number; startNs: number; endNs: number }>;
}

export type HeliosErrorCode =
  | "ERR_HELIOS_NO_DEVICE"
  | "ERR_HELIOS_INVALID_HANDLE"
  | "ERR_HELIOS_OUT_OF_RANGE"
  | "ERR_HELIOS_INVALID_ARGUMENT"
  | "ERR_HELIOS_OUT_OF_MEMORY"
  | "ERR_HELIOS_TIMEOUT"
  | "ERR_HELIOS_DEVICE_LOST"
  | "ERR_HELIOS_DESTROYED"
  | "ERR_HELIOS_INVALID_KERNEL"
  | "ERR_HELIOS_ISOLATE";
