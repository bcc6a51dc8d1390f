// Every HELIOS_* environment variable the code reads is documented in README's env table (one
// row `| \`NAME\` | default | ... |`). Error codes (ERR_HELIOS_*) are not flags.
import { test } from "node:test";
import assert from "node:assert/strict";
import { readdirSync, readFileSync, statSync } from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..", "..");

function files(dir: string, exts: string[]): string[] {
  const out: string[] = [];
  for (const name of readdirSync(dir)) {
    const p = path.join(dir, name);
    if (statSync(p).isDirectory()) out.push(...files(p, exts));
    else if (exts.some((e) => name.endsWith(e))) out.push(p);
  }
  return out;
}

test("every HELIOS_* flag read by the code has a row in README's env table", () => {
  const sources = [
    ...files(path.join(root, "src"), [".rs"]),
    ...files(path.join(root, "ts"), [".ts"]),
    ...files(path.join(root, "bench"), [".ts", ".sh"]),
    ...files(path.join(root, "scripts"), [".sh"]),
  ];
  const flags = new Set<string>();
  for (const f of sources) {
    for (const m of readFileSync(f, "utf8").matchAll(/(?<![A-Z_])HELIOS_[A-Z0-9_]*[A-Z0-9]/g)) flags.add(m[0]);
  }
  assert.ok(flags.has("HELIOS_VALIDATION") && flags.has("HELIOS_COOPMAT"), "the scan finds the flags");
  const readme = readFileSync(path.join(root, "README.md"), "utf8");
  const missing = [...flags].filter((f) => !readme.includes(`| \`${f}\` |`)).sort();
  assert.deepEqual(missing, [], `flags without a README row: ${missing.join(", ")}`);
});
