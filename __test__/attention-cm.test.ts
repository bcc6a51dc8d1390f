// The cooperative-matrix flash attention forward (flash_fwd_cm) run by the kernel interpreter
// against naive attention: lavapipe has no cooperative matrices, so this is where its tiling,
// causal mask on diagonal tiles, online softmax across tiles and lane-pair reductions are checked.
import { test } from "node:test";
import assert from "node:assert/strict";
import { InterpRuntime } from "./support/interp-runtime.js";
import { Rng, randTensor } from "./harness.js";
import * as N from "./ref/nn.js";
import { FA_CM_ROWS, flashCmApplies, flashFwdCmKernel } from "../ts/kernels/attention-cm.js";
import { packPush } from "../ts/kernels/common.js";
import { FA_PUSH } from "../ts/kernels/attention.js";
import { fromF16Array } from "../ts/f16.js";

for (const [bh, T, D, cap] of [[1, 128, 64, 0], [2, 64, 32, 0], [1, 128, 16, 2.5]]) {
  test(`flash_fwd_cm bh=${bh} T=${T} D=${D} softCap=${cap} matches naive attention (interpreter)`, () => {
    const rng = new Rng(71 + T + D);
    const q = randTensor(rng, [bh, T, D], "f16"), k = randTensor(rng, [bh, T, D], "f16"), v = randTensor(rng, [bh, T, D], "f16");
    const rt = new InterpRuntime();
    const bufs = [q, k, v].map((t) => {
      const h = rt.createBuffer(t.td.data.byteLength);
      rt.uploadBuffer(h, t.td.data);
      return h;
    });
    const o = rt.createBuffer(bh * T * D * 2), lse = rt.createBuffer(bh * T * 4);
    const scale = 1 / Math.sqrt(D);
    const pipe = rt.compileKernel(JSON.stringify(flashFwdCmKernel({ D, softCap: cap > 0 })));
    rt.beginBatch();
    rt.recordDispatch(pipe, [...bufs, o, lse], [T / FA_CM_ROWS, bh, 1], packPush(FA_PUSH, { T, scale, cap: cap > 0 ? cap : 1 }));
    rt.submitBatch(); // the interpreter runs dispatches as they are recorded
    const got = fromF16Array(new Uint16Array(rt.readBuffer(o)));
    const gotLse = new Float32Array(rt.readBuffer(lse));
    const ref = N.attention(q.ref, k.ref, v.ref, scale, cap);
    let worst = 0;
    for (let i = 0; i < got.length; i++) worst = Math.max(worst, Math.abs(got[i] - ref.output.data[i]));
    assert.ok(worst < 1.5e-2 && got.some((x) => x !== 0), `output max abs error ${worst}`);
    let worstL = 0;
    for (let i = 0; i < gotLse.length; i++) worstL = Math.max(worstL, Math.abs(gotLse[i] - ref.lse.data[i]));
    assert.ok(worstL < 2e-3, `lse max abs error ${worstL}`);
    if (process.env.HELIOS_TEST_VERBOSE) console.log(`flash_fwd_cm errors: output ${worst}, lse ${worstL}`);
  });
}

test("flash_fwd_cm applies only to f16, T % 64 == 0, D % 16 == 0 (<= 64), coopmat with 32-wide subgroups", () => {
  const dev = { coopMatSupported: true, subgroupSize: 32 };
  assert.ok(flashCmApplies(dev, "f16", 1024, 64));
  assert.ok(!flashCmApplies(dev, "f32", 1024, 64));
  assert.ok(!flashCmApplies(dev, "f16", 1000, 64));
  assert.ok(!flashCmApplies(dev, "f16", 1024, 72));
  assert.ok(!flashCmApplies({ coopMatSupported: false, subgroupSize: 32 }, "f16", 1024, 64));
  assert.ok(!flashCmApplies({ coopMatSupported: true, subgroupSize: 64 }, "f16", 1024, 64));
});
