// Pipeline-cache seeds (issue 26, cold start; src/runtime/pipeline_seed.rs): a device with no cache
// file of its own starts its VkPipelineCache from the seed shipped for its GPU model and driver
// build, reported as DeviceInfo.pipelineCacheSource. Each case runs in a fresh process (the cache is
// read at initDevice) with its own empty cache dir; lavapipe's cache data is its 32-byte header, so
// these check which data the driver was handed, not how fast it compiled.
import assert from "node:assert/strict";
import { execFileSync, spawnSync } from "node:child_process";
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { after, test } from "node:test";
import { openDevice, PIPELINE_SEED_DIR } from "../ts/device.js";
import { setStartup, StartupTrace } from "../ts/startup/index.js";
import { HeliosBackend } from "../ts/backend.js";
import { MockRuntime } from "./mock/runtime.js";

const root = mkdtempSync(join(tmpdir(), "helios-seed-test-"));
after(() => rmSync(root, { recursive: true, force: true }));
let dirs = 0;
const fresh = (): string => {
  const d = join(root, `d${dirs++}`);
  mkdirSync(d);
  return d;
};

interface Run {
  out?: { source: string; vendorId: number; deviceId: number; seed?: string; ok?: boolean };
  code?: string;
  message?: string;
  stderr: string;
}

/**
 * Opens the device in a child with `seeds` as its seed dir and a fresh (or given) cache dir,
 * compiles and runs the test kernels under validation, optionally exports a seed to `exportTo`.
 */
function child(seeds: string, opts: { cache?: string; env?: Record<string, string>; exportTo?: string; timeoutMs?: number } = {}): Run {
  const nativeUrl = new URL("../ts/native.js", import.meta.url).href;
  const kernelsUrl = new URL("./kernels/index.js", import.meta.url).href;
  const script = `
    const { native } = await import(${JSON.stringify(nativeUrl)});
    const { KERNELS } = await import(${JSON.stringify(kernelsUrl)});
    try {
      const info = native.initDevice({ validation: true, pipelineSeedDir: ${JSON.stringify(seeds)} });
      const p = native.createPipeline(KERNELS.inc.spirv, KERNELS.inc.layout);
      native.createPipeline(KERNELS.axpb.spirv, KERNELS.axpb.layout);
      const b = native.createBuffer(256);
      native.uploadBuffer(b, new Uint32Array(64).fill(41));
      native.beginBatch();
      native.recordDispatch(p, [b], [1], new Uint32Array([64]));
      native.waitTimeline(native.submitBatch());
      const ok = new Uint32Array(native.readBuffer(b)).every((x) => x === 42);
      const msgs = native.takeValidationMessages();
      if (msgs.length) throw new Error("validation: " + msgs.join("\\n"));
      const seed = ${JSON.stringify(opts.exportTo ?? null)};
      const out = { source: info.pipelineCacheSource, vendorId: info.vendorId, deviceId: info.deviceId, ok };
      if (seed !== null) out.seed = native.exportPipelineSeed(seed);
      console.log(JSON.stringify({ out }));
    } catch (e) { console.log(JSON.stringify({ code: e.code, message: e.message })); }
    try { native.destroy(); } catch {}`;
  const res = spawnSync(process.execPath, ["--input-type=module", "-e", script], {
    env: { ...process.env, HELIOS_VALIDATION: "1", HELIOS_CACHE_DIR: opts.cache ?? fresh(), ...opts.env },
    encoding: "utf8",
    timeout: opts.timeoutMs ?? 60_000,
  });
  assert.equal(res.status, 0, `child process failed (${res.signal ?? res.status}): ${res.stderr}`);
  const last = res.stdout.trim().split("\n").pop() ?? "";
  if (!last.startsWith("{")) assert.fail(`child printed no result:\n${res.stdout}\n${res.stderr}`);
  return { ...JSON.parse(last), stderr: res.stderr };
}

/** The source a run reported, after checking it compiled and ran the kernels correctly. */
function source(r: Run): string {
  assert.ok(r.out, JSON.stringify(r));
  assert.equal(r.out.ok, true, "the kernels ran correctly");
  return r.out.source;
}

