// Two or more plans timed head to head: each on a fixture of its own problem, in the tuner's
// rounds (product by product), so a GPU clock that drifts during the race moves every plan
// alike (see autotune.ts TUNE_ROUNDS). Times from separate tuning runs are not compared
// directly: they can come from different clock states (~3 % apart on the H200).
import { timeInRounds } from "./autotune.js";
import type { MatmulRuntime } from "./device.js";
import { MatmulFixture } from "./fixture.js";
import type { MatmulPlan } from "./plan.js";
import { normalize, type MatmulProblem } from "./problem.js";
import { median } from "../../stats.js";

export interface RaceEntry {
  problem: MatmulProblem;
  plan: MatmulPlan;
}

/** Each entry's GPU ms per product: the median of its round medians. */
export function racePlans(rt: MatmulRuntime, entries: RaceEntry[], opts: { warmup?: number; iters?: number } = {}): number[] {
  const fixtures = entries.map((e, i) => new MatmulFixture(rt, normalize(e.problem), 23 + i));
  try {
    return timeInRounds(rt, entries.map((e, i) => () => ({ plan: e.plan, bufs: fixtures[i].buffers(e.plan) })), opts).map(median);
  } finally {
    for (const f of fixtures) f.destroy();
  }
}
