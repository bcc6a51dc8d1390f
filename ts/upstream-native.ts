// The upstream Helios's raw addon API (`getNative()`, its `NativeAddon` type) and its
// `getKernelSpirv(name, wgSize)`, on top of this addon, for Alpha's root scripts
// (scripts/gpu-raw-test.ts, scripts/gpu-sustained.ts). New code should use HeliosBackend or
// the addon's own API (`native`); this module only translates.
//
// Mapping (upstream call -> this addon):
//   initDevice()                 -> initDevice() (ts/device.ts); the upstream fields plus Helios's, hasDGC: false
//   createBuffer(bytes, hv = 1)  -> createBuffer(bytes, {hostVisible: hv !== 0}) (upstream's default is host-visible)
//   uploadBuffer(h, data)        -> uploadBuffer(h, data) at offset 0; data past the buffer's end is an error (upstream truncated)
//   fillBuffer(h, bytes, value)  -> fillBuffer(h, value as a u32 pattern, 0, bytes); past the end is an error (upstream clamped)
//   readBuffer(h)                -> readBuffer(h) as a Float32Array of the whole buffer
//   destroyBuffer(h)             -> destroyBuffer(h); a stale handle is ERR_HELIOS_INVALID_HANDLE (upstream ignored it)
//   createPipeline(spirv, n, pc) -> createPipeline(spirv, layout). SPIR-V from getKernelSpirv carries its layout
//                                   (binding access, push bytes): a missing pc takes the kernel's push size
//                                   (upstream's default of 0 left the kernel's len undefined on the device).
//                                   Other SPIR-V gets n `readwrite` bindings and pc push bytes (default 0).
//   dispatch(...)                -> beginBatch + recordDispatch + submitBatch; returns the timeline value.
//                                   It does not wait for the previous dispatch (upstream did, as it re-recorded
//                                   one command buffer); reads and waitTimeline order correctly.
//   batchBegin / batchDispatch / batchSubmit -> beginBatch / recordDispatch / submitBatch. batchDispatch's
//                                   writeMask is not needed: barriers come from each binding's declared access.
//   waitTimeline / getCompleted  -> the same calls
//   gpuTime(..., iters, warmup)  -> a profiled batch of warmup + iters dispatches (batchProfile); returns µs per
//                                   timed dispatch: (last end - first start) / iters
//   waitIdle()                   -> submit an empty batch (it follows every earlier submit and upload) and wait
//                                   for it; with a raw batch open, waits for what this API submitted
//   destroy()                    -> destroyDevice() (ts/device.ts)
// Absent, as the upstream allowed for optional members:
//   batchDispatchMany            its packed format holds int32 pipeline and buffer slots; Helios handles are
//                                53-bit generational ids. The addon's recordDispatchMany is the equivalent.
//   batchExecuteAll              begin + batchDispatchMany + submit in one call, so the same.
//   batchExecuteAllDGC, dgcSetup, dgcInfo   Helios has no device-generated-commands path.
// Push constants: upstream kernels take every push field as f32, sizes included, so lengths are
// exact only up to 2^24 (see ts/kernels/upstream.ts); Helios's own kernels push u32 sizes.
// The raw API and HeliosBackend share the process's one stream and its single open batch: do
// not interleave a raw batch with backend work (flush the backend first).
import { native } from "./native.js";
import { destroyDevice, initDevice as initHeliosDevice } from "./device.js";
import type { DeviceInfo } from "./exec/runtime.js";
import { upstreamKernel, upstreamKernelNames, upstreamKey } from "./kernels/upstream.js";

/** getKernelSpirv was given a name this package does not generate. */
export const ERR_UNKNOWN_KERNEL = "ERR_HELIOS_UNKNOWN_KERNEL";
const ERR_ARGUMENT = "ERR_HELIOS_INVALID_ARGUMENT";

function fail(code: string, call: string, msg: string): never {
  throw Object.assign(new Error(`${call}: ${msg}`), { code });
}

