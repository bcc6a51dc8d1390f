// Lab dQ kernels of the tensor-core flash attention backward (issue 27): candidates for
// flash_bwd_dq_cm (ts/kernels/attention-cm-bwd.ts, "current") that take the dK/dV race's lessons
// (bench/FLASH_NOTES.md), listed in DQ_CANDIDATES for bench/flash-dq-race.ts and the tests.
// Nothing under ts/ imports this module; the backend runs "current". Once a GPU race decides, the
// winner moves into ts/kernels and the rest are deleted, their evidence kept in FLASH_NOTES.
//
// Contract: the shipped dQ kernel's (bindings q, k, v, dO, lse, di (read), dq (write); push FA_PUSH,
// or FA_ROWS_PUSH in the rows layout), f16 only (no split form), D % 16 == 0 up to 64, 32-wide
// subgroups, T % rows == 0. Dispatch [T / rows, BH], 32 nsg threads, rows = 16 nsg queries per
// workgroup (the last query block first across all heads). Every candidate runs the shipped
// products in the shipped order (key tiles 0.. in turn, fragments in order, the same element-wise
// math), so its dQ is the shipped kernel's bit for bit.
//
// What changes (each candidate adds one change to an earlier one, so a race prices each):
// - sl: straight-line tiles. The key tiles holding the block's diagonal are its LAST rows / 64
//   (dQ streams keys up to the block's last query), so they run last, each fragment behind its
//   mask test and the P/dS-path branch; every earlier tile runs in a loop with no branch (the P/dS
//   path chosen once outside it, the next tile's loads clamped): attention-cm-parts streamStraight,
//   the dK/dV kernel's stream with the diagonal at the other end. Keeping the key order (rather
//   than running the diagonal first) is what keeps dQ's sums bit-identical.
// - sl-s2: + two K/V stages: the next tile stored into the other stage halfway through the math,
//   one barrier per tile instead of two.
// - sl-w8: sl with 8 subgroups: 128 queries per workgroup share each staged K/V tile (global loads,
//   shared stores and barriers per product halve, prefetch registers 32 -> 16 per thread); lse2 and
//   Di of the block as 2 x 128 floats read by column-major stride-0 loads (st shrinks to the lane
//   probe's 256 floats); T % 128 == 0.
// - sl-s2-w8: both (the dK/dV race's winning shape).
import { lit, type KernelDesc } from "../ts/ir/index.js";
import { layoutTag } from "../ts/kernels/attention.js";
import type { FlashDevice } from "../ts/kernels/attention-variants.js";
import { CM, streamStraight } from "../ts/kernels/attention-cm-parts.js";
import {
  FLASH_BWD_CM_ROWS, begin, dqFragment, dqMaskedFragment, dqRegisters, flashBwdDqCmApplies, flashBwdDqCmKernel, pairStager, storeScaled,
  type FlashBwdCmVariant,
} from "../ts/kernels/attention-cm-bwd.js";

/** How a candidate lays out its work. */
export interface DqShape {
  /** Subgroups of 16 queries. */
  readonly nsg: 4 | 8;
  /** Shared stages of the K/V tiles. */
  readonly stages: 1 | 2;
  /** lse2 / Di as the shipped per-subgroup 16x16 tiles, or 2 x rows floats read with stride 0. */
  readonly rowv: "tiles" | "stride0";
}

export interface DqCandidate {
  readonly name: string;
  /** null: the shipped kernel. */
  readonly shape: DqShape | null;
  /** What it changes against the one it builds on. */
  readonly what: string;
}

export const DQ_CURRENT = "current";

export const DQ_CANDIDATES: readonly DqCandidate[] = [
  { name: DQ_CURRENT, shape: null, what: "shipped flash_bwd_dq_cm (64 queries, one stage + register prefetch, per-fragment branches)" },
  { name: "sl", shape: { nsg: 4, stages: 1, rowv: "tiles" }, what: "straight-line tiles before the diagonal (no mask or P/dS-path branches)" },
  { name: "sl-s2", shape: { nsg: 4, stages: 2, rowv: "tiles" }, what: "sl + two K/V stages, one barrier per tile" },
  { name: "sl-w8", shape: { nsg: 8, stages: 1, rowv: "stride0" }, what: "sl with 8 subgroups: 128 queries share each K/V tile" },
  { name: "sl-s2-w8", shape: { nsg: 8, stages: 2, rowv: "stride0" }, what: "sl-w8 + two K/V stages" },
];

