// Startup reporting (ts/startup/): the progress line (driven by a fake clock, never by sleeping),
// the startup trace's phases, and both wired to real kernel compiles and matmul tuning on the
// test runtime (lavapipe presented as a GPU for the tuner).
import { test } from "node:test";
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { Progress, StartupTrace, setStartup, PHASES } from "../ts/startup/index.js";
import { readStartupConfig } from "../ts/config.js";
import { onNative, recordingBackend, withGpuLikeBackend } from "./backend-helpers.js";
import { Rng, randTensor, assertClose } from "./harness.js";
import * as N from "./ref/nn.js";

const rng = new Rng(2700 + Math.floor(Math.random() * 1000));

/** A sink that records writes, as a TTY or not. */
function sink(isTTY: boolean) {
  const out: string[] = [];
  return { isTTY, write: (s: string) => { out.push(s); return true; }, out };
}

/** A clock that advances `stepMs` at every reading. */
function slowClock(stepMs: number) {
  let t = rng.int(0, 1e6);
  return () => (t += stepMs);
}

test("progress: silent under the threshold, rewritten in place on a TTY, a summary line at the end", () => {
  const s = sink(true);
  const step = rng.int(300, 700);
  const p = new Progress({ sink: s, clock: slowClock(step), thresholdMs: 1000, gapMs: 10 * step });
  const units = rng.int(5, 12);
  for (let i = 0; i < units; i++) p.unit("compiling pipelines", `k${i}`, 0);
  const silent = Math.ceil(1000 / step); // units read before the activity reached 1 s
  assert.equal(s.out.length, units - silent);
  for (const line of s.out) assert.match(line, /^\r\x1b\[Khelios: compiling pipelines \d+ \(k\d+\) \d+\.\d s$/);
  assert.match(s.out.at(-1)!, new RegExp(`compiling pipelines ${units} \\(k${units - 1}\\)`));
  p.end();
  assert.match(s.out.at(-1)!, new RegExp(`^\\r\\x1b\\[Khelios: compiling pipelines: ${units} in ${((units - 1) * step / 1000).toFixed(1)} s\\n$`));
  p.end();
  assert.equal(s.out.length, units - silent + 1, "a second end prints nothing");
});

test("progress: no in-place lines off a TTY; a gap or another kind of work ends the activity with its summary", () => {
  const s = sink(false);
  const p = new Progress({ sink: s, clock: slowClock(600), thresholdMs: 1000, gapMs: 1000 });
  const total = rng.int(3, 6);
  for (let i = 1; i <= total; i++) p.unit("tuning matmul shape classes", `c${i}: rounds`, 0, { n: i, total });
  assert.deepEqual(s.out, []);
  p.unit("compiling pipelines", "k", 0);
  assert.deepEqual(s.out, [`helios: tuning matmul shape classes: ${total}/${total} in ${((total - 1) * 0.6).toFixed(1)} s\n`]);
  p.end();
  assert.equal(s.out.length, 1, "a short activity prints nothing");
  // units that each take longer than the gap (tuning stages) but follow one another stay one activity
  const long = new Progress({ sink: s, clock: slowClock(5000), thresholdMs: 1000, gapMs: 1000 });
  for (let i = 1; i <= total; i++) long.unit("tuning matmul shape classes", `c${i}: gate`, 5000, { n: i, total });
  long.end();
  assert.deepEqual(s.out.slice(1), [`helios: tuning matmul shape classes: ${total}/${total} in ${(total * 5).toFixed(1)} s\n`]);
  // an activity opened by begin() spans gaps between its units (the tuner's fixtures) until end()
  const held = new Progress({ sink: s, clock: slowClock(3000), thresholdMs: 1000, gapMs: 1000 });
  held.begin("tuning matmul shape classes", total);
  for (let i = 1; i <= total; i++) held.unit("tuning matmul shape classes", `c${i}: rounds`, 0, { n: i, total });
  held.end();
  assert.equal(s.out.at(-1), `helios: tuning matmul shape classes: ${total}/${total} in ${(total * 3).toFixed(1)} s\n`);
  assert.equal((s.out as string[]).filter((l) => l.includes("tuning")).length, 3, "one summary per activity");
  const before = s.out.length;
  const fast = new Progress({ sink: s, clock: slowClock(10), thresholdMs: 1000 });
  for (let i = 0; i < 50; i++) fast.unit("compiling pipelines", "k", 0);
  fast.end();
  assert.equal(s.out.length, before, "startup work under a second stays silent");
});

test("startup trace: phases sum their intervals, JSON keeps the events", () => {
  const clock = slowClock(rng.int(1, 9));
  const t = new StartupTrace(clock);
  const n = rng.int(2, 6);
  let sum = 0;
  for (let i = 0; i < n; i++) {
    const ms = rng.next() * 100;
    sum += ms;
    t.add("pipeline", `k${i}`, clock(), ms);
  }
  const v = t.time("tune-gate", "class", () => 42);
  assert.equal(v, 42);
  const j = t.toJSON();
  assert.equal(j.phases.pipeline.count, n);
  assert.ok(Math.abs(j.phases.pipeline.ms - sum) < 1e-9);
  assert.equal(j.events.length, n + 1);
  assert.ok(j.phases["tune-gate"].ms > 0, "time() measures with the trace's clock");
  const table = t.table();
  for (const ph of ["pipeline", "tune-gate"] as const) assert.ok(table.includes(PHASES[ph]), table);
});

test("HELIOS_PROGRESS and HELIOS_STARTUP_TRACE", () => {
  assert.deepEqual({ ...readStartupConfig({}) }, { progress: true, trace: null });
  assert.deepEqual({ ...readStartupConfig({ HELIOS_PROGRESS: "0", HELIOS_STARTUP_TRACE: "1" }) }, { progress: false, trace: "stderr" });
  assert.equal(readStartupConfig({ HELIOS_STARTUP_TRACE: "/tmp/t.json" }).trace, "/tmp/t.json");
  assert.equal(readStartupConfig({ HELIOS_STARTUP_TRACE: "off" }).trace, null);
  assert.throws(() => readStartupConfig({ HELIOS_PROGRESS: "quiet" }), (e: Error & { code?: string }) => e.code === "ERR_HELIOS_INVALID_ARGUMENT" && /HELIOS_PROGRESS=quiet/.test(e.message));
});

for (const compileThreads of [0, 1]) {
  const how = compileThreads === 1 ? "one at a time (HELIOS_COMPILE_THREADS=1)" : "deferred and compiled together";
  test(`kernel compiles report to the trace (assembly and driver apart) and the progress line: ${how}`, { skip: !onNative() && "needs the native runtime" }, () => {
    const s = sink(true);
    const cur = { progress: new Progress({ sink: s, thresholdMs: 0 }), trace: new StartupTrace() };
    const prev = setStartup(cur);
    try {
      const { B, names, calls } = recordingBackend({ compileThreads });
      const x = randTensor(rng, [rng.int(3, 40), 17], "f32");
      assertClose(B.softmax(x.td, -1), N.softmax(x.ref, -1), { atol: 1e-5, rtol: 1e-5 }, "softmax");
      const j = cur.trace.toJSON();
      assert.ok(names.size >= 1);
      const driver = j.events.filter((e) => e.phase === "pipeline");
      assert.equal(driver.length, calls.length, "one driver interval per native compile call");
      if (compileThreads === 1) {
        assert.equal(j.phases.pipeline.count, names.size, "a driver compile per kernel compiled");
      } else {
        assert.ok(calls.every((c) => c.many), "compiled through compileKernels");
        for (const n of names) assert.ok(driver.some((e) => e.label.includes(n)), `a driver interval names ${n}`);
      }
      assert.equal(j.phases.spirv.count, names.size, "each kernel's assembly timed apart");
      for (const n of names) assert.ok(s.out.some((l) => l.includes(`(${n})`)), `progress names ${n}`);
    } finally {
      setStartup(prev);
    }
  });
}

test("tunePending reports its stages: n of N classes on the progress line, gate and rounds in the trace", { skip: !onNative() && "needs the native runtime" }, async () => {
  const s = sink(false);
  const prev = setStartup({ progress: new Progress({ sink: s, thresholdMs: 0 }), trace: new StartupTrace() });
  try {
    await withGpuLikeBackend({}, (G) => {
      const m = rng.int(20, 60), k = rng.int(20, 60), n = rng.int(20, 60);
      const a = randTensor(rng, [m, k], "f32"), b = randTensor(rng, [k, n], "f32");
      assertClose(G.matmul(a.td, b.td), N.matmul(a.ref, b.ref), { atol: 1e-4, rtol: 1e-4 }, "product");
      assert.equal(G.tunePending().classes, 1);
    });
    const cur = setStartup(prev)!;
    const j = cur.trace!.toJSON();
    for (const ph of ["tune-compile", "tune-gate", "tune-rounds"]) assert.equal(j.phases[ph]?.count, 1, ph);
    const tuning = s.out.filter((l) => l.includes("tuning"));
    assert.equal(tuning.length, 1, "one summary line off a TTY");
    assert.match(tuning[0], /^helios: tuning matmul shape classes: 1\/1 in \d+\.\d s\n$/);
  } finally {
    setStartup(prev);
  }
});

test("HELIOS_STARTUP_TRACE=path writes the JSON trace at exit; =1 prints the table; HELIOS_PROGRESS=0 keeps stderr quiet", { skip: !onNative() && "needs the native runtime" }, () => {
  const dir = mkdtempSync(join(tmpdir(), "helios-trace-"));
  const script = join(dir, "child.mjs");
  const backend = resolve("dist/ts/backend.js");
  writeFileSync(script, `import { HeliosBackend } from ${JSON.stringify(backend)};
const B = new HeliosBackend();
const x = B.fromArray([${Array.from({ length: 12 }, () => rng.next().toFixed(4)).join(",")}], [3, 4]);
B.softmax(x, -1).data;\n`);
  const file = join(dir, "trace.json");
  const env = { ...process.env, HELIOS_CACHE_DIR: dir, HELIOS_VALIDATION: "0" };
  const r = spawnSync(process.execPath, [script], { env: { ...env, HELIOS_STARTUP_TRACE: file, HELIOS_PROGRESS: "0" }, encoding: "utf8" });
  assert.equal(r.status, 0, r.stderr);
  assert.equal(r.stderr, "", "quiet");
  const j = JSON.parse(readFileSync(file, "utf8"));
  assert.ok(j.phases.pipeline.count >= 1 && j.events.some((e: { phase: string }) => e.phase === "spirv"), JSON.stringify(j.phases));
  const t = spawnSync(process.execPath, [script], { env: { ...env, HELIOS_STARTUP_TRACE: "1" }, encoding: "utf8" });
  assert.equal(t.status, 0, t.stderr);
  assert.match(t.stderr, /helios startup trace[^\n]*\n {2}spirv +\d+ ×/);
});

test("at exit, a note says how many matmul shape classes ran untuned and how to tune them (none under HELIOS_PROGRESS=0)", { skip: !onNative() && "needs the native runtime" }, () => {
  const dir = mkdtempSync(join(tmpdir(), "helios-note-"));
  const script = join(dir, "child.mjs");
  const [m, k, n] = [rng.int(8, 40), rng.int(8, 40), rng.int(8, 40)];
  writeFileSync(script, `import { createRequire } from "node:module";
import { HeliosBackend } from ${JSON.stringify(resolve("dist/ts/backend.js"))};
import { bindRuntime } from ${JSON.stringify(resolve("dist/ts/exec/runtime.js"))};
const base = bindRuntime(createRequire(import.meta.url)(${JSON.stringify(resolve("native/index.cjs"))}));
const rt = { ...base, getDeviceInfo: () => ({ ...base.getDeviceInfo(), deviceType: "discrete-gpu" }) };
const B = new HeliosBackend({ runtime: rt });
B.matmul(B.randn([${m}, ${k}]), B.randn([${k}, ${n}])).data;\n`);
  const env = { ...process.env, HELIOS_CACHE_DIR: dir, HELIOS_VALIDATION: "0", HELIOS_AUTOTUNE: "deferred" };
  const r = spawnSync(process.execPath, [script], { env, encoding: "utf8" });
  assert.equal(r.status, 0, r.stderr);
  assert.match(r.stderr, /^helios: 1 matmul shape class\(es\) ran on the planner's default, untuned .*helios warmup/m);
  const q = spawnSync(process.execPath, [script], { env: { ...env, HELIOS_PROGRESS: "0" }, encoding: "utf8" });
  assert.equal(q.status, 0, q.stderr);
  assert.equal(q.stderr, "");
});
