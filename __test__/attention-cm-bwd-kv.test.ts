// The dK/dV kernel of the tensor-core flash attention backward (ts/kernels/attention-cm-bwd-kv.ts):
// its f16 forms run by the kernel interpreter against float64 gradients, and which form a problem
// gets. Each problem of BWD_CASES (support/attn-bwd-case.ts: T = 64 … 256, D = 16 … 64, both layouts,
// softCap, the shared-memory P/dS path) runs every f16 form that serves its T — sl always, w8 too
// where T % 128 == 0 (sl serves those where w8's shared memory does not fit) — and their dK and dV
// must agree bit for bit (same products, same order). The split forms (x3w8, x3sl):
// attention-cm-x3.test.ts. Each description also goes through the native validator and assembler
// when the addon is built (InterpRuntime.compileKernel).
import { test } from "node:test";
import assert from "node:assert/strict";
import {
  FLASH_BWD_DKDV, flashBwdDkDvCmKernel, flashBwdDkDvRows, flashBwdDkDvSharedBytes, pickFlashBwdDkDv, type FlashBwdDkDvForm,
} from "../ts/kernels/attention-cm-bwd-kv.js";
import { flashBwdDqCmKernel, flashBwdDqCmSharedBytes } from "../ts/kernels/attention-cm-bwd.js";
import type { KernelDesc } from "../ts/ir/index.js";
import { BWD_CASES, bwdSetup, gradError, type BwdCase } from "./support/attn-bwd-case.js";

const DEV = { coopMatSupported: true, subgroupSize: 32, maxSharedMemoryBytes: 48 * 1024 };

/** dK and dV (f16 bits) of `form` on case `c`, each checked against float64. */
function run(form: FlashBwdDkDvForm, c: BwdCase): Uint16Array[] {
  const { bh, T, D } = c;
  const { rt, ins, ref, out, push, cap } = bwdSetup(419, c);
  const [dk, dv] = c.rows?.packed ? Array(2).fill(out()) : [out(), out()];
  const desc = flashBwdDkDvCmKernel({ D, form, pShared: c.pShared, softCap: cap > 0, ...(c.rows ? { layout: "rows" } : {}) });
  rt.beginBatch();
  rt.recordDispatch(rt.compileKernel(JSON.stringify(desc)), [...ins, dk, dv], [T / flashBwdDkDvRows(form), bh, 1], push);
  rt.submitBatch(); // the interpreter runs dispatches as they are recorded
  for (const [p, name, h, want] of [[1, "dK", dk, ref.dK], [2, "dV", dv, ref.dV]] as const) {
    const { got, worst, scaleRef } = gradError(rt, h, want, c, p);
    // f16 operands (P, dS rounded as FlashAttention rounds them) and an f16 result
    assert.ok(worst <= 4e-3 * Math.max(1, scaleRef), `${desc.name} ${JSON.stringify(c)} ${name}: max abs error ${worst} (largest |ref| ${scaleRef})`);
    assert.ok(got.some((x) => x !== 0), `${desc.name} ${name}: all zeros`);
  }
  return [...new Set([dk, dv])].map((h) => new Uint16Array(rt.readBuffer(h)));
}

for (const c of BWD_CASES) {
  const forms: FlashBwdDkDvForm[] = c.T % 128 === 0 ? ["w8", "sl"] : ["sl"];
  test(`dK/dV ${forms.join(" and ")} ${JSON.stringify(c)} match float64 gradients${forms.length > 1 ? " and each other bit for bit" : ""} (interpreter)`, () => {
    const [first, ...rest] = forms.map((f) => run(f, c));
    rest.forEach((r, i) => r.forEach((x, b) => assert.ok(x.every((bits, e) => bits === first[b][e]), `${forms[i + 1]} differs from ${forms[0]}`)));
  });
}

