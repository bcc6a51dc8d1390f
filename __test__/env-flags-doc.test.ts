// Every HELIOS_* environment variable the code reads is documented in docs/flags.md (one row
// `| \`NAME\` | default | ... |`), and every flag README names for users is one of them. Error
// codes (ERR_HELIOS_*) are not flags.
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

test("every HELIOS_* flag read by the code has a row in docs/flags.md; README's flags are real", () => {
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
  const doc = readFileSync(path.join(root, "docs", "flags.md"), "utf8");
  const missing = [...flags].filter((f) => !doc.includes(`| \`${f}\` |`)).sort();
  assert.deepEqual(missing, [], `flags without a docs/flags.md row: ${missing.join(", ")}`);
  const readme = readFileSync(path.join(root, "README.md"), "utf8");
  const userFlags = [...readme.matchAll(/^\| `(HELIOS_[A-Z0-9_]+)` \|/gm)].map((m) => m[1]);
  assert.ok(userFlags.length > 0 && userFlags.length <= 12, `README's flag table lists the few a user sets (${userFlags.length})`);
  const unknown = userFlags.filter((f) => !flags.has(f));
  assert.deepEqual(unknown, [], `README names flags the code does not read: ${unknown.join(", ")}`);
});
