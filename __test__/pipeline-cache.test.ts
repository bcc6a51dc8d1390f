// The on-disk VkPipelineCache: written under HELIOS_CACHE_DIR, and a corrupt or
// truncated file is ignored with a warning, never handed to the driver as-is.
import assert from "node:assert/strict";
import { mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, test } from "node:test";
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
