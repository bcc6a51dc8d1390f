// Test-only transport: collectives through host memory and the rendezvous (every rank sends its
// bytes, every rank reduces all of them in rank order, so all ranks get bit-identical results).
// It lets the reducer, the ordering, the launcher and a 2-process training run be tested on
// lavapipe without a GPU; production runs NCCL (ts/distributed/nccl.ts). Registered by the tests
// alone: `import "./host-transport.js"` registers it as "host".
import type { TensorData } from "../../ts/types.js";
import { registerTransport, type ReduceOp, type Transport, type TransportContext } from "../../ts/distributed/transport.js";
import { DistError } from "../../ts/distributed/errors.js";

export class HostTransport implements Transport {
  readonly name = "host";
  private seq = 0;
  /** Collectives run, in order (tests compare the order across ranks). */
  readonly log: string[] = [];

  constructor(private readonly ctx: TransportContext) {}

  allReduce(tensors: TensorData[], op: ReduceOp): void {
    for (const t of tensors) {
      const key = `allReduce #${++this.seq}`;
      this.log.push(`${key} ${t.shape.join("x")}`);
      const parts = this.ctx.agent.gather("allReduce", key, bytesOf("allReduce", t));
      const vals = parts.map((p) => new Float32Array(p.buffer, p.byteOffset, p.byteLength / 4));
      const out = new Float32Array(vals[0].length);
      for (let i = 0; i < out.length; i++) {
        let acc = vals[0][i];
        for (let r = 1; r < vals.length; r++) {
          const v = vals[r][i];
          acc = op === "max" ? Math.max(acc, v) : op === "min" ? Math.min(acc, v) : acc + v;
        }
        out[i] = op === "avg" ? acc / vals.length : acc;
      }
      this.write(t, out);
    }
  }

  broadcast(tensors: TensorData[], root: number): void {
    for (const t of tensors) {
      const key = `broadcast #${++this.seq}`;
      this.log.push(`${key} ${t.shape.join("x")}`);
      const mine = this.ctx.env.rank === root ? bytesOf("broadcast", t) : new Uint8Array(0);
      const p = this.ctx.agent.gather("broadcast", key, mine)[root];
      if (this.ctx.env.rank !== root) this.write(t, new Float32Array(p.buffer, p.byteOffset, p.byteLength / 4));
    }
  }

  private write(t: TensorData, v: Float32Array): void {
    const w = this.ctx.backend.writeTensor;
    if (!w) throw new DistError("ERR_HELIOS_DIST_UNAVAILABLE", "host transport", `backend ${this.ctx.backend.name} has no writeTensor`);
    w.call(this.ctx.backend, t, v);
  }

  synchronize(): void {}
  abort(): void {}
  close(): void {}
}

function bytesOf(call: string, t: TensorData): Uint8Array {
  if (t.dtype !== "f32") throw new DistError("ERR_HELIOS_DIST_ARGUMENT", call, `the host transport takes f32 tensors, not ${t.dtype}`);
  const d = t.data as Float32Array;
  const f = d instanceof Float32Array ? d : Float32Array.from(d as ArrayLike<number>);
  return new Uint8Array(f.buffer, f.byteOffset, f.byteLength).slice();
}

registerTransport("host", (ctx) => new HostTransport(ctx));
