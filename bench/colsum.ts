// bench/colsum: GPU time of a training step's column sums (issue 27) — bias gradients, the sum over
// axis 0 of dy [rows, n] (f16 data summed into f32 under matmul16: sumF32; f32 data: sum), and
// LayerNorm's dw/db over [rows, n] — as the shipped plan runs them (ts/kernels/colsum.ts: planColumns,
// colsum, layernorm_bwd_dwdb_cols, the same launches ts/ops/reduce.ts and ts/ops/nn.ts record; the
// kernels they replaced are in git history before 5a881fd, their times in bench/RESULTS.md). Every variant's result is checked
// against a float64 sum first, and the shipped bias-gradient launches against HeliosBackend's own
// result bit for bit (what is timed is what ships).
//
//   node dist/bench/colsum.js [--rows=16384] [--cols=768,2304,3072] [--dtypes=f16,f32] [--ops=bias,ln[,lnbwd]]
//     [--iters=50] [--warm-ms=500] [--out=FILE]
//   sweeps (comma lists; each combination is a variant beside the shipped one):
//     [--target=1024] [--max-chunks=64] [--segment=128] [--unroll=4] [--ln-unroll=2]
//   --ops=lnbwd: LayerNorm backward whole (dx, dw, db from x, w, g; w f32 as in the trainer): the
//     separate passes (layernorm_bwd_dx4, then layernorm_bwd_dwdb_cols + colsum k2, as ts/ops/nn.ts
//     records them with the fused pass off) against the fused pass (ts/kernels/layernorm-bwd.ts: dx
//     and the dw/db partials in one pass, then colsum k2), shipped knobs and a sweep of them:
//     [--ln-partials=64,128,256] [--ln-slots=2,4,8] [--ln-prefetch=0,1]. Each variant's dx must equal
//     the separate passes' bit for bit (column dx=sep) and dw/db the float64 sums within 1e-4 of
//     their largest; the shipped fused launches must equal HeliosBackend.layerNormBackward's results
//     bit for bit. GB/s = x and g read once + dx written / µs.
//
// Protocol: a variant's launches are recorded `iters` times into one profiled batch (dispatches of
// one iteration depend on each other; iterations overlap only where the hazard tracker allows). Per
// case, the variants take turns: --warm-ms of all of them (idle SM clocks otherwise,
// bench/profiling.ts), then 3 rounds of one batch each; µs = GPU busy time of a batch (union of the
// dispatches' stamp intervals) / iters, median of the 3; per-kernel µs are mean stamp durations. GB/s = bytes the first pass must read (x, and g + stats for LayerNorm) / µs.
import { writeFileSync } from "node:fs";
import { runtime } from "../ts/device.js";
import { HeliosBackend } from "../ts/backend.js";
import type { Dtype } from "../ts/types.js";
import { fromF16Array, toF16Array } from "../ts/f16.js";
import { COLSUM_PUSH, COLS_UNROLL, COLUMN_TUNING, colsumKernel, planColumns, type ColumnTuning } from "../ts/kernels/colsum.js";
import { LN_COLS_UNROLL, LN_PUSH, layerNormBwdColsKernel, layerNormBwdDxKernel } from "../ts/kernels/norm.js";
import { layerNormBwdDx4Kernel, ln4Shape } from "../ts/kernels/rows4.js";
import { LN_BWD_FUSED_PUSH, LN_BWD_TUNING, layerNormBwdFusedKernel, planLayerNormBwd, slotsFitSubgroups, type LnBwdTuning } from "../ts/kernels/layernorm-bwd.js";
import { gridRows } from "../ts/kernels/common.js";
import { kernelRace, xorshift, type Launch, type Scratch } from "./kernel-race.js";

const arg = (k: string, d: string) => process.argv.find((a) => a.startsWith(`--${k}=`))?.slice(k.length + 3) ?? d;
const list = (k: string, d: string) => arg(k, d).split(",").filter(Boolean);
const nums = (k: string, d: number) => list(k, String(d)).map(Number);
const ROWS = Number(arg("rows", "16384"));
const COLS = nums("cols", 0).filter((c) => c > 0).length ? nums("cols", 0) : [768, 2304, 3072];
const DTYPES = list("dtypes", "f16,f32") as Dtype[];
const OPS = list("ops", "bias,ln");
const ITERS = Number(arg("iters", "50"));
const WARM_MS = Number(arg("warm-ms", "500"));
const OUT = arg("out", "");

