// Host side of flash attention forward/backward.
import type { TensorData } from "../types.js";
import { type Engine, run } from "../engine.js";
import type { HeliosTensor } from "../tensor.js";
import { fail, fmt } from "../shape.js";
import { flashReadsSplit, pickFlashFwd } from "../kernels/attention-variants.js";
import { presplitKernel, SPLIT_PUSH, splitJob } from "../kernels/matmul/presplit.js";
import { FA_PUSH, FA_ROWS, flashBwdDqVec4Kernel, flashBwdDkDvVec4Kernel, flashBwdDqKernel, flashBwdDkDvKernel, type FlashVariant } from "../kernels/attention.js";
import { attentionBackwardDense, attnRowDot, denseBackwardApplies } from "./attention-dense.js";
import { FLASH_BWD_CM_ROWS, flashBwdCmApplies, flashBwdDkDvCmKernel, flashBwdDqCmKernel } from "../kernels/attention-cm-bwd.js";

const MAX_HEAD_DIM = 256;

function cmBackwardApplies(E: Engine, dtype: string, T: number, D: number, softCap: number): boolean {
  const mode = E.config.attnBackward;
  const split = dtype === "f32";
  return (mode === "auto" || mode === "cm") && flashBwdCmApplies(E.device, { split }, dtype, T, D, softCap > 0);
}

/**
 * An f32 tensor split into bf16 high and low parts, [hi of every element | lo of every element]
 * (2n halves; bf16 bits in an f16-typed carrier, used only as a kernel operand): the operand form
 * of the split (x3) attention kernels.
 */
function splitHiLo(E: Engine, op: string, x: TensorData): HeliosTensor {
  const n = x.shape.reduce((a, b) => a * b, 1);
  const out = E.alloc([2 * n], "f16");
  // one segment: [hi | lo] over the whole tensor
  const job = splitJob(n, n, 1, 2);
  run(E, op, { attnSplit: job.vec4 }, () => presplitKernel(job.vec4, job.lo, job.blocks), SPLIT_PUSH, job.push, [x], [out], job.groups);
  return out;
}

/** Runs `body` on the split forms of `xs` (f32) or on `xs` themselves, then drops the splits. */
function withSplits<R>(E: Engine, op: string, split: boolean, xs: TensorData[], body: (ys: TensorData[]) => R): R {
  if (!split) return body(xs);
  const ys = xs.map((x) => splitHiLo(E, op, x));
  try {
    return body(ys);
  } finally {
    // deferred by the runtime until the dispatches that read them are done
    for (const y of ys) E.release(y);
  }
}

/**
 * Di = rowsum(dO * O), then the dQ and the dK/dV kernels (each recomputes P from lse). f32
 * tensors run the split form (bf16 hi/lo operands, f32 accuracy) on q, k, v, dO split first.
 */
function attentionBackwardCm(
  E: Engine, op: string, Q: TensorData, K: TensorData, V: TensorData, O: TensorData, dO: TensorData, lse: TensorData,
  BH: number, T: number, D: number, scale: number, softCap: number,
): { dQ: HeliosTensor; dK: HeliosTensor; dV: HeliosTensor } {
  const di = attnRowDot(E, op, dO, O, BH * T, D);
  const dQ = E.alloc(Q.shape, Q.dtype), dK = E.alloc(Q.shape, Q.dtype), dV = E.alloc(Q.shape, Q.dtype);
  const push = { T, scale, cap: softCap > 0 ? softCap : 1 };
  const groups: [number, number, number] = [T / FLASH_BWD_CM_ROWS, BH, 1];
  const split = Q.dtype === "f32";
  const v = { D, split, softCap: softCap > 0 } as const;
  withSplits(E, op, split, [Q, K, V, dO], ([q, k, vv, dout]) => {
    run(E, op, { flashBwdDqCm: v }, () => flashBwdDqCmKernel(v), FA_PUSH, push, [q, k, vv, dout, lse, di], [dQ], groups);
    run(E, op, { flashBwdDkDvCm: v }, () => flashBwdDkDvCmKernel(v), FA_PUSH, push, [q, k, vv, dout, lse, di], [dK, dV], groups);
  });
  E.release(di);
  return { dQ, dK, dV };
}

