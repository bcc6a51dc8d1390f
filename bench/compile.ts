// bench/compile: what a kernel costs to make. Times describe (TS builder) + serialize
// (JSON.stringify) + validate + assemble (native kernelSpirv without the memo) for a fused
// elementwise kernel and a cooperative-matrix matmul; the memo-hit path; and, when a device
// exists, driver pipeline creation (compileKernel on a new description) separately.
// Targets (issue 3): < 0.2 ms elementwise, < 2 ms coopmat matmul.
//
//   node dist/bench/compile.js [--iters=N] [--out=perf/compile.json]
import { createRequire } from "node:module";
import { mkdirSync, writeFileSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import { f32, kernel, tanh, u32, type KernelDesc } from "../ts/ir/index.js";
import { coopMatmulSample } from "../lab/ir-samples-coop.js";

const require = createRequire(import.meta.url);
const root = resolve(new URL(".", import.meta.url).pathname, "..", "..");
// eslint-disable-next-line @typescript-eslint/no-explicit-any
const native: any = require(join(root, "native", "index.cjs"));

const args = new Map(process.argv.slice(2).map((a) => a.replace(/^--/, "").split("=") as [string, string]));
const iters = Number(args.get("iters") ?? 400);
const outPath = args.get("out") ?? "perf/compile.json";

/** gelu(a * b[i % cols] + c[i]) * s: a 4-op fused chain with a broadcast operand. */
function fusedElementwise(name: string): KernelDesc {
  const k = kernel(name, { workgroup: [256] });
  const a = k.buffer("a", f32, "read"), b = k.buffer("b", f32, "read"), c = k.buffer("c", f32, "read");
  const o = k.buffer("o", f32, "write");
  const p = k.push({ n: u32, cols: u32, s: f32 });
  const i = k.let(k.globalId.x, "i");
  k.if(i.lt(p.n), () => {
    const x = k.let(a.load(i).mul(b.load(i.rem(p.cols))).add(c.load(i)), "x");
    const inner = x.add(x.mul(x).mul(x).mul(0.044715)).mul(0.7978845608);
    o.store(i, x.mul(0.5).mul(tanh(inner).add(1)).mul(p.s));
  });
  return k.finish();
}

interface Row {
  kernel: string;
  stage: string;
  medianMs: number;
  p95Ms: number;
  iters: number;
  jsonBytes?: number;
}

function time(n: number, f: (i: number) => void): { median: number; p95: number } {
  for (let i = 0; i < Math.min(50, n); i++) f(n + i); // warm-up (JIT, allocator)
  const ts: number[] = [];
  for (let i = 0; i < n; i++) {
    const t0 = process.hrtime.bigint();
    f(i);
    ts.push(Number(process.hrtime.bigint() - t0) / 1e6);
  }
  ts.sort((x, y) => x - y);
  return { median: ts[Math.floor(n / 2)], p95: ts[Math.floor(n * 0.95)] };
}

function benchKernel(label: string, make: (name: string) => KernelDesc, n: number, rows: Row[]): void {
  const json = JSON.stringify(make(`${label}_0`));
  const describe = time(n, (i) => make(`${label}_${i}`));
  const desc = make(label);
  const serialize = time(n, () => JSON.stringify(desc));
  const assemble = time(n, () => native.kernelSpirv(json, { noCache: true }));
  const total = time(n, (i) => native.kernelSpirv(JSON.stringify(make(`${label}_t${i}`)), { noCache: true }));
  native.kernelSpirv(json);
  const hit = time(n, () => native.kernelSpirv(json));
  const push = (stage: string, t: { median: number; p95: number }) =>
    rows.push({ kernel: label, stage, medianMs: t.median, p95Ms: t.p95, iters: n, jsonBytes: json.length });
  push("describe (TS builder)", describe);
  push("serialize (JSON.stringify)", serialize);
  push("validate + assemble (native)", assemble);
  push("total: describe..assemble", total);
  push("memo hit (kernelSpirv)", hit);
}

/** Driver pipeline creation, on a device (initialized only after the assembly timings, which
 *  validate against the permissive caps while no device exists). */
function benchPipelines(label: string, make: (name: string) => KernelDesc, n: number, rows: Row[]): void {
  const stamp = Date.now();
  const t = time(n, (i) => native.compileKernel(make(`${label}_pipe${i}_${stamp}`)));
  rows.push({ kernel: label, stage: "compileKernel miss (incl. driver pipeline)", medianMs: t.median, p95Ms: t.p95, iters: n });
}

function initDevice(): boolean {
  if (typeof native.initDevice !== "function") return false;
  try {
    native.initDevice();
    return true;
  } catch {
    return false;
  }
}

const rows: Row[] = [];
benchKernel("fused_elementwise", fusedElementwise, iters, rows);
benchKernel("coop_matmul_f16", () => coopMatmulSample({ elem: "f16", acc: "f32" }), Math.max(50, iters / 4), rows);
if (initDevice()) {
  benchPipelines("fused_elementwise", fusedElementwise, 30, rows);
  try {
    // a unique name per iteration defeats both memos
    benchPipelines("coop_matmul_f16", (name) => ({ ...coopMatmulSample({ elem: "f16", acc: "f32" }), name }), 10, rows);
  } catch (e) {
    console.log(`coop_matmul_f16 pipeline: skipped (${(e as Error).message})`);
  }
} else {
  console.log("no device: driver pipeline creation not measured");
}

console.log("kernel              stage                                        median ms    p95 ms   bytes");
for (const r of rows) {
  console.log(
    `${r.kernel.padEnd(19)} ${r.stage.padEnd(44)} ${r.medianMs.toFixed(4).padStart(9)} ${r.p95Ms.toFixed(4).padStart(9)} ${String(r.jsonBytes ?? "").padStart(7)}`,
  );
}
const meta = { node: process.version, platform: `${process.platform}-${process.arch}`, timestamp: new Date().toISOString() };
mkdirSync(dirname(outPath), { recursive: true });
writeFileSync(outPath, JSON.stringify({ meta, rows }, null, 2));
console.log(`wrote ${outPath}`);
