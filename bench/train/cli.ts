// Standalone entry for the train suite until the `helios` CLI wires it in:
//   node dist/bench/train/cli.js [--tiny] [--steps=N] [--batch=B] [--seq=T] [--layers=L --dim=C --heads=H --vocab=V]
//        [--max-seconds=S] [--no-torch] [--torch-modes=f32_strict,f32,bf16,compile] [--python=python3]
//        [--work-dir=perf/train] [--out=perf/train.json]
// Exit status 1 when the parity check ran and failed.
import { HeliosBackend } from "../../ts/backend.js";
import { asTrainBackend } from "./backend.js";
import { defaultSuiteOptions, runTrainSuite } from "./suite.js";

const args = process.argv.slice(2);
const o = defaultSuiteOptions(args.includes("--tiny"));
const model = { ...o.model };
for (const a of args) {
  if (a === "--tiny") continue;
  if (a === "--no-torch") { o.torch = false; continue; }
  const m = /^--([a-z-]+)=(.*)$/.exec(a);
  if (!m) throw new Error(`unexpected argument ${a}`);
  const [, k, v] = m;
  const n = Number(v);
  switch (k) {
    case "steps": o.steps = n; break;
    case "batch": o.batch = n; break;
    case "seq": o.seq = n; model.blockSize = Math.max(model.blockSize, n); break;
    case "layers": model.layers = n; break;
    case "dim": model.dim = n; break;
    case "heads": model.heads = n; break;
    case "vocab": model.vocab = n; break;
    case "max-seconds": o.maxSeconds = n; break;
    case "torch-modes": o.torchModes = v; break;
    case "python": o.python = v; break;
    case "work-dir": o.workDir = v; break;
    case "out": o.out = v; break;
    default: throw new Error(`unknown option --${k}`);
  }
}
o.model = model;
const B = new HeliosBackend();
const info = B.getDeviceInfo();
o.log(`device: ${info.deviceName} (${info.deviceType ?? "?"})`);
const r = runTrainSuite(asTrainBackend(B), o);
process.exit(r.parity.ok === false ? 1 : 0);