interface Variant { name: string; tune: Partial<ColumnTuning>; unroll: number; lnUnroll: number; shipped: boolean }
const shippedVariant: Variant = { name: "shipped", tune: {}, unroll: COLS_UNROLL, lnUnroll: LN_COLS_UNROLL, shipped: true };
function sweepVariants(): Variant[] {
  const swept = ["target", "max-chunks", "segment", "unroll", "ln-unroll"].some((k) => process.argv.some((a) => a.startsWith(`--${k}=`)));
  if (!swept) return [];
  const out: Variant[] = [];
  for (const targetGroups of nums("target", COLUMN_TUNING.targetGroups)) for (const maxChunks of nums("max-chunks", COLUMN_TUNING.maxChunks))
    for (const segmentBytes of nums("segment", COLUMN_TUNING.segmentBytes)) for (const unroll of nums("unroll", COLS_UNROLL)) for (const lnUnroll of nums("ln-unroll", LN_COLS_UNROLL)) {
      const name = `t${targetGroups}_c${maxChunks}_s${segmentBytes}_u${unroll}_lu${lnUnroll}`;
      out.push({ name, tune: { targetGroups, maxChunks, segmentBytes }, unroll, lnUnroll, shipped: false });
    }
  return out;
}

/** The launches ts/ops/reduce.ts columnSum records for sum over axis 0 of [rows, n] (K = 1). */
function shippedSum(dtype: Dtype, outDtype: Dtype, rows: number, n: number, v: Variant): { launches: Launch[]; scratch: Scratch[] } {
  const p = planColumns(dtype, 1, rows, n, v.tune);
  const first = (out: string, chunks: number, od: Dtype): Launch => ({
    desc: colsumKernel(dtype, od, p.vec, p.tx, 1, v.unroll), spec: COLSUM_PUSH,
    push: { dim: rows, inner: n, chunk: p.chunk, chunks, scale: 1 }, groups: p.groups, bufs: ["x", out],
  });
  if (p.chunks === 1) return { scratch: [], launches: [first("out", 1, outDtype)] };
  const q = planColumns("f32", 1, p.chunks, n, { ...v.tune, maxChunks: 1 });
  return {
    scratch: [{ name: "part", elems: p.chunks * n }],
    launches: [first("part", p.chunks, "f32"), {
      desc: colsumKernel("f32", outDtype, q.vec, q.tx, 1, v.unroll), spec: COLSUM_PUSH,
      push: { dim: p.chunks, inner: n, chunk: p.chunks, chunks: 1, scale: 1 }, groups: q.groups, bufs: ["part", "out"],
    }],
  };
}

/** The launches ts/ops/nn.ts layerNormBackward records for dw, db over `rows` >= 64. */
function shippedLayerNorm(dtype: Dtype, wDtype: Dtype, rows: number, n: number, v: Variant): { launches: Launch[]; scratch: Scratch[] } {
  const p = planColumns(dtype, 1, rows, n, v.tune);
  const one = p.chunks === 1;
  const cols: Launch = {
    desc: layerNormBwdColsKernel(dtype, one ? wDtype : "f32", p.vec, p.tx, v.lnUnroll), spec: COLSUM_PUSH,
    push: { dim: rows, inner: n, chunk: p.chunk, chunks: p.chunks, scale: 1 }, groups: p.groups, bufs: ["x", "g", "stats", one ? "dw" : "pw", one ? "db" : "pb"],
  };
  if (one) return { scratch: [], launches: [cols] };
  const q = planColumns("f32", 1, p.chunks, n, { ...v.tune, maxChunks: 1 });
  return {
    scratch: [{ name: "pw", elems: p.chunks * n }, { name: "pb", elems: p.chunks * n }],
    launches: [cols, {
      desc: colsumKernel("f32", wDtype, q.vec, q.tx, 2, v.unroll), spec: COLSUM_PUSH,
      push: { dim: p.chunks, inner: n, chunk: p.chunks, chunks: 1, scale: 1 }, groups: q.groups, bufs: ["pw", "pb", "dw", "db"],
    }],
  };
}

