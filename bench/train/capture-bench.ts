// Captured vs eager training steps on one backend, interleaved so that machine noise hits both
// alike: `node dist/bench/train/capture-bench.js [--gpu] [--steps N]`. Uses the demo's model for
// the device class (lavapipe/CPU or GPU) and reports the median ms/step and steps/s of each mode.
import { HeliosBackend } from "../../ts/backend.js";
import { asTrainBackend } from "../../train/backend.js";
import { demoDefaults } from "../../train/demo.js";
import { Trainer } from "../../train/trainer.js";
import { initHostParams } from "../../train/params.js";
import { loadText, sampleBatch } from "../../train/data.js";
import { Rng } from "../../train/rng.js";

const args = process.argv.slice(2);
const H = new HeliosBackend();
const gpu = args.includes("--gpu") || H.getDeviceInfo().deviceType !== "cpu";
const i = args.indexOf("--steps");
const steps = i >= 0 ? Number(args[i + 1]) : 20;
const d = demoDefaults(gpu);
const B = asTrainBackend(H);
const init = initHostParams(d.model, d.seed);
const modes = { capture: new Trainer(B, d.model, d.optim, { init, seed: d.seed, capture: true }), eager: new Trainer(B, d.model, d.optim, { init, seed: d.seed, capture: false }) };
const data = loadText(d.text);
const rng = new Rng(d.seed);
const ms: Record<string, number[]> = { capture: [], eager: [] };
for (let s = 0; s < steps + 2; s++) {
  const hb = sampleBatch(data.train, d.batch, d.seq, rng);
  for (const [name, tr] of Object.entries(modes)) {
    const r = tr.step(hb);
    if (s >= 2) ms[name].push(r.ms); // the first steps compile kernels and record the capture
  }
}
const median = (a: number[]) => [...a].sort((x, y) => x - y)[a.length >> 1];
console.log(`${H.getDeviceInfo().deviceName}: ${d.model.layers} layers, dim ${d.model.dim}, T ${d.seq}, batch ${d.batch}, ${steps} steps each`);
for (const name of Object.keys(ms)) {
  const m = median(ms[name]);
  console.log(`${name.padEnd(8)} ${m.toFixed(1)} ms/step  ${(1000 / m).toFixed(2)} steps/s  ${((d.batch * d.seq * 1000) / m).toFixed(0)} tok/s`);
}
