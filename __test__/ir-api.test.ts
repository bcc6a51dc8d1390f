// The kernel API exports: disassembly, layout, error codes for malformed descriptions (strings,
// objects, cycles), and that the process stays healthy afterwards.
import { test } from "node:test";
import assert from "node:assert/strict";
import { f32, kernel, u32 } from "../ts/ir/index.js";
import { native } from "./ir-harness.js";

function sample() {
  const k = kernel("api_sample", { workgroup: ["WG"] });
  k.spec("WG", u32, 128);
  const a = k.buffer("a", f32, "read"), o = k.buffer("o", f32, "write");
  const { n, s } = k.push({ n: u32, s: f32 });
  const i = k.let(k.globalId.x, "i");
  k.if(i.lt(n), () => o.store(i, a.load(i).mul(s)));
  return k.finish();
}

const isInvalid = (e: unknown) => (e as { code?: string }).code === "ERR_HELIOS_INVALID_KERNEL";

test("kernelDisassembly and kernelLayout describe the module", () => {
  const dis: string = native.kernelDisassembly(sample());
  assert.match(dis, /OpEntryPoint GLCompute %\d+ "main"/);
  assert.match(dis, /LocalSizeId/);
  const layout = native.kernelLayout(JSON.stringify(sample()));
  assert.deepEqual(layout.bindings, ["read", "write"]);
  assert.equal(layout.pushConstantBytes, 8);
  assert.deepEqual(layout.specialization, [[0, 128]]);
});

test("malformed descriptions throw ERR_HELIOS_INVALID_KERNEL with the node path", () => {
  const bad = sample() as unknown as { body: { s: string; value?: unknown }[] };
  bad.body[0] = { s: "let", value: { op: "get", name: "i" } };
  assert.throws(() => native.kernelSpirv(bad), (e: Error) => isInvalid(e) && /api_sample: body\[0\]: missing field 'name'/.test(e.message));
  assert.throws(() => native.kernelSpirv('{"version": 1, "name": "x"'), isInvalid);
  assert.throws(() => native.kernelSpirv(JSON.stringify({ ...sample(), version: 99 })), (e: Error) => isInvalid(e) && /version 99/.test(e.message));
  const cyclic: Record<string, unknown> = { version: 1, name: "cyc" };
  cyclic.body = [cyclic];
  assert.throws(() => native.kernelSpirv(cyclic), isInvalid);
  assert.throws(() => native.kernelSpirv("[".repeat(1 << 16)), isInvalid);
  // still healthy
  assert.ok(native.kernelSpirv(sample()).length > 20);
});