// eslint-disable-next-line @typescript-eslint/no-explicit-any
const rt: any = runtime();
const info = rt.initDevice({});
const rnd = xorshift(2463534242);

/** Device buffer holding `vals` stored as `dtype`; returns the handle and the stored values. */
function upload(vals: Float64Array, dtype: Dtype): { h: number; stored: Float64Array } {
  const data = dtype === "f16" ? toF16Array(vals) : Float32Array.from(vals);
  const h = rt.leaseBuffer(data.byteLength);
  rt.uploadBuffer(h, data);
  return { h, stored: Float64Array.from(dtype === "f16" ? fromF16Array(data as Uint16Array) : (data as Float32Array)) };
}
const readF32 = (h: number, n: number) => new Float32Array(rt.readBuffer(h, 0, n * 4));
const { prepare, timeInTurns } = kernelRace(rt, { iters: ITERS, warmMs: WARM_MS });

interface Row { op: string; dtype: string; n: number; variant: string; us: number; gbps: number; err: number; kernels: Record<string, number> }
const rows: Row[] = [];

function relErr(got: Float32Array | Float64Array, ref: Float64Array): number {
  let worst = 0, scale = 1e-30;
  for (let i = 0; i < ref.length; i++) {
    worst = Math.max(worst, Math.abs(got[i] - ref[i]));
    scale = Math.max(scale, Math.abs(ref[i]));
  }
  return worst / scale;
}

function benchBias(dtype: Dtype, n: number, variants: Variant[], B: HeliosBackend): void {
  const x = upload(Float64Array.from({ length: ROWS * n }, () => rnd() * 5 - 2), dtype);
  const ref = new Float64Array(n);
  for (let r = 0; r < ROWS; r++) for (let c = 0; c < n; c++) ref[c] += x.stored[r * n + c];
  const out = rt.leaseBuffer(n * 4);
  const bufs = new Map([["x", x.h], ["out", out]]);
  // the product's result, from the same stored values (sumF32: f32 out for either dtype)
  const host = dtype === "f16" ? toF16Array(x.stored) : Float32Array.from(x.stored);
  const product = new Float32Array(B.sumF32({ shape: [ROWS, n], dtype, data: host }, 0).data as Float32Array);
  const bytes = ROWS * n * (dtype === "f16" ? 2 : 4);
  const all: [string, { launches: Launch[]; scratch: Scratch[] }, boolean][] = variants.map((v) => [v.name, shippedSum(dtype, "f32", ROWS, n, v), v.shipped]);
  const prepared = all.map(([name, l, shipped]) => {
    const p = prepare(l.launches, l.scratch, bufs);
    rt.fillBuffer(out, 0x7fc00000);
    p.run(false, 1);
    const got = readF32(out, n);
    const err = relErr(got, ref);
    if (!(err < 1e-4)) throw new Error(`bias ${dtype} n=${n} ${name}: relative error ${err}`);
    if (shipped && got.some((g, i) => g !== product[i])) throw new Error(`bias ${dtype} n=${n}: the bench's launches differ from HeliosBackend.sumF32's result`);
    return { name, p, err };
  });
  timeInTurns(prepared.map((v) => v.p)).forEach((t, i) => {
    rows.push({ op: "bias grad (sum axis 0, f32 out)", dtype, n, variant: prepared[i].name, us: t.us, gbps: bytes / (t.us * 1e3), err: prepared[i].err, kernels: t.kernels });
  });
  prepared.forEach((v) => v.p.release());
  rt.releaseBuffer(out);
  rt.releaseBuffer(x.h);
}