/** What the upstream's initDevice returned (Helios adds its own DeviceInfo fields). */
export interface UpstreamDeviceInfo {
  deviceName: string;
  vendorId: number;
  f16Supported: boolean;
  hasAsyncTransfer: boolean;
  coopMatSupported: boolean;
  coopMat2Supported: boolean;
  coopMatM: number;
  coopMatN: number;
  coopMatK: number;
  hasPushDescriptors: boolean;
  hasBDA: boolean;
  /** Always false: Helios has no device-generated-commands path. */
  hasDGC: boolean;
}

/** The upstream C addon's interface (packages/helios/src/device.ts), as Helios provides it. */
export interface NativeAddon {
  initDevice(): UpstreamDeviceInfo & DeviceInfo;
  createBuffer(byteLength: number, hostVisible?: number): number;
  uploadBuffer(handle: number, data: Float32Array): void;
  fillBuffer(handle: number, byteSize: number, value: number): void;
  readBuffer(handle: number): Float32Array;
  destroyBuffer(handle: number): void;
  createPipeline(spirv: Uint32Array, numBindings: number, pushConstantSize?: number): number;
  dispatch(pipeline: number, buffers: number[], gX: number, gY?: number, gZ?: number, pushConstants?: Float32Array): number;
  batchBegin(): void;
  batchDispatch(pipeline: number, buffers: number[], gX: number, gY?: number, gZ?: number, pushConstants?: Float32Array, writeMask?: Uint32Array): void;
  /** Never present (see the module header): use the addon's recordDispatchMany. */
  batchDispatchMany?(packed: ArrayBuffer, count: number): void;
  batchSubmit(): number;
  /** Never present (see the module header). */
  batchExecuteAll?(packed: ArrayBuffer, count: number): number;
  /** Never present: no DGC in Helios. */
  batchExecuteAllDGC?(packed: ArrayBuffer, count: number): number;
  /** Never present: no DGC in Helios. */
  dgcSetup?(pipelineSlot: number, pushConstantSize: number, maxSequences: number): boolean;
  /** Never present: no DGC in Helios. */
  dgcInfo?(): { hasBDA: boolean; hasDGC: boolean; stride: number; maxSequences: number };
  waitTimeline(value: number): void;
  getCompleted(): number;
  gpuTime(pipeline: number, buffers: number[], gX: number, gY?: number, gZ?: number, pushConstants?: Float32Array, iters?: number, warmup?: number): number;
  waitIdle(): void;
  destroy(): void;
}

type Access = "read" | "write" | "readwrite";

/** The layout a getKernelSpirv module was generated with. */
interface ModuleLayout {
  name: string;
  bindings: Access[];
  pushBytes: number;
}

const spirvCache = new Map<string, Uint32Array>();
const moduleLayouts = new WeakMap<Uint32Array, ModuleLayout>();

/**
 * SPIR-V of an upstream kernel by its upstream name, with the upstream bindings and push
 * constants (ts/kernels/upstream.ts), generated through the kernel IR. Cached per (name, wgSize):
 * the same array comes back each time.
 */
export function getKernelSpirv(name: string, wgSize = 256): Uint32Array {
  if (!Number.isInteger(wgSize) || wgSize < 1) fail(ERR_ARGUMENT, "getKernelSpirv", `wgSize must be a positive integer, got ${wgSize}`);
  const cacheKey = `${name}:${wgSize}`;
  const hit = spirvCache.get(cacheKey);
  if (hit) return hit;
  const key = typeof name === "string" ? upstreamKey(name) : undefined;
  if (!key) {
    fail(ERR_UNKNOWN_KERNEL, "getKernelSpirv", `no kernel named ${JSON.stringify(name)}; Helios generates the upstream ` +
      `elementwise kernels only (${upstreamKernelNames().join(", ")}); use HeliosBackend for the rest`);
  }
  const desc = JSON.stringify(upstreamKernel(key, wgSize));
  const words = native.kernelSpirv(desc);
  const layout = native.kernelLayout(desc);
  moduleLayouts.set(words, { name, bindings: layout.bindings as Access[], pushBytes: layout.pushConstantBytes });
  spirvCache.set(cacheKey, words);
  return words;
}

