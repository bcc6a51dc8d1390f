// A synchronous CPU stand-in for the native runtime (issue 2's API), executing kernels in the
// kernel interpreter (__test__/support/kernel-interp.ts). It enforces the runtime's contracts
// that the backend relies on — binding counts, push-constant sizes, handle validity, no use after
// release — and keeps pool statistics the way the native pool reports them (bytes leased, peak).
import type { DeviceInfo, Groups, PoolStats, Runtime } from "../../ts/exec/runtime.js";
import type { KernelDesc } from "../../ts/ir/nodes.js";
import { Interp } from "../support/kernel-interp.js";

/** A compiled pipeline: the interpreter over its description, and its push block's size. */
export interface Compiled {
  desc: KernelDesc;
  interp: Interp;
  pushBytes: number;
}

function compile(desc: KernelDesc): Compiled {
  const pushBytes = (desc.push ?? []).reduce((p, f) => p + (f.type.endsWith("x4") ? 16 : f.type.endsWith("x2") ? 8 : 4), 0);
  return { desc, interp: new Interp(desc), pushBytes };
}

export class MockRuntime implements Runtime {
  private buffers = new Map<number, ArrayBuffer>();
  private free = new Map<number, number[]>(); // byte size -> released handles
  private leased = new Map<number, number>();
  private pipelines = new Map<number, Compiled>();
  private byText = new Map<string, number>();
  private next = 1;
  private timeline = 0;
  private batchOpen = false;
  stats: PoolStats = { leasedBytes: 0, freeBytes: 0, peakBytes: 0, allocations: 0, reuses: 0 };
  dispatches = 0;

  initDevice(): DeviceInfo {
    return this.getDeviceInfo();
  }
  getDeviceInfo(): DeviceInfo {
    return { deviceName: "mock (IR interpreter)", vendorId: 0, f16Supported: true, subgroupSize: 8, maxSharedMemoryBytes: 32768 };
  }
  destroy(): void {}

  private buf(h: number, what: string): ArrayBuffer {
    const b = this.buffers.get(h);
    if (!b) throw Object.assign(new Error(`${what}: invalid buffer handle ${h}`), { code: "ERR_HELIOS_INVALID_HANDLE" });
    return b;
  }