function benchLayerNorm(dtype: Dtype, n: number, variants: Variant[]): void {
  const wDtype: Dtype = "f32";
  const x = upload(Float64Array.from({ length: ROWS * n }, () => rnd() * 6 - 3), dtype);
  const g = upload(Float64Array.from({ length: ROWS * n }, () => rnd() * 2 - 1), dtype);
  const st = upload(Float64Array.from({ length: ROWS * 2 }, (_, i) => (i % 2 ? 0.5 + rnd() : rnd() - 0.5)), "f32");
  const refW = new Float64Array(n), refB = new Float64Array(n);
  for (let r = 0; r < ROWS; r++) {
    const mean = st.stored[2 * r], rstd = st.stored[2 * r + 1];
    for (let c = 0; c < n; c++) {
      const gv = g.stored[r * n + c];
      refW[c] += gv * (x.stored[r * n + c] - mean) * rstd;
      refB[c] += gv;
    }
  }
  const dw = rt.leaseBuffer(n * 4), db = rt.leaseBuffer(n * 4);
  const bufs = new Map([["x", x.h], ["g", g.h], ["stats", st.h], ["dw", dw], ["db", db]]);
  const bytes = 2 * ROWS * n * (dtype === "f16" ? 2 : 4) + ROWS * 8;
  const all: [string, { launches: Launch[]; scratch: Scratch[] }][] = variants.map((v) => [v.name, shippedLayerNorm(dtype, wDtype, ROWS, n, v)]);
  const prepared = all.map(([name, l]) => {
    const p = prepare(l.launches, l.scratch, bufs);
    rt.fillBuffer(dw, 0x7fc00000);
    rt.fillBuffer(db, 0x7fc00000);
    p.run(false, 1);
    const err = Math.max(relErr(readF32(dw, n), refW), relErr(readF32(db, n), refB));
    if (!(err < 1e-4)) throw new Error(`layerNorm dw/db ${dtype} n=${n} ${name}: relative error ${err}`);
    return { name, p, err };
  });
  timeInTurns(prepared.map((v) => v.p)).forEach((t, i) => {
    rows.push({ op: "layerNorm dw+db", dtype, n, variant: prepared[i].name, us: t.us, gbps: bytes / (t.us * 1e3), err: prepared[i].err, kernels: t.kernels });
  });
  prepared.forEach((v) => v.p.release());
  for (const h of [dw, db, x.h, g.h, st.h]) rt.releaseBuffer(h);
}

const LN_EPS = 1e-5;

/** The separate passes ts/ops/nn.ts records for layerNormBackward with the fused pass off (rows >= 64). */
function separateLnBwd(dtype: Dtype, wDtype: Dtype, rows: number, n: number, sg: boolean): { launches: Launch[]; scratch: Scratch[] } {
  const shape = ln4Shape(n);
  const dx: Launch = {
    desc: shape ? layerNormBwdDx4Kernel(dtype, wDtype, shape.v4, sg, undefined, dtype, shape.wg) : layerNormBwdDxKernel(dtype, wDtype), spec: LN_PUSH,
    push: { rows, dim: n, eps: LN_EPS }, groups: gridRows(rows), bufs: ["x", "w", "g", "dx", "stats"],
  };
  const cols = shippedLayerNorm(dtype, wDtype, rows, n, shippedVariant);
  return { launches: [dx, ...cols.launches], scratch: [{ name: "stats", elems: rows * 2 }, ...cols.scratch] };
}

/** The fused pass and its fold, as ts/ops/nn.ts records them under `tune`. */
function fusedLnBwd(dtype: Dtype, wDtype: Dtype, rows: number, n: number, sg: boolean, tune: LnBwdTuning): { launches: Launch[]; scratch: Scratch[] } {
  const p = planLayerNormBwd(rows, n, rt.getDeviceInfo(), tune);
  if (!p) throw new Error(`layerNorm backward [${rows}, ${n}]: the fused pass does not apply`);
  const one = p.groups === 1;
  const main: Launch = {
    desc: layerNormBwdFusedKernel(dtype, wDtype, one ? wDtype : "f32", p.v4, p.slots, sg && slotsFitSubgroups(p, rt.getDeviceInfo().subgroupSize ?? 0), p.prefetch, undefined, dtype, p.wg),
    spec: LN_BWD_FUSED_PUSH,
    push: { rows, dim: n, eps: LN_EPS, rowsPerGroup: p.rowsPerGroup }, groups: [p.groups, 1, 1], bufs: ["x", "w", "g", "dx", one ? "dw" : "pw", one ? "db" : "pb"],
  };
  if (one) return { launches: [main], scratch: [] };
  const q = planColumns("f32", 1, p.groups, n, { maxChunks: 1 });
  return {
    scratch: [{ name: "pw", elems: p.groups * n }, { name: "pb", elems: p.groups * n }],
    launches: [main, {
      desc: colsumKernel("f32", wDtype, q.vec, q.tx, 2), spec: COLSUM_PUSH,
      push: { dim: p.groups, inner: n, chunk: p.groups, chunks: 1, scale: 1 }, groups: q.groups, bufs: ["pw", "pb", "dw", "db"],
    }],
  };
}

