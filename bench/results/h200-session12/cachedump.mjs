import { readFileSync } from "node:fs";
const c = JSON.parse(readFileSync(process.argv[2] + "/matmul-tune-v1.json", "utf8"));
for (const [k, r] of Object.entries(c)) {
  const top = r.candidates.filter((x) => x.ms !== null).sort((a, b) => a.ms - b.ms).slice(0, 4).map((x) => `${x.variant} ${x.ms.toFixed(4)}`).join("; ");
  console.log(`${k.replace(/^.*?\|/, "")}: ${r.variant} ${r.ms.toFixed(4)} | ${top}`);
}