  leaseBuffer(byteLength: number): number {
    const list = this.free.get(byteLength);
    let h: number;
    if (list && list.length > 0) {
      h = list.pop() as number;
      this.stats.reuses++;
      this.stats.freeBytes -= byteLength;
    } else {
      h = this.next++;
      this.buffers.set(h, new ArrayBuffer(byteLength));
      this.stats.allocations++;
      // poison: fresh buffers are not zeroed on a GPU either
      new Uint8Array(this.buffers.get(h) as ArrayBuffer).fill(0xcd);
    }
    this.leased.set(h, byteLength);
    this.stats.leasedBytes += byteLength;
    this.stats.peakBytes = Math.max(this.stats.peakBytes, this.stats.leasedBytes + this.stats.freeBytes);
    return h;
  }
  releaseBuffer(h: number): void {
    const bytes = this.leased.get(h);
    if (bytes === undefined) throw Object.assign(new Error(`releaseBuffer: handle ${h} is not leased`), { code: "ERR_HELIOS_INVALID_HANDLE" });
    this.leased.delete(h);
    this.stats.leasedBytes -= bytes;
    this.stats.freeBytes += bytes;
    new Uint8Array(this.buf(h, "releaseBuffer")).fill(0xab);
    const l = this.free.get(bytes) ?? [];
    l.push(h);
    this.free.set(bytes, l);
  }
  uploadBuffer(h: number, data: ArrayBuffer | ArrayBufferView, byteOffset = 0): void {
    const src = ArrayBuffer.isView(data) ? new Uint8Array(data.buffer, data.byteOffset, data.byteLength) : new Uint8Array(data);
    new Uint8Array(this.buf(h, "uploadBuffer")).set(src, byteOffset);
  }
  readBuffer(h: number, byteOffset = 0, byteLength?: number): ArrayBuffer {
    const b = this.buf(h, "readBuffer");
    return b.slice(byteOffset, byteOffset + (byteLength ?? b.byteLength - byteOffset));
  }
  fillBuffer(h: number, pattern: number, byteOffset = 0, byteLength?: number): void {
    const b = this.buf(h, "fillBuffer");
    const len = byteLength ?? b.byteLength - byteOffset;
    new Uint32Array(b, byteOffset, len / 4).fill(pattern);
  }
  copyBuffer(src: number, dst: number, so: number, d: number, n: number): void {
    new Uint8Array(this.buf(dst, "copyBuffer")).set(new Uint8Array(this.buf(src, "copyBuffer"), so, n), d);
  }
  poolStats(): PoolStats {
    return { ...this.stats };
  }
  beginBatch(): void {
    if (this.batchOpen) throw Object.assign(new Error("beginBatch: a batch is already open"), { code: "ERR_HELIOS_INVALID_ARGUMENT" });
    this.batchOpen = true;
  }
  recordDispatch(pipeline: number, buffers: number[], groups: Groups, push?: ArrayBufferView): void {
    if (!this.batchOpen) throw Object.assign(new Error("recordDispatch: no open batch"), { code: "ERR_HELIOS_INVALID_ARGUMENT" });
    const k = this.pipelines.get(pipeline);
    if (!k) throw new Error(`recordDispatch: invalid pipeline ${pipeline}`);
    for (const h of buffers) if (!this.leased.has(h)) throw new Error(`recordDispatch: ${k.desc.name}: buffer ${h} is not leased (use after release)`);
    const pc = push ? (push.buffer.slice(push.byteOffset, push.byteOffset + push.byteLength) as ArrayBuffer) : null;
    if (pc && pc.byteLength !== k.pushBytes) throw new Error(`recordDispatch: ${k.desc.name}: ${pc.byteLength} push bytes, layout has ${k.pushBytes}`);
    const g: [number, number, number] = [groups[0], groups[1] ?? 1, groups[2] ?? 1];
    for (const x of g) if (!(x >= 1 && x <= 65535)) throw new Error(`recordDispatch: ${k.desc.name}: groups [${g}] out of range`);
    this.run(k, buffers.map((h) => this.buf(h, "recordDispatch")), g, pc);
    this.dispatches++;
  }
  /** Runs one validated dispatch. */
  protected run(k: Compiled, buffers: ArrayBuffer[], groups: [number, number, number], push: ArrayBuffer | null): void {
    k.interp.dispatch(buffers.map((b) => new Uint8Array(b)), groups, push ?? new ArrayBuffer(0), this.getDeviceInfo().subgroupSize);
  }
  recordDispatchMany(packed: Uint32Array, count: number): void {
    let o = 0;
    for (let e = 0; e < count; e++) {
      const pipeline = packed[o] + packed[o + 1] * 4294967296;
      const groups: Groups = [packed[o + 2], packed[o + 3], packed[o + 4]];
      const nb = packed[o + 5], np = packed[o + 6];
      o += 7;
      const bufs: number[] = [];
      for (let b = 0; b < nb; b++, o += 2) bufs.push(packed[o] + packed[o + 1] * 4294967296);
      const push = np > 0 ? packed.slice(o, o + np) : undefined;
      o += np;
      try {
        this.recordDispatch(pipeline, bufs, groups, push);
      } catch (err) {
        throw new Error(`recordDispatchMany: entry ${e}: ${(err as Error).message}`);
      }
    }
    if (o !== packed.length) throw new Error(`recordDispatchMany: ${packed.length - o} trailing words`);
  }
  submitBatch(): number {
    this.batchOpen = false;
    return ++this.timeline;
  }
  waitTimeline(): void {}
  getCompleted(): number {
    return this.timeline;
  }
  compileKernel(desc: string | object): number {
    const text = typeof desc === "string" ? desc : JSON.stringify(desc);
    const hit = this.byText.get(text);
    if (hit) return hit;
    const h = this.next++;
    this.pipelines.set(h, compile(JSON.parse(text) as KernelDesc));
    this.byText.set(text, h);
    return h;
  }
}
