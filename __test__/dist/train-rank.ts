// One process of the data-parallel training tests (dist-train.test.ts): the demo's training run,
// or with `suite` first the train suite's tiny run, over the test transport when started as a
// rank (RANK, WORLD_SIZE, ... set), or alone with the same arguments as the reference. Prints
// the losses as one JSON line (rank 0 or the lone run).
import { initDistributed } from "../../ts/distributed/group.js";
import { hasDistEnv } from "../../ts/distributed/env.js";
import { HeliosBackend } from "../../ts/backend.js";
import { native } from "../../ts/native.js";
import { asTrainBackend } from "../../train/backend.js";
import { demoDefaults, parseDemoArgs, runDemo } from "../../train/demo.js";
import { parseTrainSuiteArgs, runTrainSuite } from "../../bench/train/suite.js";
import "./host-transport.js";

const pg = hasDistEnv() ? initDistributed({ transport: "host" }) : null;
if (pg) process.stderr.write(`joined as rank ${pg.rank}\n`); // every rank has arrived
const B = asTrainBackend(new HeliosBackend());
const argv = process.argv.slice(2);
let out: Record<string, unknown>;
if (argv[0] === "suite") {
  const r = runTrainSuite({ ...parseTrainSuiteArgs(argv.slice(1)), backend: B, dist: pg, log: () => {} });
  const m = r.helios.f32;
  out = { losses: m.losses, perRank: m.perRankTokensPerSec ?? null, tokensPerSec: m.tokensPerSec, error: m.error ?? null };
} else {
  const r = runDemo(B, { ...parseDemoArgs(argv, demoDefaults(false)), dist: pg }, () => {});
  out = { losses: r.losses, valLoss: r.valLoss, world: r.world, steps: r.steps, captured: r.captured };
}
out.validation = native.takeValidationMessages();
if (!pg || pg.rank === 0) console.log(JSON.stringify(out));
pg?.destroy();