/** The layout of a getKernelSpirv module, also when the caller passes a copy of its words. */
function layoutOf(spirv: Uint32Array): ModuleLayout | undefined {
  const hit = moduleLayouts.get(spirv);
  if (hit) return hit;
  for (const words of spirvCache.values()) {
    if (words.length === spirv.length && words.every((w, i) => w === spirv[i])) return moduleLayouts.get(words);
  }
  return undefined;
}

function optionalCount(call: string, what: string, v: number | undefined, dflt: number, min: number): number {
  if (v === undefined) return dflt;
  if (!Number.isInteger(v) || v < min) fail(ERR_ARGUMENT, call, `${what} must be an integer >= ${min}, got ${v}`);
  return v;
}

class UpstreamAddon implements NativeAddon {
  /** Push bytes and name of each pipeline created here, to cut the caller's push array to size. */
  private readonly pipelines = new Map<number, { label: string; pushBytes: number }>();
  private batchOpen = false;
  /** Highest timeline value a submit of this API returned. */
  private submitted = 0;

  initDevice(): UpstreamDeviceInfo & DeviceInfo {
    const info = initHeliosDevice();
    return {
      ...info,
      hasAsyncTransfer: Boolean(info.hasAsyncTransfer),
      coopMatSupported: Boolean(info.coopMatSupported),
      coopMat2Supported: Boolean(info.coopMat2Supported),
      coopMatM: info.coopMatM ?? 0,
      coopMatN: info.coopMatN ?? 0,
      coopMatK: info.coopMatK ?? 0,
      hasPushDescriptors: Boolean(info.hasPushDescriptors),
      hasBDA: Boolean(info.hasBDA),
      hasDGC: false,
    };
  }

  createBuffer(byteLength: number, hostVisible = 1): number {
    return native.createBuffer(byteLength, { hostVisible: hostVisible !== 0 });
  }

  uploadBuffer(handle: number, data: Float32Array): void {
    native.uploadBuffer(handle, data);
  }

  fillBuffer(handle: number, byteSize: number, value: number): void {
    if (!Number.isInteger(value) || value < -0x80000000 || value > 0xffffffff) {
      fail(ERR_ARGUMENT, "fillBuffer", `value is the 32-bit pattern written to every word, got ${value}`);
    }
    native.fillBuffer(handle, value >>> 0, 0, byteSize);
  }

  readBuffer(handle: number): Float32Array {
    const bytes = native.readBuffer(handle);
    return new Float32Array(bytes, 0, bytes.byteLength >>> 2);
  }

  destroyBuffer(handle: number): void {
    native.destroyBuffer(handle);
  }

  createPipeline(spirv: Uint32Array, numBindings?: number, pushConstantSize?: number): number {
    if (!(spirv instanceof Uint32Array)) fail(ERR_ARGUMENT, "createPipeline", "spirv must be a Uint32Array");
    const known = layoutOf(spirv);
    const n = optionalCount("createPipeline", "numBindings", numBindings, known ? known.bindings.length : 4, 1);
    if (known && n !== known.bindings.length) {
      fail(ERR_ARGUMENT, "createPipeline", `kernel ${known.name} has ${known.bindings.length} bindings, numBindings is ${n}`);
    }
    const pushBytes = optionalCount("createPipeline", "pushConstantSize", pushConstantSize, known ? known.pushBytes : 0, 0);
    const label = known ? `upstream_${known.name}` : "upstream_raw";
    const bindings: Access[] = known ? known.bindings : new Array<Access>(n).fill("readwrite");
    const handle = native.createPipeline(spirv, { bindings, pushConstantBytes: pushBytes, label });
    this.pipelines.set(handle, { label, pushBytes });
    return handle;
  }

  dispatch(pipeline: number, buffers: number[], gX: number, gY?: number, gZ?: number, pushConstants?: Float32Array): number {
    if (this.batchOpen) fail(ERR_ARGUMENT, "dispatch", "a batch is open (batchBegin): use batchDispatch, or batchSubmit first");
    native.beginBatch();
    try {
      this.record("dispatch", pipeline, buffers, gX, gY, gZ, pushConstants);
    } finally {
      // a refused dispatch leaves an empty batch: submitting it closes it
      this.submitted = Math.max(this.submitted, native.submitBatch());
    }
    return this.submitted;
  }