/** Rows of every streamed K/V tile. */
const TR = FLASH_BWD_CM_ROWS;

export function dqCandidate(name: string): DqCandidate {
  const c = DQ_CANDIDATES.find((x) => x.name === name);
  if (!c) throw new Error(`unknown dQ variant ${name} (${DQ_CANDIDATES.map((x) => x.name).join(", ")})`);
  return c;
}

/** Queries per workgroup: the dispatch is [T / rows, BH, 1]. */
export function dqRows(c: DqCandidate): number {
  return c.shape ? CM * c.shape.nsg : FLASH_BWD_CM_ROWS;
}

/** f32 scratch `st`: the per-subgroup broadcast tiles, or the lane probe's 256 floats (which also hold the 2 x rows row values). */
function stFloats(s: DqShape): number {
  return s.rowv === "tiles" ? s.nsg * 256 : 256;
}

/** Shared bytes of a candidate: the K and V stages, `st` and the per-subgroup P/dS tiles. */
export function dqSharedBytes(s: DqShape, D: number): number {
  return s.stages * 2 * TR * (D + 8) * 2 + stFloats(s) * 4 + s.nsg * 256 * 2;
}

/** Whether the candidate serves an f16 problem of T and D on the device. */
export function dqApplies(c: DqCandidate, dev: FlashDevice, D: number, T: number): boolean {
  if (!flashBwdDqCmApplies(dev, "f16", T, D)) return false;
  return !c.shape || (T % dqRows(c) === 0 && (dev.maxSharedMemoryBytes ?? 49152) >= dqSharedBytes(c.shape, D));
}

/** The candidate's kernel for the problem options `v` (f16). */
export function dqKernel(c: DqCandidate, v: Omit<FlashBwdCmVariant, "split">): KernelDesc {
  return c.shape ? flashBwdDqSlKernel({ ...v, shape: c.shape }) : flashBwdDqCmKernel(v);
}

function kernelName(v: Omit<FlashBwdCmVariant, "split">, s: DqShape): string {
  const tag = `w${s.nsg}_s${s.stages}${s.rowv === "stride0" ? "_rv0" : ""}_sl`;
  return `flash_bwd_dq_cm_f16_d${v.D}_${tag}${v.pShared ? "_psh" : ""}${v.softCap ? "_cap" : ""}${layoutTag(v.layout)}`;
}

export function flashBwdDqSlKernel(v: Omit<FlashBwdCmVariant, "split"> & { shape: DqShape }): KernelDesc {
  const { D, shape } = v;
  if ((v as FlashBwdCmVariant).split) throw new Error("flashBwdDqSlKernel: f16 only (no split form)");
  const ROWS = CM * shape.nsg, LD = D + 8, TILE = TR * LD;
  const { common: c, Q, K, V, dO, L, Di, outs: [dQ], nblk } = begin(
    kernelName(v, shape), v, ["dq"], { nsg: shape.nsg, rows: ROWS, stElems: stFloats(shape) },
  );
  const { k, rank } = c;
  const Ks = k.shared("Ks", "u32x4", (shape.stages * TILE) / 8), Vs = k.shared("Vs", "u32x4", (shape.stages * TILE) / 8);
  const q0 = k.let(nblk.sub(1).sub(rank).mul(ROWS), "q0");
  const x = dqRegisters(c, { Q, dO, L, Di, q0, D, kTiles: [Ks], vTiles: [Vs], rowv: shape.rowv });
  const { fetch, put } = pairStager(c, [K, V], ["k", "v"], [Ks, Vs], null, D, LD, TR);
  // key tiles up to the block's last query; the last ROWS / TR hold its diagonal
  const nt = k.let(q0.div(TR).add(ROWS / TR), "nt");
  streamStraight(k, {
    nt, rows: TR, first: lit("u32", 0), masked: ROWS / TR, maskedAt: "last", stages: shape.stages, regP: c.regP, fetch, put,
    math: (t, slot, regs, mid) => {
      const off = k.let(slot.mul(TILE), "kvoff");
      if (regs === null) {
        const k0 = k.let(t.mul(TR), "k0");
        for (let j = 0; j < TR / CM; j++) dqMaskedFragment(x, k0, off, j);
        return;
      }
      for (let j = 0; j < TR / CM; j++) {
        if (mid && j === TR / CM / 2) mid();
        dqFragment(x, off, j, regs, null);
      }
    },
  });
  storeScaled(c, x.dq, c.scale, dQ, "q", x.rf, D);
  return k.finish();
}
