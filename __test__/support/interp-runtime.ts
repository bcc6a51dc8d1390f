// A MatmulRuntime whose dispatches run in the kernel interpreter: lets the real plan → fixture →
// record path be tested on the CPU, cooperative-matrix variants included.
import type { KernelDesc } from "../../ts/ir/index.js";
import type { MatmulDeviceInfo, MatmulRuntime, ProfileEntry } from "../../ts/kernels/matmul/device.js";
import { Interp } from "./kernel-interp.js";
import { createRequire } from "node:module";

/**
 * The native kernel compiler when the addon is built: every description the interpreter runs is
 * also validated and assembled for real (permissive caps: no device is initialized in these
 * processes), so the interpreter cannot accept what the driver would never see.
 */
const kernelSpirv: ((d: string) => Uint32Array) | undefined = (() => {
  try {
    const n = createRequire(import.meta.url)("../../../native/index.cjs") as { kernelSpirv?: (d: string) => Uint32Array };
    return typeof n.kernelSpirv === "function" ? n.kernelSpirv : undefined;
  } catch {
    return undefined;
  }
})();

export class InterpRuntime implements MatmulRuntime {
  private readonly buffers = new Map<number, Uint8Array>();
  private readonly pipes = new Map<number, { desc: KernelDesc; interp: Interp }>();
  private next = 1;
  private profile: ProfileEntry[] = [];
  private profiling = false;
  dispatches = 0;
  constructor(readonly info: MatmulDeviceInfo = {
    deviceName: "interp", coopMatSupported: true, bf16Supported: true, f16Supported: true, subgroupSize: 32,
    maxSharedMemoryBytes: 49152, driverVersion: "0",
  }) {}
  initDevice() { return this.info; }
  getDeviceInfo() { return this.info; }
  createBuffer(n: number) { const h = this.next++; this.buffers.set(h, new Uint8Array(n)); return h; }
  uploadBuffer(h: number, d: ArrayBuffer | ArrayBufferView, off = 0) {
    const src = d instanceof ArrayBuffer ? new Uint8Array(d) : new Uint8Array(d.buffer, d.byteOffset, d.byteLength);
    this.buf(h).set(src, off);
  }
  readBuffer(h: number, off = 0, len?: number) { const b = this.buf(h); return b.slice(off, off + (len ?? b.length - off)).buffer; }
  destroyBuffer(h: number) { this.buf(h); this.buffers.delete(h); }
  compileKernel(d: string | KernelDesc) {
    const desc = typeof d === "string" ? (JSON.parse(d) as KernelDesc) : d;
    kernelSpirv?.(typeof d === "string" ? d : JSON.stringify(d));
    const h = this.next++;
    this.pipes.set(h, { desc, interp: new Interp(desc) });
    return h;
  }
  beginBatch(o?: { profile?: boolean }) { this.profiling = !!o?.profile; this.profile = []; }
  recordDispatch(p: number, bufs: number[], groups: number[], push?: ArrayBufferView) {
    const pipe = this.pipes.get(p);
    if (!pipe) throw new Error(`interp runtime: bad pipeline ${p}`);
    const { desc, interp } = pipe;
    const pushBuf = push ? push.buffer.slice(push.byteOffset, push.byteOffset + push.byteLength) : new ArrayBuffer(0);
    interp.dispatch(bufs.map((h) => this.buf(h)), [groups[0], groups[1] ?? 1, groups[2] ?? 1], pushBuf as ArrayBuffer, this.info.subgroupSize);
    this.dispatches++;
    if (this.profiling) this.profile.push({ label: desc.name, gpuNs: 1000 });
  }
  submitBatch() { return 1; }
  waitTimeline() {}
  batchProfile() { return this.profile; }
  private buf(h: number): Uint8Array {
    const b = this.buffers.get(h);
    if (!b) throw new Error(`interp runtime: bad buffer ${h}`);
    return b;
  }
}
