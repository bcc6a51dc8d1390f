// Dry run of one training step's buffer traffic at full scale, without a GPU: HeliosBackend on a
// runtime that records nothing and allocates nothing, but keeps the native pool's books (size
// buckets, in-batch reuse, peaks). It shows what GPT-2 124M would peak at on a device with the
// given capabilities (default: an H100's, so the matmul planner picks the same plans) before a
// GPU run, and where the bytes go. Data-dependent values (the loss) read back as zeros.
//   node dist/bench/train/memsim.js [--helios-modes=f32,matmul16] [--batch=16 --seq=1024 --layers=12 ...]
import { HeliosBackend } from "../../ts/backend.js";
import type { DeviceInfo, Groups, PoolStats, Runtime } from "../../ts/exec/runtime.js";
import { bucketSize } from "../../ts/exec/lease.js";
import { asTrainBackend } from "../../train/backend.js";
import { DEFAULT_OPTIM } from "../../train/config.js";
import { estimateLiveSet } from "../../train/memory.js";
import { parseTrainSuiteArgs, defaultSuiteOptions } from "./suite.js";
import { Trainer } from "../../train/trainer.js";

/** An H100's figures as the backend reads them (bench/RESULTS.md's device). */
export const H100_INFO: DeviceInfo = {
  deviceName: "memsim (NVIDIA H100 figures)", vendorId: 0x10de, deviceType: "discrete", f16Supported: true,
  bf16Supported: true, coopMatSupported: true, coopMat2Supported: false, subgroupSize: 32, maxSharedMemoryBytes: 49152,
  coopMatShapes: [{ m: 16, n: 16, k: 16, a: "f16", b: "f16", c: "f32", result: "f32", scope: "subgroup" }],
  maxBindingBytes: 2 ** 31 - 1,
};

/** The native pool's bucket rule (src/runtime/pool.rs): four steps per power of two. */
export { bucketSize };

/**
 * The pool's bookkeeping without memory. In-batch reuse is modelled as the native rule minus
 * what a dry run cannot see: any released buffer serves the next lease of its bucket, except one
 * the host wrote while the batch was open and the batch then read (it stays out until the batch
 * ends, as natively). `inBatchReuse` false models HELIOS_INBATCH_REUSE=0 inside one capture.
 */
export class DryRuntime implements Runtime {
  private next = 1;
  private readonly leased = new Map<number, number>();
  private readonly free = new Map<number, number[]>();
  /** Buffers (by id) held out of reuse until the open batch ends. */
  private readonly held = new Set<number>();
  /** Buffers a live capture uses. */
  private readonly pinned = new Set<number>();
  private readonly ids = new Map<number, number>();
  private nextId = 1;
  private open = false;
  private timeline = 0;
  private graphs = 0;
  stats: PoolStats = { leasedBytes: 0, freeBytes: 0, peakBytes: 0, peakLeasedBytes: 0, allocations: 0, reuses: 0, inBatchReuses: 0 };

  constructor(private readonly info: DeviceInfo = H100_INFO, private readonly inBatchReuse = true) {}

  initDevice(): DeviceInfo { return this.info; }
  getDeviceInfo(): DeviceInfo { return this.info; }
  destroy(): void {}

  leaseBuffer(byteLength: number): number {
    const b = bucketSize(byteLength);
    const list = this.free.get(b) ?? [];
    const at = list.findIndex((id) => !this.held.has(id) && !this.pinned.has(id));
    let id: number;
    if (at >= 0) {
      id = list.splice(at, 1)[0];
      this.stats.freeBytes -= b;
      this.stats.reuses++;
      if (this.open) this.stats.inBatchReuses = (this.stats.inBatchReuses ?? 0) + 1;
    } else {
      id = this.nextId++;
      this.stats.allocations++;
    }
    this.stats.leasedBytes += b;
    this.stats.peakLeasedBytes = Math.max(this.stats.peakLeasedBytes ?? 0, this.stats.leasedBytes);
    this.stats.peakBytes = Math.max(this.stats.peakBytes, this.stats.leasedBytes + this.stats.freeBytes);
    const h = this.next++;
    this.leased.set(h, b);
    this.ids.set(h, id);
    return h;
  }

