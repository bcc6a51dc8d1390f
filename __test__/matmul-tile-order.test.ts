// The grouped workgroup order of the matmul kernels (common.ts tileOrigin): for any band height
// it must visit every output tile exactly once, partial last band included.
import assert from "node:assert/strict";
import { test } from "node:test";
import { kernel, u32 } from "../ts/ir/index.js";
import { tileOrigin } from "../ts/kernels/matmul/common.js";
import { InterpRuntime } from "./support/interp-runtime.js";

function origins(nx: number, ny: number, groupRows: number): [number, number][] {
  const k = kernel(`t_tile_order_g${groupRows}`, { workgroup: [1] });
  const out = k.buffer("out", u32, "write");
  const wg = k.let(k.workgroupId, "wg");
  const { row0, col0 } = tileOrigin(k, wg, 1, 1, groupRows);
  const slot = k.let(wg.y.mul(nx).add(wg.x).mul(2), "slot");
  out.store(slot, row0);
  out.store(slot.add(1), col0);
  const rt = new InterpRuntime();
  const pipe = rt.compileKernel(k.finish());
  const buf = rt.createBuffer(nx * ny * 8);
  rt.beginBatch();
  rt.recordDispatch(pipe, [buf], [nx, ny, 1]);
  rt.submitBatch();
  const words = new Uint32Array(rt.readBuffer(buf));
  return Array.from({ length: nx * ny }, (_, i) => [words[2 * i], words[2 * i + 1]]);
}

test("tileOrigin visits every tile once for bands of 1, 4, 8, 16 rows and partial last bands", () => {
  for (const [nx, ny] of [[5, 11], [3, 16], [7, 1], [1, 9]]) {
    for (const g of [1, 4, 8, 16]) {
      const seen = new Set(origins(nx, ny, g).map(([r, c]) => `${r},${c}`));
      assert.equal(seen.size, nx * ny, `${nx}x${ny} g${g}`);
      for (let r = 0; r < ny; r++) for (let c = 0; c < nx; c++) assert.ok(seen.has(`${r},${c}`), `${nx}x${ny} g${g}: tile ${r},${c}`);
    }
  }
  // consecutive workgroups walk down a band first
  assert.deepEqual(origins(5, 11, 4).slice(0, 5), [[0, 0], [1, 0], [2, 0], [3, 0], [0, 1]]);
});
