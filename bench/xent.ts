// bench/xent: GPU time of cross-entropy's loss and gradient over [rows, classes] logits (issue 27:
// GPT-2's LM head, 16384 × 50304, f16 under matmul16): the two kernels crossEntropy and
// crossEntropyBackward record (xent_rows4 + xent_bwd4: the row read three times) against
// crossEntropyWithGrad's xent_fused (xent_bwd4 writing the loss too: read twice, the second time
// possibly from L2) at 256, 512 and 1024 invocations per row (shipped: xentFusedWorkgroup).
// Each variant's row losses and gradient are checked on sampled rows against a float64 reference
// first (g = rows, so g/N = 1 keeps the f16 gradient out of the subnormals).
//
//   node dist/bench/xent.js [--rows=16384 (fewer where the logits would pass 2^31 - 1 bytes)] [--classes=50304] [--dtypes=f16,f32] [--iters=10] [--warm-ms=500] [--out=FILE]
//
// Protocol: bench/kernel-race.ts (variants take turns; µs = GPU busy time per call, median of 3 batches).
import { writeFileSync } from "node:fs";
import { runtime } from "../ts/device.js";
import type { Dtype } from "../ts/types.js";
import { fromF16Array, toF16Array } from "../ts/f16.js";
import { gridRows } from "../ts/kernels/common.js";
import {
  XENT_BWD_PUSH, XENT_PUSH, xentBwd4Kernel, xentFusedKernel, xentRows4Kernel,
} from "../ts/kernels/loss.js";
import { kernelRace, xorshift, type Launch } from "./kernel-race.js";

const arg = (k: string, d: string) => process.argv.find((a) => a.startsWith(`--${k}=`))?.slice(k.length + 3) ?? d;
const ROWS_ARG = Number(arg("rows", "16384"));
const CLASSES = Number(arg("classes", "50304"));
const DTYPES = arg("dtypes", "f16,f32").split(",").filter(Boolean) as Dtype[];
const ITERS = Number(arg("iters", "10"));
const OUT = arg("out", "");
const SAMPLE = 16;

// eslint-disable-next-line @typescript-eslint/no-explicit-any
const rt: any = runtime();
const info = rt.initDevice({});
const sg = (info.subgroupSize ?? 0) >= 4;
const { prepare, timeInTurns } = kernelRace(rt, { iters: ITERS, warmMs: Number(arg("warm-ms", "500")) });
const rnd = xorshift(2463534242);

interface Row { dtype: Dtype; rows: number; variant: string; us: number; gbps: number; lossErr: number; gradErr: number; kernels: Record<string, number> }
const rows: Row[] = [];

function variants(dtype: Dtype, ROWS: number): { name: string; launches: Launch[] }[] {
  const bwdPush = { rows: ROWS, classes: CLASSES, invN: 1 / ROWS };
  const out: { name: string; launches: Launch[] }[] = [{
    name: "separate (xent_rows4 + xent_bwd4)",
    launches: [
      { desc: xentRows4Kernel(dtype, sg), spec: XENT_PUSH, push: { rows: ROWS, classes: CLASSES }, groups: gridRows(ROWS), bufs: ["x", "t", "loss", "flag"] },
      { desc: xentBwd4Kernel(dtype, "f32", sg), spec: XENT_BWD_PUSH, push: bwdPush, groups: gridRows(ROWS), bufs: ["x", "t", "g", "dx", "flag"] },
    ],
  }];
  for (const wg of [256, 512, 1024].filter((w) => w <= (info.maxWorkgroupSize ?? 256))) {
    out.push({ name: `fused w${wg}`, launches: [
      { desc: xentFusedKernel(dtype, "f32", wg, sg), spec: XENT_BWD_PUSH, push: bwdPush, groups: gridRows(ROWS), bufs: ["x", "t", "g", "loss", "dx", "flag"] },
    ] });
  }
  return out;
}