// The HELIOSPC wrapper (src/runtime/cache_file.rs): magic, u32 version, u64 length, u64 FNV-1a.
function fnv1a(data: Uint8Array): bigint {
  let h = 0xcbf29ce484222325n;
  for (const b of data) h = ((h ^ BigInt(b)) * 0x100000001b3n) & 0xffffffffffffffffn;
  return h;
}

function unwrap(file: Buffer): Buffer {
  assert.equal(file.subarray(0, 8).toString("latin1"), "HELIOSPC");
  assert.equal(file.readUInt32LE(8), 1);
  const payload = file.subarray(28);
  assert.equal(file.readBigUInt64LE(12), BigInt(payload.length));
  assert.equal(file.readBigUInt64LE(20), fnv1a(payload));
  return payload;
}

function wrap(payload: Uint8Array): Buffer {
  const head = Buffer.alloc(28);
  head.write("HELIOSPC", 0, "latin1");
  head.writeUInt32LE(1, 8);
  head.writeBigUInt64LE(BigInt(payload.length), 12);
  head.writeBigUInt64LE(fnv1a(payload), 20);
  return Buffer.concat([head, payload]);
}

// One seed exported from this machine, shared by the cases below.
const exported = (() => {
  const dir = fresh();
  const r = child(fresh(), { exportTo: dir });
  assert.ok(r.out?.seed, JSON.stringify(r));
  return { dir, file: r.out.seed, name: r.out.seed.split("/").pop()!, payload: unwrap(readFileSync(r.out.seed)), info: r.out };
})();

/** A seed dir holding `bytes` under this device's seed name. */
function seedDirWith(bytes: Uint8Array): string {
  const d = fresh();
  writeFileSync(join(d, exported.name), bytes);
  return d;
}

const warned = (r: Run): boolean => /helios: ignoring[^\n]*pipeline-cache seed/.test(r.stderr);

test("a seed exported after compiling kernels is named by its own Vulkan header, which names this device", () => {
  const { info, payload, name, file } = exported;
  assert.equal(source({ out: info, stderr: "" }), "empty", "the exporting process had neither a cache file nor a seed");
  assert.equal(file, resolve(exported.dir, name));
  assert.deepEqual(readdirSync(exported.dir), [name]);
  assert.ok(payload.length >= 32 && payload.readUInt32LE(0) >= 32, `Vulkan header size ${payload.readUInt32LE(0)}`);
  assert.equal(payload.readUInt32LE(4), 1, "VK_PIPELINE_CACHE_HEADER_VERSION_ONE");
  assert.equal(payload.readUInt32LE(8), info.vendorId);
  assert.equal(payload.readUInt32LE(12), info.deviceId);
  const hex = (n: number) => n.toString(16).padStart(4, "0");
  assert.equal(name, `${hex(info.vendorId)}-${hex(info.deviceId)}-${payload.subarray(16, 32).toString("hex")}.bin`);
});

test("a fresh process with an empty cache dir starts from the seed, runs the same kernels, then uses its own file", () => {
  const cache = fresh();
  const seeded = child(exported.dir, { cache });
  assert.equal(source(seeded), "seed");
  assert.ok(!/helios:/.test(seeded.stderr), `no warning: ${seeded.stderr}`);
  assert.ok(readdirSync(cache).some((n) => n.startsWith("pipelines-")), "the device's own cache file was written");
  assert.equal(source(child(exported.dir, { cache })), "own", "the next process takes its own file over the seed");
  assert.equal(source(child(fresh(), { cache })), "own");
  assert.equal(source(child(join(root, "no-such-dir"))), "empty", "a missing seed dir is silent");
});

test("the same seed re-wrapped is taken; one whose header names another device or driver build is ignored silently", () => {
  assert.equal(source(child(seedDirWith(wrap(exported.payload)))), "seed", "the control: this test's wrapper matches the runtime's");
  const edits: [string, (p: Buffer) => void][] = [
    ["another deviceID", (p) => p.writeUInt32LE((p.readUInt32LE(12) + 1) >>> 0, 12)],
    // (a vendor other than this device's: a fixed one would be this device's own on its vendor's GPUs)
    ["another vendorID", (p) => p.writeUInt32LE((p.readUInt32LE(8) ^ 0x1) >>> 0, 8)],
    ["another pipelineCacheUUID", (p) => { p[31] ^= 0x5a; }],
  ];
  for (const [what, edit] of edits) {
    const p = Buffer.from(exported.payload);
    edit(p);
    const r = child(seedDirWith(wrap(p)));
    assert.equal(source(r), "empty", what);
    assert.ok(!warned(r), `${what}: a mismatch is not a warning: ${r.stderr}`);
  }
});

