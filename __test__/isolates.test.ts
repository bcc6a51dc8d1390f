// One device per process, made explicit (issue 24 item 5): a worker_thread isolate that uses the
// addon while another thread owns the device gets ERR_HELIOS_ISOLATE (it used to share the
// owner's device and open batch, and its destroy() killed the owner's handles); a worker may own
// the device once the main thread gave it up, and its exit frees it; compiles racing destroy() on
// another thread stay safe; processes that exit with work in flight exit cleanly.
import assert from "node:assert/strict";
import { test } from "node:test";
import { Worker } from "node:worker_threads";
import { addKernel } from "../lab/ir-samples.js";
import {
  assertArrayEqual, assertNoValidationMessages, assertThrowsCode, bufferWith, forgetPipelines, pipeline, randomU32,
  readU32, rng, rt, runBatch, useDevice,
} from "./helpers.js";
import { push } from "./kernels/index.js";
import { exitStorm } from "./support/exit-storm.js";

useDevice();
const ISOLATE = "ERR_HELIOS_ISOLATE";
const nativeUrl = new URL("../ts/native.js", import.meta.url).href;

interface WorkerReply {
  [key: string]: unknown;
}

/**
 * Runs `body` (an async function body with `native`, `data` and `post` in scope) in a
 * worker_thread; resolves with every message it posted once it exits.
 */
function inWorker(body: string, data: unknown = null, onMessage?: (m: WorkerReply, w: Worker) => void): Promise<WorkerReply[]> {
  const src = `
    const { workerData, parentPort } = require("node:worker_threads");
    const post = (m) => parentPort.postMessage(m);
    const codeOf = (f) => { try { f(); return "ok"; } catch (e) { return e.code ?? String(e); } };
    const next = () => new Promise((r) => parentPort.once("message", r));
    import(workerData.nativeUrl).then(async ({ native }) => {
      const data = workerData.data;
      ${body}
    }).catch((e) => post({ fatal: String(e && e.stack || e) }));`;
  return new Promise((resolve, reject) => {
    const w = new Worker(src, { eval: true, workerData: { nativeUrl, data } });
    const got: WorkerReply[] = [];
    w.on("message", (m: WorkerReply) => {
      if (m.fatal) reject(new Error(`worker: ${String(m.fatal)}`));
      got.push(m);
      onMessage?.(m, w);
    });
    w.on("error", reject);
    w.on("exit", () => resolve(got));
  });
}

test("a worker_thread gets ERR_HELIOS_ISOLATE while the main thread owns the device", async () => {
  const u = randomU32(64, rng(2401));
  const h = bufferWith(u);
  const [codes] = await inWorker(`
    post({
      createBuffer: codeOf(() => native.createBuffer(64)),
      readBuffer: codeOf(() => native.readBuffer(data.h)),
      beginBatch: codeOf(() => native.beginBatch()),
      getDeviceInfo: codeOf(() => native.getDeviceInfo()),
      initDevice: codeOf(() => native.initDevice()),
      compileKernel: codeOf(() => native.compileKernel(data.desc)),
      destroy: codeOf(() => native.destroy()),
    });`, { h, desc: JSON.stringify(addKernel()) });
  for (const [call, code] of Object.entries(codes)) assert.equal(code, ISOLATE, `${call} in the worker`);
  // the main thread's device, handles and batch are untouched
  assertArrayEqual(readU32(h), u, "the main thread's buffer after the worker's calls");
  runBatch(() => rt.recordDispatch(pipeline("inc"), [h], [1], push([["u", 64]])));
  assertArrayEqual(readU32(h), u.map((v) => v + 1), "a dispatch after the worker's destroy()");
  rt.destroyBuffer(h);
});

test("a worker may own the device after the main thread destroys it; its exit frees the device", async () => {
  rt.destroy();
  forgetPipelines();
  let mainSaw: string | undefined;
  const replies = await inWorker(`
    native.initDevice({ validation: true });
    const h = native.createBuffer(256);
    native.uploadBuffer(h, new Uint32Array(64).fill(7));
    const ok = new Uint32Array(native.readBuffer(h)).every((v) => v === 7);
    native.beginBatch(); // left open: the exit hook must clean up after it
    post({ owning: true, ok });
    await next();
    post({ messages: native.takeValidationMessages() });
    // exits without destroy()`, null, (m, w) => {
    if (m.owning) {
      try {
        rt.createBuffer(64);
        mainSaw = "ok";
      } catch (e) {
        mainSaw = (e as { code?: string }).code;
      }
      w.postMessage("go");
    }
  });
  assert.equal(replies[0].ok, true, "the worker's own device works");
  assert.equal(mainSaw, ISOLATE, "the main thread while the worker owns the device");
  assert.deepEqual(replies[1].messages, [], "validation messages in the worker");
  rt.initDevice({ validation: true }); // the worker's env cleanup hook released it
  const u = randomU32(16, rng(2402));
  const h = bufferWith(u);
  assertArrayEqual(readU32(h), u, "the main thread's device after the worker exited");
  rt.destroyBuffer(h);
});

test("compileKernel on a worker racing destroy() + initDevice() on the main thread stays safe", async () => {
  const desc = addKernel();
  let stop = false;
  const worker = inWorker(`
    const seen = {};
    for (let i = 0; i < 400; i++) {
      const c = codeOf(() => native.compileKernel(JSON.stringify({ ...data.desc, name: "race_" + i })));
      seen[c] = (seen[c] ?? 0) + 1;
    }
    post(seen);`, { desc }).finally(() => (stop = true));
  let cycles = 0;
  while (!stop) {
    rt.destroy();
    forgetPipelines();
    rt.initDevice({ validation: true });
    runBatch(() => rt.recordDispatch(pipeline("noop"), [bufferWith(new Uint32Array(4))], [1], push([["u", 0]])));
    cycles++;
    await new Promise((r) => setImmediate(r));
  }
  const [seen] = await worker;
  for (const code of Object.keys(seen)) assert.ok([ISOLATE, "ERR_HELIOS_DESTROYED"].includes(code), `worker compileKernel: ${code}`);
  assert.ok(cycles > 0);
  assertNoValidationMessages("after the race");
});

test("processes exiting with GPU work in flight exit cleanly and save the pipeline cache", async () => {
  // The GPU host runs 1000: `node dist/__test__/support/exit-storm.js 1000`.
  const { failures, cacheSaved } = await exitStorm(24, 2);
  assert.deepEqual(failures, []);
  assert.ok(cacheSaved, "the exit hooks drain the queue and save the pipeline cache");
});
