// bench/flash-bwd --dq-variants (bench/flash-dq-race.ts) end to end on the kernel interpreter at a
// tiny size, so the GPU run cannot fail on what the CPU can find: the rows layout (packed qkv from
// the backend's forward, the gate's values taken back to heads), the shipped dQ kernel and
// sl-s2-w8 gated against float64, compared bit for bit, timed in turns with the shipped dK/dV
// kernel beside them, the JSON written. The runtime is the cooperative-matrix mock with made-up
// timestamps and driver statistics (a "Local Memory Size" that must not count as a spill).
import { test } from "node:test";
import assert from "node:assert/strict";
import { mkdtempSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { dqRace } from "../bench/flash-dq-race.js";
import type { ProfileEntry } from "../bench/profiling.js";
import type { Groups } from "../ts/exec/runtime.js";
import { CoopMockRuntime } from "./support/coop-mock-runtime.js";

class ProfiledMock extends CoopMockRuntime {
  private stamps: ProfileEntry[] = [];
  private profiling = false;
  private clock = 0;
  beginBatch(o?: { profile?: boolean }): void {
    this.profiling = !!o?.profile;
    this.stamps = [];
    super.beginBatch();
  }
  recordDispatch(p: number, bufs: number[], groups: Groups, push?: ArrayBufferView): void {
    super.recordDispatch(p, bufs, groups, push);
    if (!this.profiling) return;
    this.stamps.push({ label: "k", gpuNs: 1000, startNs: this.clock, endNs: this.clock + 1000 });
    this.clock += 1000;
  }
  batchProfile(): ProfileEntry[] {
    return this.stamps;
  }
  pipelineStatistics(): { name: string; value: number }[] {
    return [{ name: "Register Count", value: 128 }, { name: "Local Memory Size", value: 2 ** 36 }, { name: "Stack Size", value: 0 }];
  }
}

test("the dQ race gates, compares and times the shipped kernel and sl-s2-w8 in the rows layout (interpreter)", () => {
  const out = join(mkdtempSync(join(tmpdir(), "helios-dq-race-")), "race.json");
  const code = dqRace({
    variants: ["sl-s2-w8"], layouts: ["rows"], bh: 2, t: 128, d: 16, heads: 2, iters: 1, warmMs: 0, out,
    torchBwd: () => "no PyTorch in tests", runtime: new ProfiledMock(),
  });
  assert.equal(code, 0);
  const json = JSON.parse(readFileSync(out, "utf8"));
  assert.deepEqual(json.rows.map((x: { variant: string; status: string }) => [x.variant, x.status]), [["current", "ok"], ["sl-s2-w8", "ok"]]);
  for (const x of json.rows) {
    assert.ok(x.vsCurrent.identical, `${x.variant}: dQ is the shipped kernel's bits`);
    assert.ok(x.gateError < 2e-2, `${x.variant} gate ${x.gateError}`);
    assert.ok(x.ms > 0 && x.reps.length === 3, `${x.variant} timed`);
    assert.equal(x.registers, 128);
    assert.equal(x.spills, 0);
  }
  assert.equal(json.rows[0].speedup, 1);
  assert.equal(json.dkdv.rows.kernel, "flash_bwd_dkdv_cm_f16_d16_w8_s2_rv0_sl_rows");
  assert.equal(json.torchNote, "no PyTorch in tests");
});
