// Host side of flash attention forward/backward, in either tensor layout (AttentionLayout).
import type { TensorData } from "../types.js";
import { type Engine, run } from "../engine.js";
import type { HeliosTensor } from "../tensor.js";
import { fail, fmt } from "../shape.js";
import { flashReadsSplit, pickFlashFwd } from "../kernels/attention-variants.js";
import { presplitKernel, SPLIT_PUSH, splitJob } from "../kernels/matmul/presplit.js";
import { splitLayoutKey, takeAhead } from "./split-ahead.js";
import {
  FA_ROWS, faPush, flashBwdDqVec4Kernel, flashBwdDkDvVec4Kernel, flashBwdDqKernel, flashBwdDkDvKernel, type FlashVariant, type HeadLayout,
} from "../kernels/attention.js";
import { attentionBackwardDense, attnRowDot, denseBackwardApplies } from "./attention-dense.js";
import { FLASH_BWD_CM_ROWS, flashBwdDqCmApplies, flashBwdDqCmKernel } from "../kernels/attention-cm-bwd.js";
import { flashBwdDkDvCmKernel, flashBwdDkDvRows, pickFlashBwdDkDv, type FlashBwdDkDvForm } from "../kernels/attention-cm-bwd-kv.js";
import { copyStrided } from "./layout.js";

const MAX_HEAD_DIM = 256;

/**
 * How flashAttention's tensors are laid out. Without one, Q, K, V, O, dO, dQ, dK and dV are
 * [B*H, T, D]. With `heads` = H they are rows of B*T as a projection writes them, [B*T, H*D] each
 * (head h in columns h*D .. h*D + D: no head transposes around the op); with `packed` too, Q, K
 * and V are one [B*T, 3*H*D] tensor (a fused projection's q | k | v column blocks) passed as each
 * of the three, and backward returns their gradient as one tensor of that layout, as dQ, dK and dV
 * alike. lse is [B*H, T] either way (head b*H + h).
 */
export interface AttentionLayout {
  readonly heads: number;
  readonly packed?: boolean;
}

/** One call's problem: B*H heads of T rows of D, and where the kernels find them. */
interface Geometry {
  BH: number;
  D: number;
  layout: HeadLayout;
  /** rows: the push fields beyond FA_PUSH (HeadLayout), and the [B*T, ·] shapes of O and of the q/k/v gradients. */
  push: { H: number; ld: number; kv: number } | null;
  oShape: number[];
  gradShape: number[];
  packed: boolean;
}

/**
 * The dK/dV kernel form of the tensor-core backward (attention-cm-bwd-kv.ts), or null where that
 * backward does not serve the problem (HELIOS_ATTN_BWD, or the dQ or dK/dV kernel's requirements).
 */
