// bench/sass.py without a GPU: kernel objects are found in a synthetic driver cache (zstd frames
// between entry headers, an object that is not a kernel, a code section with and without the
// 8-byte prefix), and the summary counts a synthetic listing's instructions and picks its innermost
// math loop. nvdisasm itself runs only on the GPU host (bench/gpu-host.sh sass).
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { mkdirSync, mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { test } from "node:test";
import { fileURLToPath } from "node:url";

const script = fileURLToPath(new URL("../../bench/sass.py", import.meta.url));
const python = (args: string[], input?: string) => spawnSync("python3", args, { encoding: "utf8", input });

// Writes <dir>/GLCache/a/b/cache.bin: a header, then three zstd frames (kernel "k_plain" with its
// code at the section offset, a non-kernel object, kernel "k_prefixed" whose section opens with
// 8 bytes before the code), each preceded by a few bytes of entry header, one of them holding the
// zstd magic.
const FIXTURE = String.raw`
import ctypes, ctypes.util, os, struct, sys
lib = ctypes.CDLL(ctypes.util.find_library("zstd") or "libzstd.so.1")
lib.ZSTD_compress.restype = ctypes.c_size_t
def pack(data):
    out = ctypes.create_string_buffer(len(data) + 1024)
    n = lib.ZSTD_compress(out, ctypes.c_size_t(len(out)), data, ctypes.c_size_t(len(data)), 3)
    return out.raw[:n]
def word(i):  # a plausible SASS word: opcode bytes, then scheduling bits 0x0f, 0x00 at the top
    return bytes([i & 255, 0x79, i >> 8]) + bytes(10) + bytes([0xe2, 0x0f, 0x00])
def kernel(name, n, prefix):
    code = b"".join(word(i) for i in range(n))
    body = bytes(prefix) + code
    offset = 0x100
    head = bytearray(b"NVDANVVMNVuc" + bytes(offset - 12))
    struct.pack_into("<III", head, 0x48, 1, len(body), offset)
    return bytes(head) + body + b"\0" + name.encode() + b"\0", code
d = os.path.join(sys.argv[1], "GLCache", "a", "b")
os.makedirs(d)
plain, plain_code = kernel("k_plain", 5, 0)
pre, pre_code = kernel("k_prefixed", 7, 8)
blob = b"CDVN" + bytes(60)
for obj in (plain, b"\x68\x03\x00\x00\x7fELF" + bytes(40), pre):
    blob += bytes(12) + pack(obj)
# an entry header holding the magic by chance: not a frame, skipped
blob = blob.replace(pack(pre), b"\x28\xb5\x2f\xfd" + bytes(8) + pack(pre))
open(os.path.join(d, "cache.bin"), "wb").write(blob)
open(os.path.join(sys.argv[1], "k_plain.expect"), "wb").write(plain_code)
open(os.path.join(sys.argv[1], "k_prefixed.expect"), "wb").write(pre_code)
`;

test("bench/sass.py extract: kernel objects and their code from a driver cache", () => {
  const dir = mkdtempSync(join(tmpdir(), "helios-sass-"));
  const fixture = python(["-", dir], FIXTURE);
  assert.equal(fixture.status, 0, fixture.stderr);
  const out = join(dir, "out");
  const r = python([script, "extract", join(dir, "GLCache"), out]);
  assert.equal(r.status, 0, r.stderr + r.stdout);
  assert.match(r.stdout, /k_plain: 80 bytes of code/);
  assert.match(r.stdout, /k_prefixed: 112 bytes of code/);
  for (const k of ["k_plain", "k_prefixed"]) {
    assert.deepEqual(readFileSync(join(out, `${k}.code`)), readFileSync(join(dir, `${k}.expect`)), k);
  }
  const empty = python([script, "extract", join(dir, "out"), join(dir, "none")]);
  assert.notEqual(empty.status, 0, "a directory without kernel objects is an error");
  assert.match(empty.stderr, /no kernel objects/);
});

test("bench/sass.py summary: instruction mix and the innermost math loop", () => {
  const dir = mkdtempSync(join(tmpdir(), "helios-sass-"));
  mkdirSync(join(dir, "s"));
  const lines = [
    "S2R R0, SR_TID.X", // 0x00
    "MOV R1, RZ", // 0x10: outer loop starts here
    "FFMA R2, R3, R4, R2", // 0x20: inner loop starts here
    "FFMA R5, R3.reuse, R4, R5",
    "LDS.128 R8, [R0]",
    "@P0 BRA 0x20", // 0x50: inner back edge
    "IADD3 R1, R1, 0x1, RZ",
    "HMMA.16816.F32 R8, R4, R6, R8",
    "@!P1 BRA 0x10", // 0x80: outer back edge (more math, but it holds the inner loop)
    "EXIT",
  ];
  const listing = lines.map((l, i) => `        /*${(i * 16).toString(16).padStart(4, "0")}*/                   ${l} ;`).join("\n");
  writeFileSync(join(dir, "s", "k.sass"), `\t.text.k:\n${listing}\n`);
  const json = join(dir, "summary.json");
  const r = python([script, "summary", join(dir, "s"), `--json=${json}`]);
  assert.equal(r.status, 0, r.stderr + r.stdout);
  const [row] = JSON.parse(readFileSync(json, "utf8")) as { kernel: string; instructions: number; mix: Record<string, number>; loop: { start: number; end: number; instructions: number; math: number; mix: Record<string, number> } }[];
  assert.equal(row.kernel, "k");
  assert.equal(row.instructions, 10);
  assert.deepEqual(row.mix, { FFMA: 2, BRA: 2, S2R: 1, MOV: 1, LDS: 1, IADD3: 1, HMMA: 1, EXIT: 1 });
  assert.deepEqual([row.loop.start, row.loop.end, row.loop.instructions, row.loop.math], [0x20, 0x50, 4, 2]);
  assert.deepEqual(row.loop.mix, { FFMA: 2, LDS: 1, BRA: 1 });
  assert.match(r.stdout, /loop 0x20-0x50 \(4, 50% math\)/);
});
