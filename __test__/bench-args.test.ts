import assert from "node:assert/strict";
import { test } from "node:test";
import { ArgError, parseBenchArgs, parseShape, shapeName } from "../bench/args.js";

test("parses the documented command line", () => {
  const o = parseBenchArgs([
    "--suite=cuda", "--iters=40", "--warmup=8", "--dtype=bfloat16",
    "--shapes=2048x2048x2048,17x33x65", "--check=true", "--checkShape=384x384x384",
    "--out=perf/run.json", "--plot=out.svg",
  ]);
  assert.equal(o.iters, 40);
  assert.equal(o.warmup, 8);
  assert.equal(o.dtype, "bfloat16");
  assert.deepEqual(o.shapes, [{ m: 2048, n: 2048, k: 2048 }, { m: 17, n: 33, k: 65 }]);
  assert.equal(o.check, true);
  assert.deepEqual(o.checkShape, { m: 384, n: 384, k: 384 });
  assert.equal(o.out, "perf/run.json");
  assert.equal(o.plot, "out.svg");
  assert.equal(o.repeats, 3);
});

test("space-separated values, aliases, bare flags", () => {
  const o = parseBenchArgs(["--dtype", "f32", "--shapes", "512", "--check", "false", "--quiet", "--torch=0"]);
  assert.equal(o.dtype, "float32");
  assert.deepEqual(o.shapes, [{ m: 512, n: 512, k: 512 }]);
  assert.equal(o.check, false);
  assert.equal(o.quiet, true);
  assert.equal(o.torch, false);
});

test("defaults", () => {
  const o = parseBenchArgs([]);
  assert.equal(o.dtype, "float16");
  assert.equal(o.check, true);
  assert.equal(o.shapes.length, 3);
  assert.equal(o.warmMs, 400);
  assert.equal(o.rest, 0);
});

test("sustained load and rest between repeats", () => {
  const o = parseBenchArgs(["--warmMs=0", "--rest=2.5"]);
  assert.equal(o.warmMs, 0);
  assert.equal(o.rest, 2.5);
  assert.equal(parseBenchArgs(["--warm-ms", "150"]).warmMs, 150);
  for (const bad of [["--rest=-1"], ["--rest=abc"], ["--rest="], ["--rest=601"], ["--warmMs=-5"], ["--warmMs=1.5"]]) {
    assert.throws(() => parseBenchArgs(bad), (e: unknown) => e instanceof ArgError && e.message.includes(bad[0].split("=")[0]), bad.join(" "));
  }
});

test("rejects bad input with ArgError", () => {
  for (const bad of [["--suite=ops"], ["--iters=0"], ["--dtype=int8"], ["--shapes=12x"], ["--shapes=0x1x1"], ["--nope=1"], ["positional"], ["--check=maybe"], ["--dtype=float32", "--accF16"], ["--epilogue=tanh"]]) {
    assert.throws(() => parseBenchArgs(bad), ArgError, bad.join(" "));
  }
});

test("shape helpers round-trip", () => {
  assert.equal(shapeName(parseShape("17x33x65")), "17x33x65");
  assert.equal(shapeName(parseShape("64")), "64x64x64");
});
