// bench/train/soak: issue 6's stability run. GPT-2 124M (B=16, T=1024; or --tiny) trains `steps`
// consecutive steps (captured, as the suite times them) on windows of the shipped text, and
// checks that every loss is finite and that the pool holds no more bytes after the last step
// than after step 3 (the tuner, the capture and the first replays have leased what they need by
// then). With HELIOS_VALIDATION=1 it also drains the validation layer's messages and fails on
// any; it also counts those that only say the layer predates an extension Helios enables
// (cooperative matrices, bf16: unknown structs, capabilities, SPIR-V extensions), which a layer
// older than them reports for every kernel that uses them — run with HELIOS_COOPMAT=0 to check
// the rest of a run on such a layer. Exit 1 on a failure; a JSON summary with --out.
//
//   node dist/bench/train/soak.js [--steps=100] [--matmul16] [--tiny] [--out=perf/soak.json]
import { writeFileSync } from "node:fs";
import { HeliosBackend } from "../../ts/backend.js";
import { native } from "../../ts/native.js";
import { asTrainBackend } from "../../train/backend.js";
import { DEFAULT_OPTIM, type GPTConfig } from "../../train/config.js";
import { loadText } from "../../train/data.js";
import { DEFAULT_TEXT } from "../../train/demo.js";
import { Rng } from "../../train/rng.js";
import { Trainer } from "../../train/trainer.js";

const argv = process.argv.slice(2);
const arg = (k: string, d: string) => argv.find((a) => a.startsWith(`--${k}=`))?.slice(k.length + 3) ?? d;
const steps = Number(arg("steps", "100"));
const matmul16 = argv.includes("--matmul16");
const tiny = argv.includes("--tiny");
const out = arg("out", "");
// --tiny: a model every kernel family still serves on tensor cores (D = 64, T % 128 == 0)
const cfg: GPTConfig = tiny
  ? { vocab: 512, blockSize: 128, layers: 2, heads: 2, dim: 128, dropout: 0 }
  : { vocab: 50304, blockSize: 1024, layers: 12, heads: 12, dim: 768, dropout: 0 };
const batch = tiny ? 4 : 16, T = cfg.blockSize;

const H = new HeliosBackend();
const tr = new Trainer(asTrainBackend(H), cfg, DEFAULT_OPTIM, { seed: 1337, matmul16 });
const text = loadText(DEFAULT_TEXT).train;
const rng = new Rng(4242);
const poolBytes = () => {
  const p = H.stats().pool;
  return p.leasedBytes + p.freeBytes;
};
const losses: number[] = [];
let after3 = 0;
for (let s = 0; s < steps; s++) {
  const idx = new Int32Array(batch * T), targets = new Int32Array(batch * T);
  for (let b = 0; b < batch; b++) {
    const off = rng.int(text.length - T - 1);
    for (let j = 0; j < T; j++) {
      idx[b * T + j] = text[off + j];
      targets[b * T + j] = text[off + j + 1];
    }
  }
  losses.push(tr.step({ idx, targets, B: batch, T }).loss);
  if (s === 2) after3 = poolBytes();
}
const finalBytes = poolBytes();
const messages = native.takeValidationMessages();
/** Messages that only say the layer does not know an extension in use (see the header). */
const PREDATES = [
  /unknown VkStructureType/, /is not supported by this layer/, /Invalid capability operand/,
  /Unhandled OpCapability/, /SPIR-V Extension \(SPV_(KHR_cooperative_matrix|NV_cooperative_matrix2|KHR_bfloat16)\)/,
];
const predates = messages.filter((m) => PREDATES.some((r) => r.test(m))).length;
const nonFinite = losses.findIndex((l) => !Number.isFinite(l));
const checks = {
  finite: nonFinite < 0,
  poolFlat: steps <= 3 || finalBytes <= after3,
  validationClean: messages.length === 0,
};
const summary = {
  device: H.getDeviceInfo().deviceName, model: cfg, batch, steps, matmul16, capture: tr.capturing,
  validation: process.env.HELIOS_VALIDATION === "1", losses, poolBytesAfterStep3: after3, poolBytesAtEnd: finalBytes,
  validationMessages: messages.length, layerPredatesExtension: predates,
  otherValidationMessages: messages.filter((m) => !PREDATES.some((r) => r.test(m))).slice(0, 50), checks,
};
if (out) writeFileSync(out, JSON.stringify(summary, null, 2));
const mib = (b: number) => (b / 2 ** 20).toFixed(1);
console.log(`${summary.device}: ${tiny ? "tiny GPT" : "GPT-2 124M"}, ${matmul16 ? "matmul16" : "f32"}, ${steps} steps, ` +
  `${tr.capturing ? "captured" : "eager"}, validation ${summary.validation ? "on" : "off"}`);
console.log(`loss ${losses[0]?.toFixed(4)} -> ${losses.at(-1)?.toFixed(4)}; ${nonFinite < 0 ? "all finite" : `non-finite at step ${nonFinite + 1}`}`);
console.log(`pool bytes after step 3 ${mib(after3)} MiB, after step ${steps} ${mib(finalBytes)} MiB: ${checks.poolFlat ? "flat" : "GREW"}`);
const others = summary.otherValidationMessages;
console.log(`validation messages: ${messages.length} (${predates} only say the layer predates an extension in use; ` +
  `${messages.length - predates} others)${others.length ? `\n  ${others.slice(0, 5).map((m) => m.slice(0, 400)).join("\n  ")}` : ""}`);
const ok = Object.values(checks).every(Boolean);
console.log(ok ? "soak: PASS" : `soak: FAIL (${Object.entries(checks).filter(([, v]) => !v).map(([k]) => k).join(", ")})`);
process.exitCode = ok ? 0 : 1;
