// The production transport: NCCL through the addon (src/dist). Collectives run on a CUDA stream
// over buffers shared between Vulkan and CUDA, ordered on timelines without host waits: the
// stream waits for the compute timeline value after which the inputs are written (the backend
// submits what it recorded, `submitted()`), and Vulkan work using a buffer afterwards waits for
// the collective (the runtime adds the wait). Gradient buckets are shared buffers from the start
// (`allocBucket`); other tensors go through a shared staging buffer (one copy each way).
import type { Dtype, TensorData } from "../types.js";
import { loadAddon } from "../native-load.js";
import { openDevice } from "../device.js";
import { DistError } from "./errors.js";
import type { DistEnv } from "./env.js";
import { registerTransport, type CollectiveBackend, type ReduceOp, type Transport, type TransportContext } from "./transport.js";

/** The addon's distributed calls (tests pass a stand-in for the CUDA side). */
export type NcclNative = Pick<
  ReturnType<typeof loadAddon>,
  "distUniqueId" | "distInit" | "distSharedBuffer" | "distAllReduce" | "distBroadcast" | "distSynchronize" | "distAbort" | "distDestroy" | "destroyBuffer"
>;

/** What NCCL needs from the backend beyond CollectiveBackend (HeliosBackend has it). */
interface SharingBackend extends CollectiveBackend {
  submitted(): number;
  adoptBuffer(handle: number, bytes: number, shape: number[], dtype: Dtype, free: (handle: number) => void): TensorData;
  copyInto(dst: TensorData, offset: number, src: TensorData): void;
  slice(a: TensorData, starts: number[], ends: number[]): TensorData;
  reshape(a: TensorData, shape: number[]): TensorData;
}

const BYTES: Partial<Record<Dtype, number>> = { f32: 4, f16: 2, i32: 4 };

function sharing(call: string, b: CollectiveBackend): SharingBackend {
  const r = b as unknown as Record<string, unknown>;
  const missing = ["submitted", "adoptBuffer", "copyInto", "slice", "reshape"].filter((k) => typeof r[k] !== "function");
  if (missing.length) throw new DistError("ERR_HELIOS_DIST_UNAVAILABLE", call, `backend ${b.name} cannot share tensors with NCCL (it lacks ${missing.join(", ")}; use HeliosBackend)`);
  return b as SharingBackend;
}

/** Opens this rank's GPU for Vulkan as the device CUDA calls LOCAL_RANK, able to share with CUDA. */
function prepare(env: DistEnv): void {
  const n = loadAddon();
  const uuid = n.distDeviceUuid(env.localRank);
  const info = openDevice(n, { device: `uuid:${uuid}`, shareable: true });
  if (info.deviceUuid !== uuid) {
    throw new DistError("ERR_HELIOS_DIST_STATE", "initDistributed", `the device is already open on ${info.deviceName} (${info.deviceUuid}), not CUDA device ${env.localRank} (${uuid}): call initDistributed() before creating the HeliosBackend`);
  }
  if (!info.shareableTimelines) {
    const why = info.shareable ? "VK_KHR_external_semaphore_fd with exportable timelines" : "VK_KHR_external_memory_fd";
    throw new DistError("ERR_HELIOS_DIST_UNAVAILABLE", "initDistributed", `${info.deviceName} cannot share with CUDA: the driver lacks ${why}, or the device was opened before initDistributed()`);
  }
}

export class NcclTransport implements Transport {
  readonly name = "nccl";
  private readonly B: SharingBackend;
  private readonly shared = new WeakMap<TensorData, number>();
  private staging: { t: TensorData; elements: number } | null = null;
  private done = false;

  constructor(ctx: TransportContext, private readonly n: NcclNative = loadAddon()) {
    this.B = sharing("initDistributed", ctx.backend);
    const { env } = ctx;
    const mine = env.rank === 0 ? this.n.distUniqueId() : new Uint8Array(0);
    const id = ctx.agent.gather("initDistributed", "nccl unique id", mine)[0];
    ctx.agent.armNativeAbort();
    this.n.distInit({ uniqueId: id, rank: env.rank, worldSize: env.worldSize, localRank: env.localRank, timeoutMs: ctx.timeoutMs });
  }

  allocBucket(elements: number): TensorData {
    const bytes = elements * 4;
    const h = this.n.distSharedBuffer(bytes);
    const t = this.B.adoptBuffer(h, bytes, [elements], "f32", (x) => {
      if (!this.done) this.n.distSynchronize();
      this.n.destroyBuffer(x);
    });
    this.shared.set(t, h);
    return t;
  }

  allReduce(tensors: TensorData[], op: ReduceOp): void {
    for (const t of tensors) this.run("allReduce", t, (h, count, dt) => this.n.distAllReduce(h, 0, count, dt, op));
  }

  broadcast(tensors: TensorData[], root: number): void {
    for (const t of tensors) this.run("broadcast", t, (h, count, dt) => this.n.distBroadcast(h, 0, count, dt, root));
  }

  /** Runs `enqueue` on `t` in place: directly on a shared tensor, else through the staging buffer. */
  private run(call: string, t: TensorData, enqueue: (h: number, count: number, dt: "f32" | "f16" | "i32") => void): void {
    const dt = t.dtype as "f32" | "f16" | "i32";
    if (!BYTES[t.dtype]) throw new DistError("ERR_HELIOS_DIST_ARGUMENT", call, `NCCL collectives take f32, f16 or i32 tensors, not ${t.dtype}`);
    const count = t.shape.reduce((a, b) => a * b, 1);
    const direct = this.shared.get(t);
    if (direct !== undefined) {
      this.B.submitted();
      enqueue(direct, count, dt);
      return;
    }
    if (dt !== "f32") throw new DistError("ERR_HELIOS_DIST_ARGUMENT", call, `a ${dt} tensor must come from allocBucket (staging is f32)`);
    const st = this.stage(count);
    this.B.copyInto(st, 0, t);
    this.B.submitted();
    enqueue(this.shared.get(st)!, count, dt);
    const back = this.B.slice(st, [0], [count]);
    this.B.copyInto(t, 0, back);
    this.B.releaseGpuTensor?.(back);
  }

  private stage(elements: number): TensorData {
    if (!this.staging || this.staging.elements < elements) {
      if (this.staging) this.B.releaseGpuTensor?.(this.staging.t);
      this.staging = { t: this.allocBucket(elements), elements };
    }
    return this.staging.t;
  }

  synchronize(): void {
    if (!this.done) this.n.distSynchronize();
  }

  abort(reason: string): void {
    this.n.distAbort(reason);
  }

  close(): void {
    if (this.staging) this.B.releaseGpuTensor?.(this.staging.t);
    this.staging = null;
    this.done = true;
    this.n.distDestroy();
  }
}

registerTransport("nccl", (ctx) => new NcclTransport(ctx), prepare);
