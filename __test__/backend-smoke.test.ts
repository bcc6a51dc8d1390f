import { test } from "node:test";
import assert from "node:assert/strict";
import { makeBackend } from "./backend-helpers.js";

test("smoke: add on the device", () => {
  const B = makeBackend();
  const c = B.add(B.fromArray([1, 2, 3], [3]), B.fromArray([10, 20, 30], [3]));
  assert.deepEqual([...(c.data as Float32Array)], [11, 22, 33]);
  const r = B.smokeTest(1024);
  assert.equal(r.verified, true);
});