function bench(dtype: Dtype): void {
  if (CLASSES % 4 !== 0) throw new Error("--classes must be a multiple of 4 (the 4-wide kernels)");
  const bytes = dtype === "f16" ? 2 : 4;
  // rows under one storage binding (f32 GPT-2 logits are 3.3 GB: its head runs in chunks)
  const ROWS = Math.min(ROWS_ARG, Math.floor((2 ** 31 - 1) / (CLASSES * bytes)));
  const n = ROWS * CLASSES;
  // the logits: one block of random rows uploaded again and again (host time), each row read back as stored
  const x = rt.leaseBuffer(n * bytes);
  const sampleRows = Array.from({ length: SAMPLE }, (_, i) => Math.floor((i * (ROWS - 1)) / (SAMPLE - 1)));
  const blockRows = 251; // prime: sampled rows land on different block rows
  const v = Float64Array.from({ length: blockRows * CLASSES }, () => rnd() * 8 - 4);
  const data = dtype === "f16" ? toF16Array(v) : Float32Array.from(v);
  const back = dtype === "f16" ? fromF16Array(data as Uint16Array) : (data as Float32Array);
  for (let r0 = 0; r0 < ROWS; r0 += blockRows) {
    const r1 = Math.min(ROWS, r0 + blockRows);
    rt.uploadBuffer(x, data.subarray(0, (r1 - r0) * CLASSES), r0 * CLASSES * bytes);
  }
  const stored = new Map(sampleRows.map((r) => [r, Float64Array.from(back.subarray((r % blockRows) * CLASSES, (r % blockRows + 1) * CLASSES))]));
  const targets = Int32Array.from({ length: ROWS }, () => Math.floor(rnd() * CLASSES));
  const t = rt.leaseBuffer(ROWS * 4);
  rt.uploadBuffer(t, targets);
  const g = rt.leaseBuffer(4);
  rt.uploadBuffer(g, Float32Array.of(ROWS));
  const loss = rt.leaseBuffer(ROWS * 4), dx = rt.leaseBuffer(n * bytes), flag = rt.leaseBuffer(4);
  const bufs = new Map([["x", x], ["t", t], ["g", g], ["loss", loss], ["dx", dx], ["flag", flag]]);
  const prepared = variants(dtype, ROWS).map((v) => {
    const p = prepare(v.launches, [], bufs);
    rt.fillBuffer(loss, 0x7fc00000);
    rt.fillBuffer(dx, 0);
    p.run(false, 1);
    const losses = new Float32Array(rt.readBuffer(loss, 0, ROWS * 4));
    let lossErr = 0, gradErr = 0, gradScale = 0;
    for (const r of sampleRows) {
      const row = stored.get(r) as Float64Array;
      let m = -Infinity;
      for (const v of row) m = Math.max(m, v);
      let s = 0;
      for (const v of row) s += Math.exp(v - m);
      const lse = Math.log(s) + m;
      lossErr = Math.max(lossErr, Math.abs(losses[r] - (lse - row[targets[r]])) / Math.max(1, Math.abs(lse)));
      const raw = rt.readBuffer(dx, r * CLASSES * bytes, CLASSES * bytes);
      const got = dtype === "f16" ? fromF16Array(new Uint16Array(raw)) : new Float32Array(raw);
      for (let j = 0; j < CLASSES; j++) {
        const want = Math.exp(row[j] - lse) - (j === targets[r] ? 1 : 0);
        gradErr = Math.max(gradErr, Math.abs(got[j] - want));
        gradScale = Math.max(gradScale, Math.abs(want));
      }
    }
    gradErr /= gradScale;
    const tol = dtype === "f16" ? 2e-3 : 1e-5;
    if (!(lossErr < 1e-5 && gradErr < tol)) throw new Error(`xent ${dtype} ${v.name}: loss error ${lossErr}, gradient error ${gradErr}`);
    return { name: v.name, p, lossErr, gradErr };
  });
  timeInTurns(prepared.map((v) => v.p)).forEach((r, i) => {
    // the minimum traffic: the logits read once and the gradient written once
    rows.push({ dtype, rows: ROWS, variant: prepared[i].name, us: r.us, gbps: (2 * n * bytes) / (r.us * 1e3), lossErr: prepared[i].lossErr, gradErr: prepared[i].gradErr, kernels: r.kernels });
  });
  prepared.forEach((v) => v.p.release());
  for (const h of [x, t, g, loss, dx, flag]) rt.releaseBuffer(h);
}

console.log(`device: ${info.deviceName}; up to ${ROWS_ARG} x ${CLASSES}; ${ITERS} iters x 3 batches, median; µs = GPU busy time per call; GB/s = one read + one write / µs`);
console.log(["dtype", "rows".padStart(5), "variant".padEnd(36), "µs".padStart(9), "GB/s".padStart(7), "loss err", "grad err"].join("  "));
for (const dt of DTYPES) {
  const done = rows.length;
  bench(dt);
  for (const r of rows.slice(done)) printRow(r);
}
function printRow(r: Row): void {
  console.log([r.dtype.padEnd(5), String(r.rows).padStart(5), r.variant.padEnd(36), r.us.toFixed(1).padStart(9), r.gbps.toFixed(0).padStart(7), r.lossErr.toExponential(1).padStart(8), r.gradErr.toExponential(1).padStart(8)].join("  "));
}
if (OUT) writeFileSync(OUT, JSON.stringify({ device: info.deviceName, rows: ROWS_ARG, classes: CLASSES, iters: ITERS, results: rows }, null, 2));