  releaseBuffer(h: number): void {
    const b = this.leased.get(h);
    const id = this.ids.get(h);
    if (b === undefined || id === undefined) throw new Error(`memsim: release of unknown handle ${h}`);
    this.leased.delete(h);
    this.ids.delete(h);
    this.stats.leasedBytes -= b;
    this.stats.freeBytes += b;
    if (this.open && !this.inBatchReuse) this.held.add(id);
    const l = this.free.get(b) ?? [];
    l.push(id);
    this.free.set(b, l);
  }

  uploadBuffer(h: number): void {
    const id = this.ids.get(h);
    if (this.open && id !== undefined) this.held.add(id);
  }
  readBuffer(_h: number, _o = 0, n = 0): ArrayBuffer { return new ArrayBuffer(n); }
  fillBuffer(): void {}
  copyBuffer(): void {}
  poolStats(): PoolStats { return { ...this.stats }; }
  trimPool(): void {
    this.free.clear();
    this.stats.freeBytes = 0;
    this.stats.peakBytes = this.stats.leasedBytes;
    this.stats.peakLeasedBytes = this.stats.leasedBytes;
  }
  beginBatch(): void { this.open = true; }
  recordDispatch(_p: number, _b: number[], _g: Groups): void {}
  recordDispatchMany(): void {}
  private endBatch(): number {
    this.open = false;
    this.held.clear();
    return ++this.timeline;
  }
  submitBatch(): number { return this.endBatch(); }
  waitTimeline(): void {}
  getCompleted(): number { return this.timeline; }
  compileKernel(): number {
    this.compileCalls.push(1);
    return this.next++;
  }
  /** Kernels per native compile call (the engine defers and groups them: ts/exec/pipelines.ts). */
  readonly compileCalls: number[] = [];
  compileKernels(descs: string[]): number[] {
    this.compileCalls.push(descs.length);
    return descs.map(() => this.next++);
  }
  kernelSpirv(): Uint32Array { return new Uint32Array(0); }
  captureBatch(): number {
    // A capture pins what it used: nothing released inside it serves work outside it (the
    // step's temporaries are all it leaves in the pool).
    for (const l of this.free.values()) for (const id of l) this.pinned.add(id);
    this.endBatch();
    return ++this.graphs;
  }
  replayBatch(): number { return ++this.timeline; }
  destroyCapture(): void {}
}

function main(args: string[]): void {
  const input = parseTrainSuiteArgs(args.filter((a) => a !== "--no-inbatch-reuse"));
  const o = { ...defaultSuiteOptions(input.tiny ?? false), ...input };
  const mib = (b: number | undefined) => (b === undefined ? "?" : (b / 2 ** 20).toFixed(0).padStart(6) + " MiB");
  for (const mode of (o.heliosModes ?? "f32,matmul16").split(",")) {
    const rt = new DryRuntime(H100_INFO, !args.includes("--no-inbatch-reuse"));
    const B = asTrainBackend(new HeliosBackend({ runtime: rt }));
    const tr = new Trainer(B, o.model, { ...DEFAULT_OPTIM }, { seed: 1, matmul16: mode === "matmul16", capture: true });
    const n = o.batch * o.seq;
    const idx = new Int32Array(n), targets = new Int32Array(n);
    tr.step({ idx, targets, B: o.batch, T: o.seq });
    tr.step({ idx, targets, B: o.batch, T: o.seq });
    const s = rt.poolStats();
    const est = estimateLiveSet(o.model, o.batch, o.seq, mode === "matmul16", tr.model.headRows(n), tr.model.heads !== null, tr.model.f32Fused);
    console.log(`${mode.padEnd(9)} B=${o.batch} T=${o.seq} ${o.model.layers}L/${o.model.dim}: pool peak ${mib(s.peakBytes)}, ` +
      `live-set peak ${mib(s.peakLeasedBytes)}, estimate ${mib(est.peak)} (state ${mib(est.state)}, saved ${mib(est.saved)}, ` +
      `head ${mib(est.head)}, grads ${mib(est.grads)}), ${s.allocations} allocations, ${s.inBatchReuses} in-batch reuses, ` +
      `${rt.compileCalls.reduce((a, b) => a + b, 0)} kernels compiled in ${rt.compileCalls.length} calls`);
  }
}

if (process.argv[1] && /memsim\.js$/.test(process.argv[1])) main(process.argv.slice(2));
