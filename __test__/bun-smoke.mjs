// Bun smoke test (plain JS, no build step): the addon loads under Bun, finds a device,
// runs one dispatch, and the result matches the CPU. Run: npx bun __test__/bun-smoke.mjs
import { createRequire } from "node:module";
// spirv.ts is plain JS apart from its extension, and Bun imports .ts directly.
import { inc } from "./kernels/spirv.ts";

const require = createRequire(import.meta.url);
const native = require("../native/index.cjs");

function fail(msg) {
  console.error(`bun-smoke: FAIL: ${msg}`);
  process.exit(1);
}

const runtime = typeof Bun !== "undefined" ? `bun ${Bun.version}` : `node ${process.version}`;
const info = native.initDevice({ validation: true });
const n = 1000;
const data = new Uint32Array(n);
for (let i = 0; i < n; i++) data[i] = (Math.imul(i + 1, 2654435761) >>> 1) + 1; // never zero

const buf = native.createBuffer(data.byteLength);
native.uploadBuffer(buf, data);
const pipe = native.createPipeline(inc, { bindings: ["readwrite"], pushConstantBytes: 4, label: "inc" });
native.beginBatch();
native.recordDispatch(pipe, [buf], [Math.ceil(n / 64)], new Uint32Array([n]));
native.waitTimeline(native.submitBatch());
const out = new Uint32Array(native.readBuffer(buf));
for (let i = 0; i < n; i++) {
  if (out[i] !== ((data[i] + 1) >>> 0)) fail(`element ${i}: got ${out[i]}, expected ${data[i] + 1}`);
}
const messages = native.takeValidationMessages();
if (messages.length > 0) fail(`validation messages:\n${messages.join("\n")}`);
native.destroyPipeline(pipe);
native.destroyBuffer(buf);
native.destroy();
console.log(`bun-smoke: ok (${runtime}, ${info.deviceName})`);