test("a corrupt or truncated seed, or one with a broken Vulkan header, is ignored with a warning", () => {
  const file = readFileSync(exported.file);
  const flipped = Buffer.from(file);
  flipped[file.length - 1] ^= 1;
  const wrongVersion = Buffer.from(exported.payload);
  wrongVersion.writeUInt32LE(2, 4);
  const cases: [string, Uint8Array][] = [
    ["a flipped payload byte", flipped],
    ["truncated", file.subarray(0, file.length - 5)],
    ["only our header", file.subarray(0, 28)],
    ["garbage", Buffer.from("not a pipeline cache seed at all".repeat(4))],
    ["a short Vulkan header", wrap(exported.payload.subarray(0, 20))],
    ["Vulkan header version 2", wrap(wrongVersion)],
  ];
  for (const [what, bytes] of cases) {
    const r = child(seedDirWith(bytes));
    assert.equal(source(r), "empty", what);
    assert.ok(warned(r), `${what}: expected a warning, got ${JSON.stringify(r.stderr)}`);
    assert.equal(r.stderr.match(/helios: ignoring/g)?.length, 1, `${what}: one warning`);
  }
});

test("a symlink or a FIFO in the seed dir is not followed and does not block", () => {
  const link = fresh();
  symlinkSync(exported.file, join(link, exported.name));
  const r = child(link);
  assert.equal(source(r), "empty", "a link to a valid seed is not followed");
  assert.ok(warned(r), r.stderr);
  const fifo = fresh();
  execFileSync("mkfifo", [join(fifo, exported.name)]);
  const f = child(fifo, { timeoutMs: 30_000 }); // a blocking open fails by timeout
  assert.equal(source(f), "empty");
  assert.ok(warned(f), f.stderr);
});

test("HELIOS_PIPELINE_SEED=0 starts empty; invalid values fail initDevice naming the variable", () => {
  assert.equal(source(child(exported.dir, { env: { HELIOS_PIPELINE_SEED: "0" } })), "empty");
  assert.equal(source(child(exported.dir, { env: { HELIOS_PIPELINE_SEED: "off" } })), "empty");
  assert.equal(source(child(exported.dir, { env: { HELIOS_PIPELINE_SEED: "1" } })), "seed", "the control");
  for (const bad of ["2", "maybe"]) {
    const r = child(exported.dir, { env: { HELIOS_PIPELINE_SEED: bad } });
    assert.equal(r.code, "ERR_HELIOS_INVALID_ARGUMENT", JSON.stringify(r));
    assert.ok(r.message?.includes(`initDevice: HELIOS_PIPELINE_SEED=${bad}: expected 0 or 1`), r.message);
  }
});