  batchBegin(): void {
    if (this.batchOpen) fail(ERR_ARGUMENT, "batchBegin", "a batch is already open: batchSubmit it first");
    native.beginBatch();
    this.batchOpen = true;
  }

  batchDispatch(pipeline: number, buffers: number[], gX: number, gY?: number, gZ?: number, pushConstants?: Float32Array): void {
    if (!this.batchOpen) fail(ERR_ARGUMENT, "batchDispatch", "no open batch (call batchBegin first)");
    this.record("batchDispatch", pipeline, buffers, gX, gY, gZ, pushConstants);
  }

  batchSubmit(): number {
    if (!this.batchOpen) fail(ERR_ARGUMENT, "batchSubmit", "no open batch (call batchBegin first)");
    this.batchOpen = false;
    const value = native.submitBatch();
    this.submitted = Math.max(this.submitted, value);
    return value;
  }

  waitTimeline(value: number): void {
    native.waitTimeline(value);
  }

  getCompleted(): number {
    return native.getCompleted();
  }

  gpuTime(pipeline: number, buffers: number[], gX: number, gY?: number, gZ?: number, pushConstants?: Float32Array, iters?: number, warmup?: number): number {
    if (this.batchOpen) fail(ERR_ARGUMENT, "gpuTime", "a batch is open (batchBegin): batchSubmit it first");
    const timed = optionalCount("gpuTime", "iters", iters, 1, 1);
    const untimed = optionalCount("gpuTime", "warmup", warmup, 0, 0);
    native.beginBatch({ profile: true });
    let value: number;
    try {
      for (let i = 0; i < untimed + timed; i++) this.record("gpuTime", pipeline, buffers, gX, gY, gZ, pushConstants);
    } finally {
      value = native.submitBatch();
      this.submitted = Math.max(this.submitted, value);
    }
    const entries = native.batchProfile(value).slice(untimed);
    const start = Math.min(...entries.map((e) => e.startNs));
    const end = Math.max(...entries.map((e) => e.endNs));
    return (end - start) / timed / 1000;
  }

  waitIdle(): void {
    if (this.batchOpen) {
      native.waitTimeline(this.submitted);
      return;
    }
    native.beginBatch();
    const value = native.submitBatch();
    this.submitted = Math.max(this.submitted, value);
    native.waitTimeline(value);
  }

  destroy(): void {
    destroyDevice();
    this.pipelines.clear();
    this.batchOpen = false;
    this.submitted = 0;
  }

  private record(call: string, pipeline: number, buffers: number[], gX: number, gY: number | undefined, gZ: number | undefined, push: Float32Array | undefined): void {
    if (!Array.isArray(buffers)) fail(ERR_ARGUMENT, call, "buffers must be an array of buffer handles");
    native.recordDispatch(pipeline, buffers, [gX, gY ?? 1, gZ ?? 1], this.pushFor(call, pipeline, push));
  }

  /** The first pushBytes bytes of the caller's push array, as the upstream read them. */
  private pushFor(call: string, pipeline: number, push: Float32Array | undefined): ArrayBufferView | undefined {
    const p = this.pipelines.get(pipeline);
    if (!p) return push; // a pipeline made elsewhere: the addon checks the size
    if (p.pushBytes === 0) return undefined;
    if (!push || !ArrayBuffer.isView(push) || push.byteLength < p.pushBytes) {
      fail(ERR_ARGUMENT, call, `pipeline ${p.label} takes ${p.pushBytes} push-constant bytes, got ${push && ArrayBuffer.isView(push) ? push.byteLength : "none"}`);
    }
    return new Uint8Array(push.buffer, push.byteOffset, p.pushBytes);
  }
}

let addon: UpstreamAddon | null = null;

/** The upstream raw API; initializes the device if needed, as the upstream's getNative did. */
export function getNative(): NativeAddon {
  addon ??= new UpstreamAddon();
  addon.initDevice();
  return addon;
}
