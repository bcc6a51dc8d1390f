// Every kernel variant in lab/registry.ts assembles to SPIR-V that passes
// `spirv-val --target-env vulkan1.3`. Runs without a device: kernelSpirv validates against the
// permissive caps then, so cooperative-matrix and bf16 variants are covered in CI too.
import { test } from "node:test";
import assert from "node:assert/strict";
import { allKernelVariants } from "../lab/registry.js";
import { native, spirvVal, spirvValPath } from "./ir-harness.js";

const tool = spirvValPath();

test("every registered kernel variant passes spirv-val", (t) => {
  if (!tool) {
    t.skip("spirv-val not found (apt-get install spirv-tools, or scripts/install-spirv-tools.sh)");
    return;
  }
  const failures: string[] = [];
  let checked = 0;
  for (const v of allKernelVariants()) {
    // The distribution's spirv-val (2023.1) predates cooperative matrices and bf16.
    if (!tool.modern && v.needs.some((n) => n === "coopmat" || n === "coopmat2" || n === "bf16")) {
      t.diagnostic(`skipped ${v.id}: needs scripts/install-spirv-tools.sh`);
      continue;
    }
    let words: Uint32Array;
    try {
      words = native.kernelSpirv(v.build());
    } catch (e) {
      failures.push(`${v.id}: ${(e as Error).message}`);
      continue;
    }
    const err = spirvVal(tool.path, v.id, words);
    if (err) failures.push(`${v.id}: ${err}`);
    checked++;
  }
  t.diagnostic(`${checked} variants validated with ${tool.path}`);
  assert.deepEqual(failures, []);
});
