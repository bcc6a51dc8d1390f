// Accumulator -> A conversion (attention's P·V) through the builder: workgroup scope (coopmat2,
// one cast) and subgroup scope (a shared-memory round trip). Cooperative matrices do not run on
// lavapipe: these modules are checked with spirv-val (no device is initialized in this process,
// so kernelSpirv uses the permissive caps); the GPU host runs them through bench/coop-tests.
import { test } from "node:test";
import assert from "node:assert/strict";
import { coopmat, f16, f32, kernel, type KernelDesc } from "../ts/ir/index.js";
import { native, spirvVal, spirvValPath } from "./ir-harness.js";

const tool = spirvValPath();

function pv(scope: "subgroup" | "workgroup"): KernelDesc {
  const k = kernel(`t_pv_${scope}`, { workgroup: [scope === "workgroup" ? 128 : 32] });
  const q = k.buffer("q", f16, "read"), v = k.buffer("v", f16, "read"), o = k.buffer("o", f32, "write");
  const ta = coopmat("a", "f16", 16, 16, scope), tb = coopmat("b", "f16", 16, 16, scope);
  const tc = coopmat("acc", "f32", 16, 16, scope);
  const scratch = scope === "subgroup" ? { mem: k.shared("p", f16, 256), offset: 0 } : undefined;
  const s = k.cmMulAdd(q.cmLoad(ta, 0, 16), v.cmLoad(tb, 0, 16), k.cmFill(tc, 0));
  const p = k.cmToUse(s, ta, scratch);
  o.cmStore(k.cmMulAdd(p, v.cmLoad(tb, 256, 16), s), 0, 16);
  return k.finish();
}

for (const scope of ["subgroup", "workgroup"] as const) {
  test(`cmToUse acc -> a at ${scope} scope passes spirv-val`, (t) => {
    if (!tool?.modern) {
      t.skip("needs SPIRV-Tools 2025.5 (scripts/install-spirv-tools.sh)");
      return;
    }
    const desc = pv(scope);
    const err = spirvVal(tool.path, desc.name, native.kernelSpirv(desc));
    assert.equal(err, undefined, `${desc.name}: ${err}`);
    const dis: string = native.kernelDisassembly(desc);
    assert.equal(dis.includes("OpCooperativeMatrixConvertNV"), scope === "workgroup");
  });
}
