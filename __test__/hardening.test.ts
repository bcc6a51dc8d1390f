// Issue 24 regressions in the compiler and the bounds story (items 3, 4, 6), on lavapipe under
// the validation layer: raw SPIR-V whose layout understates its access, the unroll reproducer,
// the documented nesting depth, and buffer robustness (HELIOS_ROBUSTNESS).
import { test } from "node:test";
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { fileURLToPath } from "node:url";
import { assertThrowsCode, bufferWith, readU32, rt, runBatch, useDevice } from "./helpers.js";
import { KERNELS } from "./kernels/index.js";
import { native } from "../ts/native.js";

useDevice();

const lit = (v: number) => ({ op: "lit", t: "u32", v });
const gid = { op: "swz", a: { op: "builtin", name: "global_id" }, c: "x" };

test("a layout declaring 'read' for a binding the shader writes is refused (the tracker would omit barriers)", () => {
  const k = KERNELS.axpb; // writes binding 1
  assertThrowsCode(() => rt.createPipeline(k.spirv, { ...k.layout, bindings: ["read", "read"] }), "ERR_HELIOS_INVALID_KERNEL", {
    mentions: 'writes binding 1, which the layout declares "read"',
  });
  // Declared write-only while the shader reads it (NonWritable, loads): refused too.
  assertThrowsCode(() => rt.createPipeline(k.spirv, { ...k.layout, bindings: ["write", "write"] }), "ERR_HELIOS_INVALID_KERNEL", {
    mentions: 'reads binding 0, which the layout declares "write"',
  });
  rt.destroyPipeline(rt.createPipeline(k.spirv, { ...k.layout, bindings: ["readwrite", "readwrite"] }));
});

test("the OpAccessChain mutant of the issue (an index past its struct) is refused before the driver", () => {
  // One word changed: the constant that indexes member 2 of axpb's 3-member push-constant block
  // becomes 3. This passed the old check and segfaulted lavapipe in vkCreateComputePipelines.
  const words = new Uint32Array(KERNELS.axpb.spirv);
  let patched = 0;
  for (let at = 5; at < words.length; ) {
    const count = words[at] >>> 16;
    if ((words[at] & 0xffff) === 43 && count === 4 && words[at + 3] === 2) {
      words[at + 3] = 3; // OpConstant %uint 2 -> 3
      patched++;
    }
    at += count;
  }
  assert.equal(patched, 1);
  assertThrowsCode(() => rt.createPipeline(words, KERNELS.axpb.layout), "ERR_HELIOS_INVALID_ARGUMENT", {
    mentions: "member 3 of",
  });
});

test("for 0..1000000 with unroll: true is a coded error, at once (it grew past 7 GB)", () => {
  const desc = {
    version: 1, name: "unroll_bomb", workgroup: [64],
    bindings: [{ name: "a", elem: "u32", access: "readwrite" }],
    body: [{ s: "for", var: "i", from: lit(0), to: lit(1_000_000), unroll: true, body: [
      { s: "store", b: 0, idx: gid, value: { op: "get", name: "i" } },
    ] }],
  };
  assert.ok(JSON.stringify(desc).length < 400);
  const t0 = performance.now();
  assertThrowsCode(() => native.compileKernel(desc), "ERR_HELIOS_INVALID_KERNEL", { mentions: "1000000 iterations cannot be unrolled" });
  assert.ok(performance.now() - t0 < 1000, "the refusal must not compile anything");
});

function nestedIfs(depth: number) {
  let body: unknown[] = [{ s: "store", b: 0, idx: gid, value: { op: "add", a: { op: "load", b: 0, idx: gid }, b: lit(1) } }];
  for (let k = 0; k < depth; k++) {
    body = [{ s: "if", cond: { op: "lt", a: gid, b: lit(1000 + k) }, then: body }];
  }
  return { version: 1, name: "nested", workgroup: [64], bindings: [{ name: "a", elem: "u32", access: "readwrite" }], body };
}

test("if nesting works to the documented 64 levels; 65 is a coded error", () => {
  const p = native.compileKernel(nestedIfs(64));
  const buf = bufferWith(new Uint32Array(64).fill(7));
  runBatch(() => rt.recordDispatch(p, [buf], [1], new Uint8Array(0)));
  assert.deepEqual([...readU32(buf)], new Array(64).fill(8));
  rt.destroyBuffer(buf);
  assertThrowsCode(() => native.compileKernel(nestedIfs(65)), "ERR_HELIOS_INVALID_KERNEL", { mentions: "nested more than 64 levels" });
});

test("robustness is on by default where the device has it (lavapipe does)", () => {
  assert.equal(native.getDeviceInfo().robustness, "robustBufferAccess");
});

test("with robustness on, writes far past a binding leave the neighbouring buffer intact", () => {
  // Each invocation writes a[i] for i far past the 16-byte buffer.
  const desc = {
    version: 1, name: "oob_write", workgroup: [64],
    bindings: [{ name: "a", elem: "u32", access: "write" }],
    body: [{ s: "store", b: 0, idx: { op: "mul", a: gid, b: lit(16) }, value: lit(0xdead) }],
  };
  const p = native.compileKernel(desc);
  const small = rt.createBuffer(16);
  const neighbour = bufferWith(new Uint32Array(4096).fill(0x5eed));
  runBatch(() => rt.recordDispatch(p, [small], [64], new Uint8Array(0)));
  assert.ok(readU32(neighbour).every((v) => v === 0x5eed), "a write past the binding reached another buffer");
  assert.equal(readU32(small)[0], 0xdead);
  rt.destroyBuffer(small);
  rt.destroyBuffer(neighbour);
});

const child = fileURLToPath(new URL("./support/robustness-child.js", import.meta.url));

function childInfo(value: string): { robustness?: string; code?: string; message?: string } {
  const r = spawnSync(process.execPath, [child], { encoding: "utf8", env: { ...process.env, HELIOS_ROBUSTNESS: value } });
  assert.equal(r.status, 0, r.stderr);
  const out = JSON.parse(r.stdout.trim()) as { robustness?: string; code?: string; message?: string; messages?: string[] };
  assert.deepEqual(out.messages ?? [], [], `validation messages with HELIOS_ROBUSTNESS=${value}`);
  return out;
}

test("HELIOS_ROBUSTNESS switches robustness at device creation; bad values name the variable", () => {
  assert.equal(childInfo("0").robustness, "off");
  assert.equal(childInfo("1").robustness, "robustBufferAccess");
  assert.match(childInfo("2").robustness ?? "", /^robustBufferAccess2?$/);
  const bad = childInfo("abc");
  assert.equal(bad.code, "ERR_HELIOS_INVALID_ARGUMENT");
  assert.match(bad.message ?? "", /HELIOS_ROBUSTNESS=abc/);
});