function check(op: string, T: number, ...ts: TensorData[]): { BH: number; D: number } {
  const [q] = ts;
  if (q.shape.length !== 3) fail(op, `Q must be [B*H, T, D], got ${fmt(q.shape)}`);
  const [BH, t, D] = q.shape;
  if (t !== T) fail(op, `T=${T} does not match Q ${fmt(q.shape)}`);
  for (const x of ts) {
    if (x.shape.join() !== q.shape.join()) fail(op, `shapes differ: ${fmt(q.shape)} vs ${fmt(x.shape)}`);
    if (x.dtype !== q.dtype) fail(op, `dtypes differ: ${q.dtype} vs ${x.dtype}`);
  }
  if (q.dtype === "i32") fail(op, "expects floating-point tensors");
  if (D > MAX_HEAD_DIM) fail(op, `head dim ${D} above ${MAX_HEAD_DIM} is not supported`);
  if (BH > 65535) fail(op, `B*H=${BH} exceeds 65535`);
  return { BH, D };
}

/** The last flash forward an engine recorded: which kernel served it, for which problem. */
export interface FlashDispatch {
  kernel: string;
  dtype: string;
  BH: number;
  T: number;
  D: number;
  softCap: number;
}

const lastForward = new WeakMap<Engine, FlashDispatch>();

export function lastFlashForward(E: Engine): FlashDispatch | null {
  return lastForward.get(E) ?? null;
}

export function flashAttention(E: Engine, Q: TensorData, K: TensorData, V: TensorData, T: number, scale: number, softCap: number) {
  const op = "flashAttention";
  const { BH, D } = check(op, T, Q, K, V);
  const output = E.alloc(Q.shape, Q.dtype);
  const lse = E.alloc([BH, T], "f32");
  if (BH === 0 || T === 0 || D === 0) return { output, lse };
  // tensor-core kernels when the device has cooperative matrices (ts/kernels/attention-variants.ts):
  // f16 directly, f32 on q, k, v split into bf16 hi/lo
  const choice = pickFlashFwd(E.config.flashVariant, E.device, Q.dtype, T, D);
  const dtype = Q.dtype;
  lastForward.set(E, { kernel: choice.name, dtype, BH, T, D, softCap });
  withSplits(E, op, flashReadsSplit(choice.name), [Q, K, V], (ins) => {
    run(E, op, { flashFwd: choice.name, dtype, D, softCap: softCap > 0 }, () => choice.build(dtype, D, softCap > 0), FA_PUSH,
      { T, scale, cap: softCap > 0 ? softCap : 1 }, ins, [output, lse], [Math.ceil(T / choice.rows), BH, 1]);
  });
  return { output, lse };
}

export function flashAttentionBackward(
  E: Engine, Q: TensorData, K: TensorData, V: TensorData, O: TensorData, dO: TensorData, lse: TensorData,
  T: number, scale: number, softCap: number,
): { dQ: HeliosTensor; dK: HeliosTensor; dV: HeliosTensor } {
  const op = "flashAttentionBackward";
  const { BH, D } = check(op, T, Q, K, V, O, dO);
  if (lse.shape.join() !== [BH, T].join()) fail(op, `lse ${fmt(lse.shape)} must be [${BH}, ${T}]`);
  if (BH > 0 && T > 0 && D > 0 && cmBackwardApplies(E, Q.dtype, T, D, softCap)) {
    return attentionBackwardCm(E, op, Q, K, V, O, dO, lse, BH, T, D, scale, softCap);
  }
  if (BH > 0 && T > 0 && D > 0 && denseBackwardApplies(E, Q.dtype, BH, T, softCap)) {
    return attentionBackwardDense(E, op, Q, K, V, O, dO, lse, BH, T, D, scale);
  }
  const dQ = E.alloc(Q.shape, Q.dtype), dK = E.alloc(Q.shape, Q.dtype), dV = E.alloc(Q.shape, Q.dtype);
  if (BH === 0 || T === 0 || D === 0) return { dQ, dK, dV };
  const v: FlashVariant = { dtype: Q.dtype, D, softCap: softCap > 0 };
  const push = { T, scale, cap: softCap > 0 ? softCap : 1 };
  const dpre = E.alloc([BH, T], "f32");
  const groups: [number, number, number] = [Math.ceil(T / FA_ROWS), BH, 1];
  const vec4 = D % 4 === 0;
  run(E, op, { flashDq: v, vec4 }, () => (vec4 ? flashBwdDqVec4Kernel(v) : flashBwdDqKernel(v)), FA_PUSH, push,
    [Q, K, V, O, dO, lse], [dQ, dpre], groups);
  run(E, op, { flashDkDv: v, vec4 }, () => (vec4 ? flashBwdDkDvVec4Kernel(v) : flashBwdDkDvKernel(v)), FA_PUSH, push,
    [Q, K, V, dO, lse, dpre], [dK, dV], groups);
  E.release(dpre);
  return { dQ, dK, dV };
}
