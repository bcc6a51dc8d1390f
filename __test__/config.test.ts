// HELIOS_* parsing in TypeScript (ts/config.ts, the matmul flags) rejects invalid values with a
// coded error naming the variable and what it accepts (issue 24 item 7: `abc` and `-1` used to
// fall back to defaults in places), and the tuning cache under HELIOS_CACHE_DIR is read and
// written like the native cache files: regular files only, capped, never through a symlink.
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { mkdtempSync, readdirSync, readFileSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, test } from "node:test";
import { readCacheFile, writeCacheFile } from "../ts/cache-file.js";
import { DEFAULT_CONFIG, readConfig } from "../ts/config.js";
import { readMatmulConfig } from "../ts/kernels/matmul/config.js";

function rejects(read: () => unknown, name: string, value: string, accepted: RegExp): void {
  assert.throws(read, (err: Error & { code?: string; variable?: string }) => {
    assert.equal(err.code, "ERR_HELIOS_INVALID_ARGUMENT", err.message);
    assert.ok(err.message.startsWith(`${name}=${value}: expected`), err.message);
    assert.match(err.message, accepted);
    return true;
  }, `${name}=${value}`);
}

test("invalid HELIOS_* values are coded errors naming the variable and the accepted range", () => {
  for (const v of ["abc", "-1", "0", "65537", "1.5", "0x10", "1e3"]) rejects(() => readConfig({ HELIOS_BATCH_SIZE: v }), "HELIOS_BATCH_SIZE", v, /from 1 to 65536/);
  for (const v of ["abc", "-1", "1000001", "1.5", "0x10"]) rejects(() => readConfig({ HELIOS_SUBMIT_EARLY_US: v }), "HELIOS_SUBMIT_EARLY_US", v, /from 0 to 1000000/);
  rejects(() => readConfig({ HELIOS_FUSION_MAX_NODES: "257" }), "HELIOS_FUSION_MAX_NODES", "257", /from 1 to 256/);
  rejects(() => readConfig({ HELIOS_FUSION: "maybe" }), "HELIOS_FUSION", "maybe", /0 or 1/);
  rejects(() => readConfig({ HELIOS_ATTN_BWD: "fast" }), "HELIOS_ATTN_BWD", "fast", /one of auto, cm, dense, flash/);
  rejects(() => readConfig({ HELIOS_MATMUL_PREPACK: "2" }), "HELIOS_MATMUL_PREPACK", "2", /0 or 1/);
  rejects(() => readConfig({ HELIOS_MULTI_TENSOR_ADAMW: "fast" }), "HELIOS_MULTI_TENSOR_ADAMW", "fast", /0 or 1/);
  rejects(() => readConfig({ HELIOS_MULTI_TENSOR_CAST: "2" }), "HELIOS_MULTI_TENSOR_CAST", "2", /0 or 1/);
  rejects(() => readMatmulConfig({ HELIOS_AUTOTUNE: "-1" }), "HELIOS_AUTOTUNE", "-1", /0 or 1/);
  rejects(() => readMatmulConfig({ HELIOS_MATMUL_STORE: "fast" }), "HELIOS_MATMUL_STORE", "fast", /wide, coopmat or staged4/);
  // valid values, unset and empty still read as before
  assert.equal(readConfig({ HELIOS_BATCH_SIZE: " 64 " }).batchSize, 64);
  assert.equal(readConfig({ HELIOS_SUBMIT_EARLY_US: "0" }).submitEarlyUs, 0);
  assert.equal(readConfig({ HELIOS_SUBMIT_EARLY_US: "250" }).submitEarlyUs, 250);
  assert.deepEqual(readConfig({ HELIOS_BATCH_SIZE: "" }), DEFAULT_CONFIG);
  assert.equal(readConfig({ HELIOS_FUSION: "off" }).fusion, false);
  assert.equal(readConfig({}).multiTensorAdamw, true);
  assert.equal(readConfig({ HELIOS_MULTI_TENSOR_ADAMW: "0" }).multiTensorAdamw, false);
  assert.equal(readConfig({}).multiTensorCast, true);
  assert.equal(readConfig({ HELIOS_MULTI_TENSOR_CAST: "0" }).multiTensorCast, false);
});

const dir = mkdtempSync(join(tmpdir(), "helios-ts-cache-"));
after(() => rmSync(dir, { recursive: true, force: true }));

test("cache files are read only when regular, not linked and under the cap", () => {
  const fifo = join(dir, "fifo.json");
  execFileSync("mkfifo", [fifo]);
  assert.equal(readCacheFile(fifo, 1 << 20), null, "a FIFO (opening it must not block)");
  const zero = join(dir, "zero.json");
  symlinkSync("/dev/zero", zero);
  assert.equal(readCacheFile(zero, 1 << 20), null, "a link to /dev/zero");
  const big = join(dir, "big.json");
  writeFileSync(big, "x".repeat(4097));
  assert.equal(readCacheFile(big, 4096), null, "over the cap");
  assert.equal(readCacheFile(big, 4097)?.length, 4097);
  assert.equal(readCacheFile(join(dir, "missing.json"), 10), null);
});

test("cache writes replace a planted symlink instead of writing through it", () => {
  const victim = join(dir, "victim.txt");
  writeFileSync(victim, "precious");
  const target = join(dir, "matmul-tune-v1.json");
  symlinkSync(victim, target);
  writeCacheFile(target, "{}");
  assert.equal(readFileSync(victim, "utf8"), "precious");
  assert.equal(readCacheFile(target, 100)?.toString(), "{}");
  assert.deepEqual(readdirSync(dir).filter((n) => n.endsWith(".tmp")), [], "no temp file left");
});
