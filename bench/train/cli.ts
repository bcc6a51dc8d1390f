// Standalone entry for the train suite (the same as `helios bench --suite=train`, bench/cli.ts):
//   node dist/bench/train/cli.js [--tiny] [--steps=N] [--batch=B] [--seq=T] [--no-torch] [--out=perf/train.json] ...
// Exit status 1 when the parity check ran and failed.
import { parseTrainSuiteArgs, runTrainSuite } from "./suite.js";

const r = runTrainSuite(parseTrainSuiteArgs(process.argv.slice(2)));
process.exit(r.parity.ok === false ? 1 : 0);