function cmBackward(E: Engine, dtype: string, T: number, D: number): FlashBwdDkDvForm | null {
  const mode = E.config.attnBackward;
  if ((mode !== "auto" && mode !== "cm") || !flashBwdDqCmApplies(E.device, dtype, T, D)) return null;
  return pickFlashBwdDkDv(E.device, dtype, T, D);
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

/**
 * Runs `body` on the split forms of `xs` (f32) or on `xs` themselves, then drops the splits. A
 * tensor passed more than once (packed Q, K, V) is split once.
 */
function withSplits<R>(E: Engine, op: string, split: boolean, xs: TensorData[], body: (ys: TensorData[]) => R): R {
  if (!split) return body(xs);
  const uniq = [...new Set(xs)];
  // a split made ahead (HeliosBackend.splitOperand, layout "whole") is read as it is
  const ahead = uniq.map((x) => takeAhead(E, x, splitLayoutKey(x.shape, "whole")));
  const ys = uniq.map((x, i) => ahead[i]?.split ?? splitHiLo(E, op, x));
  try {
    return body(xs.map((x) => ys[uniq.indexOf(x)]));
  } finally {
    // deferred by the runtime until the dispatches that read them are done
    ys.forEach((y, i) => {
      const a = ahead[i];
      if (a) a.done();
      else E.release(y);
    });
  }
}

/**
 * Di = rowsum(dO * O), then the dQ and the dK/dV kernels (each recomputes P from lse; `form`: the
 * dK/dV kernel cmBackward picked). f32 tensors run the split form (bf16 hi/lo operands, f32
 * accuracy) on q, k, v, dO split first.
 */
function attentionBackwardCm(
  E: Engine, op: string, Q: TensorData, K: TensorData, V: TensorData, O: TensorData, dO: TensorData, lse: TensorData,
  g: Geometry, T: number, scale: number, softCap: number, form: FlashBwdDkDvForm,
): { dQ: HeliosTensor; dK: HeliosTensor; dV: HeliosTensor } {
  const { BH, D } = g;
  // rows: O and dO are B*T*H rows of D, so di comes out [B*T, H] (the rows kernels read it so)
  const di = attnRowDot(E, op, dO, O, BH * T, D);
  const { dQ, dK, dV } = gradOutputs(E, g, Q.dtype);
  const push = pushOf(g, T, scale, softCap);
  const split = Q.dtype === "f32";
  const v = { D, split, softCap: softCap > 0, ...layoutKey(g) } as const;
  const kv = { D, form, softCap: softCap > 0, ...layoutKey(g) } as const;
  const pc = faPush(g.layout);
  withSplits(E, op, split, [Q, K, V, dO], ([q, k, vv, dout]) => {
    run(E, op, { flashBwdDqCm: v }, () => flashBwdDqCmKernel(v), pc, push, [q, k, vv, dout, lse, di], [dQ], [T / FLASH_BWD_CM_ROWS, BH, 1]);
    run(E, op, { flashBwdDkDvCm: kv }, () => flashBwdDkDvCmKernel(kv), pc, push, [q, k, vv, dout, lse, di], [dK, dV], [T / flashBwdDkDvRows(form), BH, 1]);
  });
  E.release(di);
  return { dQ, dK, dV };
}

/**
 * Part `p` (0 = q, 1 = k, 2 = v of a packed tensor; 0 otherwise) of a rows-layout tensor as
 * [B*H, T, D]: the head transposes of the paths without rows kernels (the dense backward).
 */
function rowsToHeads(E: Engine, op: string, g: Geometry, T: number, x: TensorData, p: number): HeliosTensor {
  const { BH, D } = g, H = g.push!.H, W = x.shape[1];
  const out = E.alloc([BH, T, D], x.dtype);
  copyStrided(E, op, x, out, [BH / H, H, T, D], [T * W, D, W, 1], [H * T * D, T * D, D, 1], p * H * D, 0);
  return out;
}

/** rowsToHeads's inverse: [B*H, T, D] `x` into part `p` of rows-layout `into`. */
function headsToRows(E: Engine, op: string, g: Geometry, T: number, x: TensorData, into: HeliosTensor, p: number): void {
  const { BH, D } = g, H = g.push!.H, W = into.shape[1];
  copyStrided(E, op, x, into, [BH / H, H, T, D], [H * T * D, T * D, D, 1], [T * W, D, W, 1], 0, p * H * D);
}

/** Backward through the [B*H, T, D] paths on copies (a rows layout where no rows kernel serves). */
function viaHeads(
  E: Engine, g: Geometry, T: number, Q: TensorData, K: TensorData, V: TensorData, O: TensorData, dO: TensorData,
  body: (q: TensorData, k: TensorData, v: TensorData, o: TensorData, dO: TensorData) => { dQ: HeliosTensor; dK: HeliosTensor; dV: HeliosTensor },
): { dQ: HeliosTensor; dK: HeliosTensor; dV: HeliosTensor } {
  const op = "flashAttentionBackward";
  const ins = [Q, K, V, O, dO].map((x, i) => rowsToHeads(E, op, g, T, x, g.packed && i < 3 ? i : 0));
  const r = body(ins[0], ins[1], ins[2], ins[3], ins[4]);
  for (const x of ins) E.release(x);
  const out = gradOutputs(E, g, Q.dtype);
  [r.dQ, r.dK, r.dV].forEach((x, i) => {
    headsToRows(E, op, g, T, x, [out.dQ, out.dK, out.dV][i], g.packed ? i : 0);
    E.release(x);
  });
  return out;
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
  return limits(op, q.dtype, BH, D);
}

function limits(op: string, dtype: string, BH: number, D: number): { BH: number; D: number } {
  if (dtype === "i32") fail(op, "expects floating-point tensors");
  if (D > MAX_HEAD_DIM) fail(op, `head dim ${D} above ${MAX_HEAD_DIM} is not supported`);
  if (BH > 65535) fail(op, `B*H=${BH} exceeds 65535`);
  return { BH, D };
}

/** The problem of Q, K, V (and O, dO: `outs`) in `layout` (AttentionLayout), checked. */
function geometry(op: string, T: number, layout: AttentionLayout | undefined, qkv: TensorData[], outs: TensorData[] = []): Geometry {
  if (layout === undefined) {
    const { BH, D } = check(op, T, ...qkv, ...outs);
    return { BH, D, layout: "bhtd", push: null, oShape: [...qkv[0].shape], gradShape: [...qkv[0].shape], packed: false };
  }
  const H = layout.heads, packed = !!layout.packed;
  if (!Number.isInteger(H) || H < 1) fail(op, `layout.heads = ${H}: expected a positive integer`);
  const [q] = qkv;
  if (packed && qkv.some((x) => x !== q)) fail(op, "a packed layout takes the one [B*T, 3*H*D] tensor as Q, K and V");
  const what = packed ? "3*H*D" : "H*D";
  if (q.shape.length !== 2) fail(op, `Q must be [B*T, ${what}] in a layout with heads, got ${fmt(q.shape)}`);
  const [N, W] = q.shape;
  if (W % ((packed ? 3 : 1) * H) !== 0) fail(op, `Q ${fmt(q.shape)}: ${W} columns are not ${what} for H=${H}`);
  if (T === 0 ? N !== 0 : N % T !== 0) fail(op, `T=${T} does not divide the ${N} rows of Q ${fmt(q.shape)}`);
  const D = W / ((packed ? 3 : 1) * H);
  const C = H * D;
  for (const x of qkv) {
    if (x.shape.join() !== q.shape.join()) fail(op, `shapes differ: ${fmt(q.shape)} vs ${fmt(x.shape)}`);
    if (x.dtype !== q.dtype) fail(op, `dtypes differ: ${q.dtype} vs ${x.dtype}`);
  }
  for (const x of outs) {
    if (x.shape.join() !== [N, C].join()) fail(op, `O and dO must be [B*T, H*D] = ${fmt([N, C])}, got ${fmt(x.shape)}`);
    if (x.dtype !== q.dtype) fail(op, `dtypes differ: ${q.dtype} vs ${x.dtype}`);
  }
  const { BH } = limits(op, q.dtype, T === 0 ? 0 : (N / T) * H, D);
  return { BH, D, layout: "rows", push: { H, ld: W, kv: packed ? C : 0 }, oShape: [N, C], gradShape: [N, W], packed };
}

/** The kernel-cache key fields of a layout (none for bhtd, so those keys are unchanged). */
function layoutKey(g: Geometry): { layout?: HeadLayout } {
  return g.layout === "rows" ? { layout: "rows" } : {};
}

/** The push constants of a call: FA_PUSH's, plus H, ld, kv in the rows layout. */
function pushOf(g: Geometry, T: number, scale: number, softCap: number): Record<string, number> {
  return { T, scale, cap: softCap > 0 ? softCap : 1, ...(g.push ?? {}) };
}

/** dQ, dK, dV: one packed tensor thrice, three [B*T, H*D] tensors, or three [B*H, T, D] ones. */
function gradOutputs(E: Engine, g: Geometry, dtype: TensorData["dtype"]): { dQ: HeliosTensor; dK: HeliosTensor; dV: HeliosTensor } {
  if (g.packed) {
    const d = E.alloc(g.gradShape, dtype);
    return { dQ: d, dK: d, dV: d };
  }
  return { dQ: E.alloc(g.gradShape, dtype), dK: E.alloc(g.gradShape, dtype), dV: E.alloc(g.gradShape, dtype) };
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

export function flashAttention(
  E: Engine, Q: TensorData, K: TensorData, V: TensorData, T: number, scale: number, softCap: number, layout?: AttentionLayout,
) {
  const op = "flashAttention";
  const g = geometry(op, T, layout, [Q, K, V]);
  const { BH, D } = g;
  const output = E.alloc(g.oShape, Q.dtype);
  const lse = E.alloc([BH, T], "f32");
  if (BH === 0 || T === 0 || D === 0) return { output, lse };
  // tensor-core kernels when the device has cooperative matrices (ts/kernels/attention-variants.ts):
  // f16 directly, f32 on q, k, v split into bf16 hi/lo
  const choice = pickFlashFwd(E.config.flashVariant, E.device, Q.dtype, T, D);
  const dtype = Q.dtype;
  lastForward.set(E, { kernel: choice.name, dtype, BH, T, D, softCap });
  withSplits(E, op, flashReadsSplit(choice.name), [Q, K, V], (ins) => {
    run(E, op, { flashFwd: choice.name, dtype, D, softCap: softCap > 0, ...layoutKey(g) }, () => choice.build(dtype, D, softCap > 0, g.layout),
      faPush(g.layout), pushOf(g, T, scale, softCap), ins, [output, lse], [Math.ceil(T / choice.rows), BH, 1]);
  });
  return { output, lse };
}

export function flashAttentionBackward(
  E: Engine, Q: TensorData, K: TensorData, V: TensorData, O: TensorData, dO: TensorData, lse: TensorData,
  T: number, scale: number, softCap: number, layout?: AttentionLayout,
): { dQ: HeliosTensor; dK: HeliosTensor; dV: HeliosTensor } {
  const op = "flashAttentionBackward";
  const g = geometry(op, T, layout, [Q, K, V], [O, dO]);
  const { BH, D } = g;
  if (lse.shape.join() !== [BH, T].join()) fail(op, `lse ${fmt(lse.shape)} must be [${BH}, ${T}]`);
  const form = BH > 0 && T > 0 && D > 0 ? cmBackward(E, Q.dtype, T, D) : null;
  if (form) return attentionBackwardCm(E, op, Q, K, V, O, dO, lse, g, T, scale, softCap, form);
  if (BH > 0 && T > 0 && D > 0 && denseBackwardApplies(E, Q.dtype, BH, T, softCap)) {
    if (g.layout === "rows") {
      return viaHeads(E, g, T, Q, K, V, O, dO, (q, k, v, o, d) => attentionBackwardDense(E, op, q, k, v, o, d, lse, BH, T, D, scale));
    }
    return attentionBackwardDense(E, op, Q, K, V, O, dO, lse, BH, T, D, scale);
  }
  const { dQ, dK, dV } = gradOutputs(E, g, Q.dtype);
  if (BH === 0 || T === 0 || D === 0) return { dQ, dK, dV };
  const v: FlashVariant = { dtype: Q.dtype, D, softCap: softCap > 0, ...layoutKey(g) };
  const push = pushOf(g, T, scale, softCap);
  const pc = faPush(g.layout);
  const dpre = E.alloc([BH, T], "f32");
  const groups: [number, number, number] = [Math.ceil(T / FA_ROWS), BH, 1];
  const vec4 = D % 4 === 0;
  run(E, op, { flashDq: v, vec4 }, () => (vec4 ? flashBwdDqVec4Kernel(v) : flashBwdDqKernel(v)), pc, push,
    [Q, K, V, O, dO, lse], [dQ, dpre], groups);
  run(E, op, { flashDkDv: v, vec4 }, () => (vec4 ? flashBwdDkDvVec4Kernel(v) : flashBwdDkDvKernel(v)), pc, push,
    [Q, K, V, dO, lse, dpre], [dK, dV], groups);
  E.release(dpre);
  return { dQ, dK, dV };
}