/** separate, fused (shipped knobs), then every swept combination of --ln-partials/--ln-slots/--ln-prefetch. */
function lnBwdVariants(): { name: string; tune: LnBwdTuning | null }[] {
  const out: { name: string; tune: LnBwdTuning | null }[] = [{ name: "separate", tune: null }, { name: "fused", tune: { ...LN_BWD_TUNING } }];
  if (!["ln-partials", "ln-slots", "ln-prefetch"].some((k) => process.argv.some((a) => a.startsWith(`--${k}=`)))) return out;
  for (const partials of nums("ln-partials", LN_BWD_TUNING.partials)) for (const slots of nums("ln-slots", LN_BWD_TUNING.slots))
    for (const pf of nums("ln-prefetch", LN_BWD_TUNING.prefetch ? 1 : 0)) {
      out.push({ name: `fused_p${partials}_s${slots}${pf ? "_pf" : ""}`, tune: { fused: true, partials, slots, prefetch: pf !== 0 } });
    }
  return out;
}

function benchLnBwd(dtype: Dtype, n: number, B: HeliosBackend): void {
  const wDtype: Dtype = "f32";
  const sg = (rt.getDeviceInfo().subgroupSize ?? 0) >= 4;
  const x = upload(Float64Array.from({ length: ROWS * n }, () => rnd() * 6 - 3), dtype);
  const g = upload(Float64Array.from({ length: ROWS * n }, () => rnd() * 2 - 1), dtype);
  const w = upload(Float64Array.from({ length: n }, () => 0.5 + rnd()), wDtype);
  const refW = new Float64Array(n), refB = new Float64Array(n), refDx = new Float64Array(ROWS * n);
  for (let r = 0; r < ROWS; r++) {
    const o = r * n;
    let mean = 0, v = 0, s1 = 0, s2 = 0;
    for (let c = 0; c < n; c++) mean += x.stored[o + c];
    mean /= n;
    for (let c = 0; c < n; c++) v += (x.stored[o + c] - mean) ** 2;
    const rstd = 1 / Math.sqrt(v / n + LN_EPS);
    for (let c = 0; c < n; c++) {
      const xh = (x.stored[o + c] - mean) * rstd, gv = g.stored[o + c], dy = gv * w.stored[c];
      refW[c] += gv * xh;
      refB[c] += gv;
      s1 += dy;
      s2 += dy * xh;
    }
    for (let c = 0; c < n; c++) refDx[o + c] = rstd * (g.stored[o + c] * w.stored[c] - (s1 + (x.stored[o + c] - mean) * rstd * s2) / n);
  }
  const bytes = ROWS * n * (dtype === "f16" ? 2 : 4);
  const dx = rt.leaseBuffer(bytes), dw = rt.leaseBuffer(n * 4), db = rt.leaseBuffer(n * 4);
  const bufs = new Map([["x", x.h], ["w", w.h], ["g", g.h], ["dx", dx], ["dw", dw], ["db", db]]);
  const hex = (h: number, len: number) => Buffer.from(rt.readBuffer(h, 0, len)).toString("hex");
  const dxValues = () => {
    const raw = rt.readBuffer(dx, 0, bytes);
    return dtype === "f16" ? Float64Array.from(fromF16Array(new Uint16Array(raw))) : new Float32Array(raw);
  };
  // what HeliosBackend ships for this shape (the fused pass unless the plan declines it)
  const host = (s: Float64Array) => ({ shape: [ROWS, n], dtype, data: dtype === "f16" ? toF16Array(s) : Float32Array.from(s) });
  const product = B.layerNormBackward(host(x.stored), { shape: [n], dtype: wDtype, data: Float32Array.from(w.stored) }, host(g.stored), LN_EPS);
  const productHex = [product.dx, product.dw, product.db].map((t) => Buffer.from(t.data.buffer, t.data.byteOffset, t.data.byteLength).toString("hex"));
  let sepDx = "";
  const prepared = lnBwdVariants().map(({ name, tune }) => {
    const l = tune ? fusedLnBwd(dtype, wDtype, ROWS, n, sg, tune) : separateLnBwd(dtype, wDtype, ROWS, n, sg);
    const p = prepare(l.launches, l.scratch, bufs);
    for (const h of [dx, dw, db]) rt.fillBuffer(h, 0x7fc00000);
    p.run(false, 1);
    const err = Math.max(relErr(readF32(dw, n), refW), relErr(readF32(db, n), refB));
    if (!(err < 1e-4)) throw new Error(`layerNorm backward ${dtype} n=${n} ${name}: dw/db relative error ${err}`);
    const dxErr = relErr(dxValues(), refDx);
    if (!(dxErr < (dtype === "f16" ? 1e-2 : 1e-4))) throw new Error(`layerNorm backward ${dtype} n=${n} ${name}: dx relative error ${dxErr}`);
    const dxHex = hex(dx, bytes);
    if (!tune) sepDx = dxHex;
    const same = dxHex === sepDx;
    if (!same) console.error(`WARNING: layerNorm backward ${dtype} n=${n} ${name}: dx differs from the separate passes' bits`);
    if (name === "fused" && (dxHex !== productHex[0] || hex(dw, n * 4) !== productHex[1] || hex(db, n * 4) !== productHex[2])) {
      throw new Error(`layerNorm backward ${dtype} n=${n}: the bench's fused launches differ from HeliosBackend.layerNormBackward's results`);
    }
    return { name: `${name}${same ? "" : " (dx!=sep)"}`, p, err: Math.max(err, dxErr) };
  });
  timeInTurns(prepared.map((v) => v.p)).forEach((t, i) => {
    rows.push({ op: "layerNorm bwd dx+dw+db", dtype, n, variant: prepared[i].name, us: t.us, gbps: (3 * bytes) / (t.us * 1e3), err: prepared[i].err, kernels: t.kernels });
  });
  prepared.forEach((v) => v.p.release());
  for (const h of [dx, dw, db, x.h, g.h, w.h]) rt.releaseBuffer(h);
}

