// Standalone entry for the train suite (the same as `helios bench --suite=train`, bench/cli.ts):
//   node dist/bench/train/cli.js [--tiny] [--steps=N] [--batch=B] [--seq=T] [--no-torch] [--gpus=N] [--out=perf/train.json] ...
// Exit status 1 when the parity check ran and failed.
import { trainSuiteCommand } from "./suite.js";

trainSuiteCommand(process.argv.slice(2)).then(
  (code) => process.exit(code),
  (e: unknown) => {
    console.error(`train suite: ${e instanceof Error ? e.message : String(e)}`);
    process.exit(1);
  },
);
