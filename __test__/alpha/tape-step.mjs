// Alpha's autograd on Helios the way Alpha's trainer drives it (packages/train/src/trainer.ts):
// gptForward on a Tape, loss.data kept as `lossDataRef`, Tape.backward with releaseGpuTensor as
// the release callback (which releases the loss too), the loss read after backward, a gradient
// norm, tape.clear(release), AdamW.step over the parameter map, the gradients released, flush.
// Three steps on Helios and on Alpha's CpuRefBackend from the same initial weights; losses and
// gradient norms must agree. Test code of scripts/test-alpha.sh, run against a built copy of Alpha:
//   node __test__/alpha/tape-step.mjs <alpha-copy-dir>
import { createRequire } from "node:module";
import path from "node:path";
import { pathToFileURL } from "node:url";

const alphaDir = path.resolve(process.argv[2] ?? "");
const alphaRequire = createRequire(path.join(alphaDir, "package.json"));
const load = (name) => import(pathToFileURL(alphaRequire.resolve(name)).href);

const [{ SeededRng }, { CpuRefBackend }, { Tape }, { initGPT, gptForward, collectParams }, { AdamW }, helios] =
  await Promise.all(["@alpha/core", "@alpha/tensor", "@alpha/autograd", "@alpha/model", "@alpha/train", "@alpha/helios"].map(load));

// One head: Alpha's flash-attention path (taken by backends with flashAttention) reshapes
// [B, T, H*D] to [B*H, T, D] without a transpose, a different function from the standard path
// cpu_ref takes unless H = 1 (issue 23).
const config = { vocabSize: 37, blockSize: 16, nLayer: 2, nEmbd: 32, nHead: 1, dropout: 0, ffnActivation: "gelu" };
const B = 3;
const T = 13; // odd on purpose
const STEPS = 3;

function batch() {
  const inputs = new Int32Array(B * T);
  const targets = new Int32Array(B * T);
  for (let i = 0; i < B * T; i++) {
    inputs[i] = (i * 7 + 3) % config.vocabSize;
    targets[i] = (i * 11 + 5) % config.vocabSize;
  }
  return {
    inputs: { shape: [B, T], dtype: "i32", data: inputs },
    targets: { shape: [B, T], dtype: "i32", data: targets },
  };
}

function run(backend) {
  const release = typeof backend.releaseGpuTensor === "function" ? (td) => backend.releaseGpuTensor(td) : undefined;
  const flush = typeof backend.flush === "function" ? () => backend.flush() : () => {};
  const params = initGPT(config, backend, new SeededRng(1234));
  const vars = collectParams(params);
  const names = [...vars.keys()];
  const paramData = new Map(names.map((n) => [n, vars.get(n).data]));
  const optimizer = new AdamW(backend, { lr: 1e-2, weightDecay: 0.01 });
  const tape = new Tape();
  const out = [];
  for (let step = 0; step < STEPS; step++) {
    const { inputs, targets } = batch();
    const { loss } = gptForward(config, params, backend, tape, inputs, targets, true, false, false, undefined, release);
    const lossDataRef = loss.data; // trainer.ts: read after backward, which releases it
    tape.backward(loss, backend, release);
    const lossVal = lossDataRef.data[0];
    let sumSq = 0;
    const grads = new Map();
    for (const n of names) {
      const g = vars.get(n).grad;
      if (!g) continue;
      grads.set(n, g);
      const g2 = backend.mul(g, g);
      const s = backend.sum(g2);
      sumSq += s.data[0];
      if (release) { release(g2); release(s); }
    }
    tape.clear(release);
    if (release) { release(inputs); release(targets); }
    optimizer.step(paramData, grads);
    for (const n of names) {
      const v = vars.get(n);
      if (v.grad && release) release(v.grad);
      v.grad = null;
    }
    flush();
    out.push({ loss: lossVal, gradNorm: Math.sqrt(sumSq), grads: grads.size });
  }
  // A parameter after the optimizer steps (host-owned data, updated by the backend).
  const wte = Array.from(paramData.get(names[0]).data.slice(0, 4));
  return { steps: out, wte };
}

let failed = 0;
const check = (ok, msg) => {
  console.log(`${ok ? "ok  " : "FAIL"} ${msg}`);
  if (!ok) failed++;
};
const close = (a, b, tol = 2e-3) => Number.isFinite(a) && Number.isFinite(b) && Math.abs(a - b) <= tol * Math.max(1, Math.abs(b));

const cpu = run(new CpuRefBackend());
let gpu;
try {
  gpu = run(new helios.HeliosBackend());
} catch (err) {
  console.error(`FAIL Helios step threw: ${err?.stack ?? err}`);
  process.exit(1);
}
for (let s = 0; s < STEPS; s++) {
  const c = cpu.steps[s];
  const g = gpu.steps[s];
  check(g.grads === c.grads, `step ${s}: ${g.grads} gradients (cpu_ref ${c.grads})`);
  check(close(g.loss, c.loss), `step ${s}: loss helios ${g.loss.toFixed(5)} cpu_ref ${c.loss.toFixed(5)}`);
  check(close(g.gradNorm, c.gradNorm), `step ${s}: grad norm helios ${g.gradNorm.toFixed(5)} cpu_ref ${c.gradNorm.toFixed(5)}`);
}
check(gpu.wte.every((v, i) => close(v, cpu.wte[i], 1e-3)), `wte after ${STEPS} AdamW steps: helios ${gpu.wte.map((v) => v.toFixed(5))} cpu_ref ${cpu.wte.map((v) => v.toFixed(5))}`);
helios.destroyDevice?.();
if (failed) {
  console.error(`tape-step: ${failed} check(s) failed`);
  process.exit(1);
}
console.log("tape-step: ok");