test("exportPipelineSeed and pipelineSeedDir refuse bad paths with coded errors", () => {
  const plain = join(fresh(), "plain-file");
  writeFileSync(plain, "x");
  const cases: [string, string, RegExp][] = [
    [`native.initDevice(); native.exportPipelineSeed(${JSON.stringify(plain)})`, "ERR_HELIOS_INVALID_ARGUMENT", /exportPipelineSeed: .*plain-file is not a directory/],
    [`native.initDevice(); native.exportPipelineSeed("")`, "ERR_HELIOS_INVALID_ARGUMENT", /exportPipelineSeed: dir "" is not a path/],
    [`native.initDevice(); native.exportPipelineSeed(7)`, "ERR_HELIOS_INVALID_ARGUMENT", /exportPipelineSeed: dir must be a string, got number/],
    [`native.exportPipelineSeed(${JSON.stringify(fresh())})`, "ERR_HELIOS_DESTROYED", /exportPipelineSeed: no device/],
    [`native.initDevice({ pipelineSeedDir: "" })`, "ERR_HELIOS_INVALID_ARGUMENT", /initDevice: opts.pipelineSeedDir "" is not a path/],
    [`native.initDevice({ pipelineSeedDir: "a\\u0000b" })`, "ERR_HELIOS_INVALID_ARGUMENT", /initDevice: opts.pipelineSeedDir .* is not a path/],
  ];
  const nativeUrl = new URL("../ts/native.js", import.meta.url).href;
  for (const [body, code, message] of cases) {
    const script = `const { native } = await import(${JSON.stringify(nativeUrl)});
      try { ${body}; console.log(JSON.stringify({ ok: true })); } catch (e) { console.log(JSON.stringify({ code: e.code, message: e.message })); }
      try { native.destroy(); } catch {}`;
    const res = spawnSync(process.execPath, ["--input-type=module", "-e", script], { env: { ...process.env, HELIOS_CACHE_DIR: fresh() }, encoding: "utf8" });
    const r = JSON.parse(res.stdout.trim().split("\n").pop() ?? "{}");
    assert.equal(r.code, code, `${body}: ${res.stdout}${res.stderr}`);
    assert.match(r.message, message, body);
  }
  assert.ok(existsSync(plain) && readFileSync(plain, "utf8") === "x", "the file named as a directory is untouched");
});

test("the package passes its data/pipeline-cache to initDevice; the startup trace records the source", () => {
  assert.ok(existsSync(join(PIPELINE_SEED_DIR, "README.md")), `${PIPELINE_SEED_DIR} is the package's seed dir`);
  assert.equal(PIPELINE_SEED_DIR, resolve(new URL("../..", import.meta.url).pathname, "data", "pipeline-cache"));
  const seen: unknown[] = [];
  const info = { deviceName: "fake", pipelineCacheSource: "seed" };
  const prev = setStartup({ progress: null, trace: new StartupTrace() });
  try {
    openDevice({ initDevice: (o) => (seen.push(o), info) }, { device: 1 });
    openDevice({ initDevice: (o) => (seen.push(o), info) }, { pipelineSeedDir: "/elsewhere" });
    const rt = new MockRuntime();
    const init = rt.initDevice.bind(rt);
    rt.initDevice = (o?: unknown) => (seen.push(o), init());
    new HeliosBackend({ runtime: rt });
    assert.deepEqual(seen, [
      { device: 1, pipelineSeedDir: PIPELINE_SEED_DIR },
      { pipelineSeedDir: "/elsewhere" },
      { device: undefined, validation: undefined, pipelineSeedDir: PIPELINE_SEED_DIR },
    ]);
    const trace = setStartup(prev)!.trace!;
    assert.equal(trace.toJSON().pipelineCacheSource, "seed");
    assert.match(trace.table(), /\n {2}pipeline cache started from: seed /);
  } finally {
    setStartup(prev);
  }
});

test("HELIOS_STARTUP_TRACE reports where the pipeline cache started: empty on a fresh cache dir, then own", () => {
  const dir = fresh();
  const script = join(dir, "child.mjs");
  writeFileSync(script, `import { HeliosBackend } from ${JSON.stringify(resolve("dist/ts/backend.js"))};
const B = new HeliosBackend();
B.softmax(B.fromArray([1, 2, 3, 4, 5, 6], [2, 3]), -1).data;
console.log(B.getDeviceInfo().pipelineCacheSource);\n`);
  const trace = join(dir, "trace.json");
  // seeding off: a GPU host may ship a seed for its device in the package's data/pipeline-cache
  const env = { ...process.env, HELIOS_CACHE_DIR: join(dir, "cache"), HELIOS_VALIDATION: "0", HELIOS_PROGRESS: "0", HELIOS_STARTUP_TRACE: trace, HELIOS_PIPELINE_SEED: "0" };
  const sources: string[] = [];
  for (let i = 0; i < 2; i++) {
    const r = spawnSync(process.execPath, [script], { env, encoding: "utf8" });
    assert.equal(r.status, 0, r.stderr);
    const j = JSON.parse(readFileSync(trace, "utf8"));
    assert.equal(j.pipelineCacheSource, r.stdout.trim());
    sources.push(j.pipelineCacheSource);
  }
  assert.deepEqual(sources, ["empty", "own"]);
});
