// HeliosTensor: a TensorData whose `data` is a lazy getter. It lives in a leased device
// buffer (or, while pending, as a fused expression over other tensors' buffers) and reads
// back only when `data` is touched, waiting only for the batch that last wrote its buffer.
import type { Dtype, Shape, TensorArray, TensorData } from "./types.js";
import type { Lease } from "./exec/lease.js";
import type { Expr } from "./fusion/expr.js";

/** What a tensor needs from the engine that owns it. */
export interface TensorHost {
  readTensor(t: HeliosTensor): TensorArray;
}

export class HeliosTensor implements TensorData {
  /** Own buffer; null while pending (expr set) or for empty tensors. */
  lease: Lease | null = null;
  /** Pending fused expression (holds references on its leaves' leases). */
  expr: Expr | null = null;
  /** Host copy and the lease's write count it reflects (a write through another view of the lease outdates it). */
  host: TensorArray | null = null;
  hostVersion = 0;
  released = false;

  constructor(
    readonly owner: TensorHost,
    readonly shape: Shape,
    readonly dtype: Dtype,
  ) {}

  /** The host copy if no write reached the buffer since it was taken, else null. */
  get currentHost(): TensorArray | null {
    return this.host && (!this.lease || this.hostVersion === this.lease.writes) ? this.host : null;
  }

  get data(): TensorArray {
    return this.owner.readTensor(this);
  }

  get size(): number {
    let n = 1;
    for (const d of this.shape) n *= d;
    return n;
  }
}

export function isHelios(t: TensorData): t is HeliosTensor {
  return t instanceof HeliosTensor;
}
