// runCudaSuite end to end against a fake runtime that computes matmuls on the CPU from the kernel
// description's bindings and push constants: proves the protocol (plan, gate, timing, JSON, SVG)
// without a GPU. Real kernels are tested in matmul-*.test.ts.
import assert from "node:assert/strict";
import { mkdtempSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { test } from "node:test";
import { parseBenchArgs } from "../bench/args.js";
import { summarize } from "../bench/stats.js";
import { CheckFailed, runCudaSuite } from "../bench/suite-cuda.js";
import type { KernelDesc } from "../ts/ir/index.js";
import type { MatmulDeviceInfo, MatmulRuntime, ProfileEntry } from "../ts/kernels/matmul/device.js";

class FakeRuntime implements MatmulRuntime {
  buffers = new Map<number, Uint8Array>();
  pipes = new Map<number, KernelDesc>();
  next = 1;
  dispatches = 0;
  profile: ProfileEntry[] = [];
  profiling = false;
  /** `error` is added to every output of a problem with M ≥ errorFromM. */
  constructor(private readonly error = 0, private readonly errorFromM = 0) {}
  info: MatmulDeviceInfo = { deviceName: "fake", coopMatSupported: false, subgroupSize: 32, maxSharedMemoryBytes: 49152, driverVersion: "1" };
  initDevice() { return this.info; }
  getDeviceInfo() { return this.info; }
  createBuffer(n: number) { const h = this.next++; this.buffers.set(h, new Uint8Array(n)); return h; }
  uploadBuffer(h: number, d: ArrayBuffer | ArrayBufferView, off = 0) {
    const src = d instanceof ArrayBuffer ? new Uint8Array(d) : new Uint8Array(d.buffer, d.byteOffset, d.byteLength);
    this.buffers.get(h)!.set(src, off);
  }
  readBuffer(h: number, off = 0, len?: number) { const b = this.buffers.get(h)!; return b.slice(off, off + (len ?? b.length - off)).buffer; }
  destroyBuffer(h: number) { this.buffers.delete(h); }
  compileKernel(d: string | KernelDesc) { const h = this.next++; this.pipes.set(h, typeof d === "string" ? JSON.parse(d) : d); return h; }
  beginBatch(o?: { profile?: boolean }) { this.profiling = !!o?.profile; this.profile = []; }
  recordDispatch(p: number, bufs: number[], _g: number[], push?: ArrayBufferView) {
    const desc = this.pipes.get(p)!;
    assert.ok(desc.name.startsWith("mm_simt_f32_f32"), desc.name);
    const u = new Uint32Array(push!.buffer, push!.byteOffset, 10);
    const [m, n, k] = [u[0], u[1], u[2]];
    const f = (i: number) => new Float32Array(this.buffers.get(bufs[i])!.buffer);
    const [a, b, c] = [f(0), f(1), f(2)];
    for (let i = 0; i < m; i++) for (let j = 0; j < n; j++) {
      let s = 0;
      for (let t = 0; t < k; t++) s += a[i * k + t] * b[t * n + j];
      c[i * n + j] = s + (m >= this.errorFromM ? this.error : 0);
    }
    this.dispatches++;
    if (this.profiling) this.profile.push({ label: desc.name, gpuNs: 1e6 });
  }
  submitBatch() { return 1; }
  waitTimeline() {}
  batchProfile() { return this.profile; }
}

process.env.HELIOS_CACHE_DIR = mkdtempSync(join(tmpdir(), "helios-bench-test-"));

test("runCudaSuite: gate, timings, CUDA rows, JSON and SVG files", async () => {
  const dir = mkdtempSync(join(tmpdir(), "helios-bench-out-"));
  const o = parseBenchArgs(["--dtype=float32", "--shapes=24x20x16,9x7x5", "--iters=4", "--warmup=1", "--checkShape=13x11x9",
    `--out=${join(dir, "run.json")}`, `--plot=${join(dir, "out.svg")}`, "--quiet"]);
  const rt = new FakeRuntime();
  const rep = await runCudaSuite(o, {
    runtime: rt,
    torch: () => ({ ok: true, device: "fake-cuda", torch: "0", byShape: new Map([["24x20x16", summarize([[0.5, 0.5]])]]) }),
  });
  assert.equal(rep.rows.length, 2);
  assert.equal(rep.rows[0].heliosMs, 1);
  assert.equal(rep.rows[0].ratio, 0.5);
  assert.equal(rep.rows[1].cudaMs, null);
  assert.ok(rep.rows.every((r) => r.variant.startsWith("simt_")));
  assert.ok(rep.meta.check?.every((c) => c.pass && c.relErr < 1e-6));
  assert.ok((rep.rows[0].spotCheckRelErr ?? 1) < 1e-6);
  const json = JSON.parse(readFileSync(join(dir, "run.json"), "utf8"));
  assert.deepEqual(Object.keys(json), ["meta", "rows"]);
  assert.equal(json.meta.device, "fake");
  assert.ok(readFileSync(join(dir, "out.svg"), "utf8").startsWith("<svg"));
});

test("runCudaSuite: --rest idles before every repeat on both sides and is recorded in meta", async () => {
  const o = parseBenchArgs(["--dtype=float32", "--shapes=8x8x8,9x7x5", "--iters=2", "--repeats=3", "--warmMs=0", "--rest=0.05", "--checkShape=8x8x8", "--quiet"]);
  const rt = new FakeRuntime();
  let seen: { rest: number; warmMs: number } | undefined;
  const t0 = performance.now();
  const rep = await runCudaSuite(o, { runtime: rt, torch: (x) => { seen = { rest: x.rest, warmMs: x.warmMs }; return { ok: false, note: "none", byShape: new Map() }; } });
  const wall = performance.now() - t0;
  assert.deepEqual(seen, { rest: 0.05, warmMs: 0 });
  // 2 shapes × 3 repeats × 50 ms of idle
  assert.ok(wall >= 290, `wall ${wall.toFixed(0)} ms`);
  assert.equal(rep.rows.length, 2);
  assert.equal(rep.rows[0].heliosMs, 1);
  assert.equal(rep.meta.rest, 0.05);
  assert.equal(rep.meta.warmMs, 0);
  assert.match(rep.meta.protocol, /each repeat after 0\.05 s idle/);
  assert.match((await runCudaSuite(parseBenchArgs(["--dtype=float32", "--shapes=8x8x8", "--iters=2", "--checkShape=8x8x8", "--quiet", "--torch=false"]), { runtime: rt })).meta.protocol, /after 8 warmup and 400 ms of sustained load/);
});

test("runCudaSuite: a wrong result fails the gate before any timing", async () => {
  const o = parseBenchArgs(["--dtype=float32", "--shapes=24x20x16", "--iters=4", "--checkShape=13x11x9", "--quiet", "--torch=false"]);
  process.env.HELIOS_AUTOTUNE = "0";
  const rt = new FakeRuntime(0.01);
  try {
    await assert.rejects(runCudaSuite(o, { runtime: rt }), CheckFailed);
  } finally {
    delete process.env.HELIOS_AUTOTUNE;
  }
});

test("runCudaSuite: the timed kernel's own sampled check fails the run where the checkShape passes", async () => {
  // forms that only whole tiles take (pair staging, two-stage twins, stream-K) do not run at an
  // unaligned checkShape; the 64 sampled outputs of the timed shape are their gate
  const o = parseBenchArgs(["--dtype=float32", "--shapes=24x20x16", "--iters=4", "--checkShape=13x11x9", "--quiet", "--torch=false"]);
  process.env.HELIOS_AUTOTUNE = "0";
  try {
    await assert.rejects(runCudaSuite(o, { runtime: new FakeRuntime(0.5, 20) }), (e: unknown) => e instanceof CheckFailed && /24x20x16 \(64 sampled outputs\)/.test(e.message));
    const ok = await runCudaSuite(o, { runtime: new FakeRuntime(0.5, 100) });
    assert.ok(ok.meta.check?.every((c) => c.pass) && ok.rows.length === 1);
  } finally {
    delete process.env.HELIOS_AUTOTUNE;
  }
});

test("runCudaSuite: no torch gives Helios-only rows with a note", async () => {
  const o = parseBenchArgs(["--dtype=float32", "--shapes=8x8x8", "--iters=2", "--checkShape=8x8x8", "--quiet", "--python=/nonexistent/python3"]);
  const rep = await runCudaSuite(o, { runtime: new FakeRuntime() });
  assert.equal(rep.rows[0].cudaMs, null);
  assert.match(rep.meta.note ?? "", /Helios-only rows: no CUDA reference/);
});
