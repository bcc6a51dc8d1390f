// Device buffers with random data for one matmul problem, plus the CPU fp64 checks against them.
// Large operands repeat a random block (of a length coprime to typical sizes) so that filling an
// 8192² tensor costs milliseconds; the reference reads the same block, so checks stay exact.
import type { MatmulRuntime } from "./device.js";
import type { MatmulPlan } from "./plan.js";
import { bytesOf, type MatmulDtype, type NormalizedProblem } from "./problem.js";
import { decode, randomTensor, refEpilogue, relFrobenius, rng } from "./reference.js";
import type { PlanBuffers } from "./run.js";
import type { ScratchRole } from "./common.js";

const BLOCK = (1 << 20) + 7;

interface Operand {
  values: Float64Array;
  handle: number;
  len: number;
}

function makeOperand(rt: MatmulRuntime, len: number, dtype: MatmulDtype, seed: number): Operand {
  const blockLen = Math.min(len, BLOCK);
  const t = randomTensor(blockLen, dtype, seed);
  const bytes = len * bytesOf(dtype);
  const handle = rt.createBuffer(Math.max(4, Math.ceil(bytes / 4) * 4));
  if (blockLen === len) {
    rt.uploadBuffer(handle, t.bits);
  } else {
    const full = dtype === "f32" ? new Float32Array(len) : new Uint16Array(len);
    for (let off = 0; off < len; off += blockLen) {
      full.set(t.bits.subarray(0, Math.min(blockLen, len - off)), off);
    }
    rt.uploadBuffer(handle, full);
  }
  return { values: t.values, handle, len };
}

function at(o: Operand, i: number): number {
  return o.values[i % o.values.length];
}

export class MatmulFixture {
  readonly a: Operand;
  readonly b: Operand;
  readonly c: number;
  readonly bias?: Operand;
  readonly residual?: Operand;
  readonly preact?: Operand;
  /** Scratch buffers (split-K partials, presplit operands), grown to the largest plan's need. */
  private readonly scratch = new Map<ScratchRole, { handle: number; bytes: number }>();
  private readonly cBytes: number;

  constructor(private readonly rt: MatmulRuntime, readonly p: NormalizedProblem, seed = 1) {
    const { m, n, k, batch } = p;
    this.a = makeOperand(rt, batch * m * k, p.dtype, seed);
    this.b = makeOperand(rt, (p.broadcastB ? 1 : batch) * k * n, p.dtype, seed + 1);
    this.cBytes = Math.max(4, Math.ceil((batch * m * n * bytesOf(p.outDtype)) / 4) * 4);
    this.c = rt.createBuffer(this.cBytes);
    if (p.epilogue.bias) this.bias = makeOperand(rt, n, p.epilogue.biasDtype, seed + 2);
    if (p.epilogue.residual) this.residual = makeOperand(rt, batch * m * n, p.outDtype, seed + 3);
    if (p.epilogue.geluGrad) this.preact = makeOperand(rt, batch * m * n, p.outDtype, seed + 4);
  }

  buffers(plan: MatmulPlan): PlanBuffers {
    const out: PlanBuffers = {
      A: this.a.handle,
      B: this.b.handle,
      C: this.c,
      bias: this.bias?.handle,
      residual: this.residual?.handle,
      preact: this.preact?.handle,
    };
    for (const [role, bytes] of Object.entries(plan.scratch) as [ScratchRole, number][]) {
      let s = this.scratch.get(role);
      if (!s || s.bytes < bytes) {
        if (s) this.rt.destroyBuffer(s.handle);
        s = { handle: this.rt.createBuffer(bytes), bytes };
        this.scratch.set(role, s);
      }
      out[role] = s.handle;
    }
    return out;
  }

  /** fp64 C[bt, i, j] with the epilogue, from the same data the GPU saw. */
  reference(bt: number, i: number, j: number): number {
    const { m, n, k } = this.p;
    const aOff = bt * m * k;
    const bOff = this.p.broadcastB ? 0 : bt * k * n;
    let s = 0;
    for (let t = 0; t < k; t++) {
      const av = this.p.transA ? at(this.a, aOff + t * m + i) : at(this.a, aOff + i * k + t);
      const bv = this.p.transB ? at(this.b, bOff + j * k + t) : at(this.b, bOff + t * n + j);
      s += av * bv;
    }
    const el = bt * m * n + i * n + j;
    return refEpilogue(this.p.epilogue, s, {
      bias: this.bias && at(this.bias, j),
      residual: this.residual && at(this.residual, el),
      preact: this.preact && at(this.preact, el),
    });
  }

  readC(): Float64Array {
    const { m, n, batch } = this.p;
    return decode(this.rt.readBuffer(this.c, 0, this.cBytes), this.p.outDtype, batch * m * n);
  }

  /** Relative Frobenius error over every element (cost batch·M·N·K on the CPU). */
  fullError(): number {
    const { m, n, batch } = this.p;
    const got = this.readC();
    const want = new Float64Array(batch * m * n);
    for (let bt = 0; bt < batch; bt++)
      for (let i = 0; i < m; i++)
        for (let j = 0; j < n; j++) want[bt * m * n + i * n + j] = this.reference(bt, i, j);
    return relFrobenius(got, want);
  }

  /** One element of C, read on its own (a 4-byte aligned read around it). */
  readElement(i: number): number {
    const bytes = bytesOf(this.p.outDtype);
    const off = i * bytes;
    const aligned = off - (off % 4);
    const buf = this.rt.readBuffer(this.c, aligned, 4);
    const v = decode(buf, this.p.outDtype, 4 / bytes);
    return v[(off - aligned) / bytes];
  }

  /** Relative Frobenius error over `samples` random elements (always incl. the last corner). */
  spotError(samples = 64, seed = 7): number {
    const { m, n, batch } = this.p;
    // Small outputs are read at once; large ones element by element (a 8192² f32 C is 256 MB).
    const whole = batch * m * n <= 1 << 20 ? this.readC() : undefined;
    const got = { at: (i: number) => (whole ? whole[i] : this.readElement(i)) };
    const r = rng(seed);
    const g: number[] = [];
    const w: number[] = [];
    for (let s = 0; s < samples; s++) {
      const last = s === samples - 1;
      const bt = last ? batch - 1 : Math.floor(r() * batch);
      const i = last ? m - 1 : Math.floor(r() * m);
      const j = last ? n - 1 : Math.floor(r() * n);
      g.push(got.at(bt * m * n + i * n + j));
      w.push(this.reference(bt, i, j));
    }
    return relFrobenius(g, w);
  }

  /** Poisons C so a kernel that skips elements cannot pass on stale results. */
  poisonC(): void {
    this.rt.uploadBuffer(this.c, new Uint8Array(this.cBytes).fill(0x7f));
  }

  destroy(): void {
    for (const h of [this.a.handle, this.b.handle, this.c, this.bias?.handle, this.residual?.handle, this.preact?.handle, ...[...this.scratch.values()].map((s) => s.handle)]) {
      if (h !== undefined) this.rt.destroyBuffer(h);
    }
  }
}