test("pickFlashBwdDkDv: w8 where T % 128 == 0 and it fits, else sl (f16; x3w8 and x3sl likewise for f32); null where no form serves", () => {
  for (const D of [16, 32, 48, 64]) {
    assert.equal(pickFlashBwdDkDv(DEV, "f16", 1024, D), "w8", `D=${D}`);
    assert.equal(pickFlashBwdDkDv(DEV, "f16", 128, D), "w8", `D=${D}`);
    assert.equal(pickFlashBwdDkDv(DEV, "f16", 960, D), "sl", `D=${D}`);
    assert.equal(pickFlashBwdDkDv(DEV, "f16", 64, D), "sl", `D=${D}`);
    assert.equal(pickFlashBwdDkDv(DEV, "f32", 1024, D), "x3w8", `D=${D}`);
    assert.equal(pickFlashBwdDkDv(DEV, "f32", 192, D), "x3sl", `D=${D}`);
  }
  assert.equal(pickFlashBwdDkDv(DEV, "f16", 1000, 64), null);
  assert.equal(pickFlashBwdDkDv(DEV, "f32", 96, 64), null);
  assert.equal(pickFlashBwdDkDv(DEV, "f16", 1024, 72), null);
  assert.equal(pickFlashBwdDkDv(DEV, "f16", 1024, 80), null);
  assert.equal(pickFlashBwdDkDv(DEV, "bf16", 1024, 64), null);
  assert.equal(pickFlashBwdDkDv({ ...DEV, coopMatSupported: false }, "f16", 1024, 64), null);
  assert.equal(pickFlashBwdDkDv({ ...DEV, subgroupSize: 64 }, "f16", 1024, 64), null);
  // D = 64: w8 needs 42 KiB (two stages of Q/dO), sl 29 KiB, x3 28 KiB
  assert.equal(pickFlashBwdDkDv({ ...DEV, maxSharedMemoryBytes: 40 * 1024 }, "f16", 1024, 64), "sl");
  assert.equal(pickFlashBwdDkDv({ ...DEV, maxSharedMemoryBytes: 40 * 1024 }, "f16", 1024, 32), "w8");
  assert.equal(pickFlashBwdDkDv({ ...DEV, maxSharedMemoryBytes: 28 * 1024 }, "f16", 1024, 64), null);
  // x3w8 needs 30.25 KiB at D = 64 (one stage of four hi/lo tiles, eight subgroups' scratch), x3sl 28
  assert.equal(pickFlashBwdDkDv({ ...DEV, maxSharedMemoryBytes: 30 * 1024 }, "f32", 1024, 64), "x3sl");
  assert.equal(pickFlashBwdDkDv({ ...DEV, maxSharedMemoryBytes: 28 * 1024 }, "f32", 1024, 64), "x3sl");
  assert.equal(pickFlashBwdDkDv({ ...DEV, maxSharedMemoryBytes: 27 * 1024 }, "f32", 1024, 64), null);
  assert.equal(flashBwdDkDvRows("w8"), 128);
  assert.equal(flashBwdDkDvRows("sl"), 64);
  assert.equal(flashBwdDkDvRows("x3w8"), 128);
  assert.equal(flashBwdDkDvRows("x3sl"), 64);
});

const ELEM_BYTES: Record<string, number> = { f32: 4, f16: 2, bf16: 2, u32x4: 16 };
const declared = (d: KernelDesc) => (d.shared ?? []).reduce((a, s) => a + s.len * ELEM_BYTES[s.elem], 0);

test("the shared-memory sizes applies() checks are what the kernels declare, every form, D and option", () => {
  const seen = new Set<string>();
  for (const D of [16, 32, 48, 64]) for (const pShared of [false, true]) for (const softCap of [false, true]) for (const layout of ["bhtd", "rows"] as const) {
    const lv = layout === "rows" ? { layout } : {};
    for (const form of FLASH_BWD_DKDV) {
      const desc = flashBwdDkDvCmKernel({ D, form, pShared, softCap, ...lv });
      assert.equal(declared(desc), flashBwdDkDvSharedBytes({ D, form }), desc.name);
      assert.ok(!seen.has(desc.name), `${desc.name} named twice`);
      seen.add(desc.name);
    }
    for (const split of [false, true]) {
      const desc = flashBwdDqCmKernel({ D, split, pShared, softCap, ...lv });
      assert.equal(declared(desc), flashBwdDqCmSharedBytes({ D, split }), desc.name);
    }
  }
  assert.deepEqual(
    FLASH_BWD_DKDV.map((form) => flashBwdDkDvCmKernel({ D: 64, form, layout: "rows" }).name),
    ["flash_bwd_dkdv_cm_f16_d64_w8_s2_rv0_sl_rows", "flash_bwd_dkdv_cm_f16_d64_w4_s1_sl_rows", "flash_bwd_dkdv_cm_x3_d64_w8_s1_rv0_sl_rows",
      "flash_bwd_dkdv_cm_x3_d64_w4_s1_sl_rows"],
  );
});
