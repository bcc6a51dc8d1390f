// The slice of the native runtime (issue 2) and kernel compiler (issue 3) that the backend
// uses, as a typed interface. `bindRuntime` checks the loaded addon has every function so a
// missing export fails at init with one clear message, not as `undefined is not a function`
// in the middle of an op.

export interface DeviceInfo {
  deviceName: string;
  vendorId: number;
  deviceType?: string;
  driverName?: string;
  f16Supported: boolean;
  coopMatSupported?: boolean;
  coopMat2Supported?: boolean;
  coopMatM?: number;
  coopMatN?: number;
  coopMatK?: number;
  subgroupSize: number;
  maxWorkgroupSize?: number;
  maxSharedMemoryBytes: number;
  hasAsyncTransfer?: boolean;
  hasPushDescriptors?: boolean;
  /** Where the driver's pipeline cache started from: the device's own file, a shipped seed, or empty (native addon). */
  pipelineCacheSource?: "own" | "seed" | "empty";
  [key: string]: unknown;
}

export interface PoolStats {
  leasedBytes: number;
  freeBytes: number;
  /** High-water mark of leased + free bytes since the last trimPool. */
  peakBytes: number;
  /** High-water mark of leased bytes (the live set in bucket bytes) since the last trimPool (native addon; absent in mocks). */
  peakLeasedBytes?: number;
  allocations: number;
  reuses: number;
  /** Reuses inside an open batch of a buffer whose last GPU use was pending (native addon; absent in mocks). */
  inBatchReuses?: number;
  /** Idle buffers the pool holds (native addon; absent in mocks). */
  freeBuffers?: number;
  /** Allocations served by a buffer made ahead on a background thread, in `allocations` too (native addon; absent in mocks). */
  allocatedAhead?: number;
  /** Device bytes made ahead and not leased yet, beside leased + free (native addon; absent in mocks). */
  aheadBytes?: number;
}

export type Groups = [number, number?, number?];

export interface Runtime {
  initDevice(opts?: { device?: number | string; validation?: boolean; shareable?: boolean; pipelineSeedDir?: string }): DeviceInfo;
  getDeviceInfo(): DeviceInfo;
  destroy(): void;
  leaseBuffer(byteLength: number): number;
  releaseBuffer(handle: number): void;
  uploadBuffer(handle: number, data: ArrayBuffer | ArrayBufferView, byteOffset?: number): void;
  readBuffer(handle: number, byteOffset?: number, byteLength?: number): ArrayBuffer;
  fillBuffer(handle: number, u32Pattern: number, byteOffset?: number, byteLength?: number): void;
  copyBuffer(src: number, dst: number, srcOffset: number, dstOffset: number, byteLength: number): void;
  poolStats(): PoolStats;
  beginBatch(opts?: { profile?: boolean; overlapAllocations?: boolean }): void;
  recordDispatch(pipeline: number, buffers: number[], groups: Groups, pushConstants?: ArrayBufferView): void;
  recordDispatchMany(packed: Uint32Array, count: number): void;
  submitBatch(): number;
  waitTimeline(value: number, timeoutMs?: number): void;
  getCompleted(): number;
  compileKernel(desc: string | object): number;
  /**
   * Many descriptions compiled on several threads (`threads`: the addon's default when absent);
   * with kernelSpirv (assembly alone, memoized) it lets the engine defer and group pipeline
   * compiles (ts/exec/pipelines.ts). Optional: the test mock has neither.
   */
  compileKernels?(descs: string[], threads?: number): number[];
  kernelSpirv?(desc: string | object): Uint32Array;
  /** Writes the pipeline cache as a seed in a directory (ts/device.ts exportPipelineSeed); the mock has none. */
  exportPipelineSeed?(dir: string): string;
  /** Captured batches (issue 2); optional so runtimes without them (the test mock) still bind. */
  captureBatch?(): number;
  replayBatch?(graph: number): number;
  destroyCapture?(graph: number): void;
}

const REQUIRED: (keyof Runtime)[] = [
  "initDevice", "getDeviceInfo", "destroy", "leaseBuffer", "releaseBuffer", "uploadBuffer",
  "readBuffer", "fillBuffer", "copyBuffer", "poolStats", "beginBatch", "recordDispatch", "recordDispatchMany",
  "submitBatch", "waitTimeline", "getCompleted", "compileKernel",
];

const bound = new WeakMap<object, Runtime>();

/** One Runtime object per addon, so every backend on it shares one scheduler. */
export function bindRuntime(addon: unknown): Runtime {
  const hit = bound.get(addon as object);
  if (hit) return hit;
  const rt = bindNew(addon);
  bound.set(addon as object, rt);
  return rt;
}

function bindNew(addon: unknown): Runtime {
  const mod = { ...(addon as Record<string, unknown>) };
  if (typeof mod.compileKernel !== "function") composeCompile(mod);
  const missing = REQUIRED.filter((k) => typeof mod[k] !== "function");
  if (missing.length > 0) {
    throw new Error(`@alpha/helios: the native addon lacks ${missing.join(", ")} (rebuild it: npm run build:native)`);
  }
  return mod as unknown as Runtime;
}

type Fn = (...args: unknown[]) => unknown;

/**
 * An addon with the assembler (kernelSpirv/kernelLayout) and the runtime (createPipeline)
 * but no compileKernel can still compile: assemble, then create the pipeline. Memoized by
 * the description text, like the native compileKernel.
 */
function composeCompile(mod: Record<string, unknown>): void {
  const spirv = mod.kernelSpirv as Fn | undefined;
  const layout = mod.kernelLayout as Fn | undefined;
  const create = mod.createPipeline as Fn | undefined;
  if (!spirv || !layout || !create) return;
  const memo = new Map<string, number>();
  mod.compileKernel = (desc: string | object): number => {
    const text = typeof desc === "string" ? desc : JSON.stringify(desc);
    const hit = memo.get(text);
    if (hit !== undefined) return hit;
    const l = layout(text) as { name: string; bindings: string[]; pushConstantBytes: number };
    const h = create(spirv(text), { bindings: l.bindings, pushConstantBytes: l.pushConstantBytes, label: l.name }) as number;
    memo.set(text, h);
    return h;
  };
}
