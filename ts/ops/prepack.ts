// Prepacking of reused matmul weights. A 2-D B operand fed unchanged to products of one form
// (x·W or x·Wᵀ) on both sides of a host round trip — a weight in an inference loop, whose results
// are read between calls — is copied once into its other layout (N×K ↔ K×N) when the product runs
// measurably faster that way and the copy pays for itself over the products still to come; later
// products of that form read the copy until the source's buffer is written (a dispatch output, an
// upload, a replay of a capture that writes it) or the source is released. A training step uses
// each weight version only before its one host read (the loss), so training never packs and never
// pays for the race that decides it. The state lives here, per engine; the engine only tells this
// module when a tensor's storage is freed (Engine.onFree), so a released weight frees its copy.
import type { TensorData } from "../types.js";
import type { Engine } from "../engine.js";
import type { Lease } from "../exec/lease.js";
import { HeliosTensor } from "../tensor.js";
import { storageBytes } from "../kernels/common.js";
import { size } from "../shape.js";
import type { MatmulProblem } from "../kernels/matmul/index.js";
import { transpose } from "./layout.js";
import { startup } from "../startup/index.js";

interface PackEntry {
  /** The source's buffer and its write count when this entry opened (one version of the source). */
  lease: Lease;
  writes: number;
  /** Products of this version, by form: [B as K×N, B as N×K]. */
  uses: [number, number];
  /** Engine.roundTrips at each form's first product of this version (-1: none yet). */
  firstTrip: [number, number];
  /** Whether packing was considered for this version, by form (once each). */
  decided: [boolean, boolean];
  /** The same counts for the source's previous version (null before its first rewrite). */
  previousUses: [number, number] | null;
  /** The copy in the other layout, and the form it serves (transB of the products it replaces). */
  packed: HeliosTensor | null;
  packedFor: boolean;
}

/** One engine's prepacking: an entry per source tensor, and the counts its stats() report. */
interface Prepacks {
  readonly entries: WeakMap<HeliosTensor, PackEntry>;
  /** Copies made, and products that read one instead of their source. */
  made: number;
  reads: number;
}

const byEngine = new WeakMap<Engine, Prepacks>();

function prepacksOf(E: Engine): Prepacks {
  let p = byEngine.get(E);
  if (!p) {
    const state: Prepacks = { entries: new WeakMap(), made: 0, reads: 0 };
    // a freed source takes its copy along
    E.onFree((t) => {
      const e = state.entries.get(t);
      if (!e) return;
      state.entries.delete(t);
      if (e.packed) E.release(e.packed);
    });
    byEngine.set(E, (p = state));
  }
  return p;
}

/** Weights copied into their faster layout (HELIOS_MATMUL_PREPACK), and products that read such a copy. */
export function prepackCounts(E: Engine): { matmulPrepacks: number; matmulPrepackedReads: number } {
  const p = byEngine.get(E);
  return { matmulPrepacks: p?.made ?? 0, matmulPrepackedReads: p?.reads ?? 0 };
}

/** The current packed copy of `t`, if one is held (tests). */
export function packedCopyOf(E: Engine, t: HeliosTensor): HeliosTensor | null {
  return byEngine.get(E)?.entries.get(t)?.packed ?? null;
}

/** How much faster the other layout must run per product (the tuner's noise is ~1–2 %). */
export const PACK_MIN_GAIN = 0.03;
/**
 * The same from two separate tuning runs' records: their clocks can differ by ~3 % (H200,
 * kernels/matmul/race.ts), so the gain must clear that too.
 */
export const PACK_MIN_GAIN_CACHED = 0.06;
/**
 * Products the copy must pay for itself within when the source has no history (never rewritten:
 * an inference weight, reused far more often); after a rewrite, the previous version's count of
 * products of the form says how many are to come.
 */
export const PACK_PAYBACK_USES = 16;
/**
 * Bytes per ms a layout copy is assumed to move (read + write): 0.5 TB/s, what the strided
 * transpose reached on the H200 for GPT-2's 50304×768 f16 embedding (bench/RESULTS.md, session 12).
 */
export const COPY_BYTES_PER_MS = 0.5e9;

/**
 * Whether products taking `msPlain` as is and `msPacked` on the copy repay copying `bytes` of B
 * over `uses` products.
 */
export function packPays(msPlain: number, msPacked: number, bytes: number, uses: number, minGain = PACK_MIN_GAIN): boolean {
  const gain = msPlain - msPacked;
  return gain >= minGain * msPlain && gain * uses >= (2 * bytes) / COPY_BYTES_PER_MS;
}

/**
 * The B operand `problem` reads and its transB: B itself, or its packed copy in the other layout.
 * `pays(flipped, bytes, uses)` answers whether `problem` with B in the other layout repays copying
 * `bytes` over `uses` products (the backend compares both layouts' tuning records, packPays); it is asked
 * once per version and form, at its first product after a host round trip (Engine.roundTrips).
 */
export function prepackedB(
  E: Engine, B: TensorData, problem: MatmulProblem,
  pays: (flipped: MatmulProblem, bytes: number, uses: number) => boolean,
): { B: TensorData; transB: boolean } {
  const transB = problem.transB ?? false;
  const as = { B, transB };
  const mode = E.config.matmulPrepack;
  // inside a capture a replay may rewrite B before the copy is read: never pack there
  if (mode === "off" || E.capture || !(B instanceof HeliosTensor) || B.released || B.shape.length !== 2) return as;
  E.materialize(B);
  const lease = B.lease;
  if (!lease) return as;
  const state = prepacksOf(E);
  let e = state.entries.get(B);
  if (!e || e.lease !== lease || e.writes !== lease.writes) {
    if (e?.packed) E.release(e.packed);
    e = { lease, writes: lease.writes, uses: [0, 0], firstTrip: [-1, -1], decided: [false, false], previousUses: e ? e.uses : null, packed: null, packedFor: false };
    state.entries.set(B, e);
  }
  const form = transB ? 1 : 0;
  e.uses[form]++;
  if (e.firstTrip[form] < 0) e.firstTrip[form] = E.roundTrips;
  if (e.packed && e.packedFor === transB) {
    state.reads++;
    return { B: e.packed, transB: !transB };
  }
  // considered once, at the first product after a host round trip since this version's first
  if (e.packed || e.decided[form] || E.roundTrips === e.firstTrip[form]) return as;
  e.decided[form] = true;
  const flipped = { ...problem, transB: !transB };
  const bytes = size(B.shape) * storageBytes(B.dtype);
  // products still to come, this one included: as many as the previous version had, if any
  const done = e.uses[form] - 1;
  const uses = e.previousUses ? Math.max(1, e.previousUses[form] - done) : PACK_PAYBACK_USES;
  // "on" packs every reused N×K weight (x·Wᵀ becomes x·W): no timing, for tests and A/B runs
  if (!(mode === "on" ? transB : pays(flipped, bytes, uses))) return as;
  const trace = startup().trace;
  e.packed = trace ? trace.time("prepack", `${B.shape.join("x")} ${B.dtype}`, () => transpose(E, B, 0, 1)) : transpose(E, B, 0, 1);
  e.packedFor = transB;
  state.made++;
  state.reads++;
  return { B: e.packed, transB: !transB };
}