const variants = [shippedVariant, ...sweepVariants()];
const B = new HeliosBackend({ runtime: rt });
for (const op of OPS) for (const dtype of DTYPES) for (const n of COLS) {
  if (op === "bias") benchBias(dtype, n, variants, B);
  else if (op === "ln") benchLayerNorm(dtype, n, variants);
  else if (op === "lnbwd") benchLnBwd(dtype, n, B);
  else throw new Error(`--ops: unknown ${op} (bias, ln, lnbwd)`);
}
console.log(`device: ${info.deviceName}; rows ${ROWS}; ${ITERS} iters x 3 batches, median; µs = GPU busy time per call`);
console.log(["op".padEnd(32), "dtype", "n".padStart(5), "variant".padEnd(28), "µs".padStart(8), "GB/s".padStart(7), "  kernels (µs)"].join(" "));
for (const r of rows) {
  const ks = Object.entries(r.kernels).map(([k, v]) => `${k} ${v.toFixed(1)}`).join(", ");
  console.log([r.op.padEnd(32), r.dtype.padEnd(5), String(r.n).padStart(5), r.variant.padEnd(28), r.us.toFixed(1).padStart(8), r.gbps.toFixed(0).padStart(7), `  ${ks}`].join(" "));
}
if (OUT) writeFileSync(OUT, JSON.stringify({ device: info.deviceName, driver: info.driverName ?? null, rows: ROWS, iters: ITERS, results: rows }, null, 1));
