// The on-disk VkPipelineCache: written under HELIOS_CACHE_DIR, and a corrupt or
// truncated file is ignored with a warning, never handed to the driver as-is.
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { lstatSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, symlinkSync, truncateSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, test } from "node:test";
import { addKernel } from "../lab/ir-samples.js";
import { inChild } from "./helpers.js";

const dir = mkdtempSync(join(tmpdir(), "helios-cache-test-"));
after(() => rmSync(dir, { recursive: true, force: true }));
const env = { HELIOS_CACHE_DIR: dir, HELIOS_VALIDATION: "1" };

// Creates two pipelines and runs one dispatch; fails on any validation message.
const useIt = `
  native.initDevice({ validation: true });
  const p = native.createPipeline(KERNELS.inc.spirv, KERNELS.inc.layout);
  native.createPipeline(KERNELS.axpb.spirv, KERNELS.axpb.layout);
  const b = native.createBuffer(256);
  native.uploadBuffer(b, new Uint32Array(64).fill(41));
  native.beginBatch();
  native.recordDispatch(p, [b], [1], new Uint32Array([64]));
  native.waitTimeline(native.submitBatch());
  const v = new Uint32Array(native.readBuffer(b));
  if (v.some((x) => x !== 42)) throw new Error("wrong result " + v[0]);
  const msgs = native.takeValidationMessages();
  if (msgs.length) throw new Error("validation: " + msgs.join("\\n"));
  native.destroy();`;

function cacheFiles(): string[] {
  const walk = (d: string): string[] =>
    readdirSync(d, { withFileTypes: true }).flatMap((e) => (e.isDirectory() ? walk(join(d, e.name)) : [join(d, e.name)]));
  return walk(dir);
}

test("the pipeline cache is written to HELIOS_CACHE_DIR", () => {
  const res = inChild(useIt, env);
  assert.ok(res.ok, JSON.stringify(res));
  const files = cacheFiles();
  assert.ok(files.length > 0, `no cache file in ${dir}`);
  assert.ok(files.some((f) => statSync(f).size > 0));
});

test("a corrupt cache file is ignored with a warning", () => {
  for (const f of cacheFiles()) writeFileSync(f, Buffer.from("this is not a pipeline cache, just garbage bytes".repeat(8)));
  const res = inChild(useIt, env);
  assert.ok(res.ok, JSON.stringify(res));
  assert.match(res.stderr, /cache/i, "expected a warning about the cache on stderr");
});

test("a truncated cache file (valid header, missing data) is ignored, not trusted", () => {
  inChild(useIt, env); // rewrite a valid cache first
  for (const f of cacheFiles()) {
    const bytes = readFileSync(f);
    writeFileSync(f, bytes.subarray(0, Math.max(32, bytes.length >> 1)));
  }
  const res = inChild(useIt, env);
  assert.ok(res.ok, JSON.stringify(res));
});

// The cache directory is not trusted (issue 24 item 7): each of these used to hang initDevice,
// read until out of memory, or overwrite a symlink's target.
function pipelineCacheFile(d: string): string {
  const f = readdirSync(d).find((n) => n.startsWith("pipelines-"));
  assert.ok(f, `no pipeline cache in ${d}`);
  return join(d, f);
}

function freshDir(): string {
  const d = mkdtempSync(join(tmpdir(), "helios-cache-trust-"));
  after(() => rmSync(d, { recursive: true, force: true }));
  const res = inChild(useIt, { ...env, HELIOS_CACHE_DIR: d });
  assert.ok(res.ok, JSON.stringify(res));
  return d;
}

test("a FIFO, a device file, a symlink or a huge file as the pipeline cache is skipped, never read", () => {
  const d = freshDir();
  const file = pipelineCacheFile(d);
  const plant: [string, () => void][] = [
    ["a FIFO", () => execFileSync("mkfifo", [file])],
    ["a link to /dev/zero", () => symlinkSync("/dev/zero", file)],
    ["a 4 GiB sparse file", () => truncateSync((writeFileSync(file, ""), file), 4 * 2 ** 30)],
  ];
  for (const [what, make] of plant) {
    rmSync(file, { force: true });
    make();
    const res = inChild(useIt, { ...env, HELIOS_CACHE_DIR: d }, 30_000); // a hang fails by timeout
    assert.ok(res.ok, `${what}: ${JSON.stringify(res)}`);
  }
});

test("cache writes never follow a symlink planted in the cache dir", () => {
  const d = freshDir();
  const victim = join(d, "victim.txt");
  writeFileSync(victim, "precious");
  const file = pipelineCacheFile(d);
  rmSync(file);
  symlinkSync(victim, file);
  const compile = `native.initDevice(); native.compileKernel(${JSON.stringify(JSON.stringify(addKernel()))}); native.destroy();`;
  assert.ok(inChild(compile, { HELIOS_CACHE_DIR: d }).ok);
  const spv = readdirSync(join(d, "spirv")).map((n) => join(d, "spirv", n));
  assert.ok(spv.length > 0, "the SPIR-V cache was written");
  for (const f of spv) {
    rmSync(f);
    symlinkSync(victim, f);
  }
  const res = inChild(useIt.replace("native.destroy();", "native.compileKernel(" + JSON.stringify(JSON.stringify(addKernel())) + "); native.destroy();"), { ...env, HELIOS_CACHE_DIR: d });
  assert.ok(res.ok, JSON.stringify(res));
  assert.equal(readFileSync(victim, "utf8"), "precious", "a symlink's target was overwritten");
  assert.ok(!lstatSync(file).isSymbolicLink() && statSync(file).size > 0, "the pipeline cache replaced the link");
  for (const f of spv) assert.ok(!lstatSync(f).isSymbolicLink(), `${f} replaced the link`);
  const temps = readdirSync(d).filter((n) => n.endsWith(".tmp"));
  assert.deepEqual(temps, [], "no temp files left behind");
});

test("invalid HELIOS_* values fail initDevice naming the variable and the accepted range", () => {
  const cases: [string, string, RegExp][] = [
    ["HELIOS_STAGING_MIB", "abc", /from 4 to 4096/],
    ["HELIOS_STAGING_MIB", "-1", /from 4 to 4096/],
    ["HELIOS_STAGING_MIB", "5000", /from 4 to 4096/],
    ["HELIOS_SPIN_US", "1e3", /from 0 to 1000000/],
    ["HELIOS_MAX_BINDING_BYTES", "-4", /integer from 4/],
    ["HELIOS_BARRIER", "fast", /global or buffer/],
    ["HELIOS_VALIDATION", "maybe", /0 or 1/],
    ["HELIOS_COOPMAT", "2", /0 or 1/],
    ["HELIOS_INBATCH_REUSE", "nope", /0 or 1/],
  ];
  for (const [name, value, accepted] of cases) {
    const res = inChild("native.initDevice()", { [name]: value });
    assert.equal(res.code, "ERR_HELIOS_INVALID_ARGUMENT", `${name}=${value}: ${JSON.stringify(res)}`);
    assert.ok(res.message?.includes(`initDevice: ${name}=${value}`), res.message);
    assert.match(res.message ?? "", accepted, `${name}=${value}`);
  }
  assert.ok(inChild("native.initDevice()", { HELIOS_STAGING_MIB: "8", HELIOS_BARRIER: "buffer", HELIOS_VALIDATION: "off" }).ok);
});
