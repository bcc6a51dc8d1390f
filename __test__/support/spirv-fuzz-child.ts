// One process of the SPIR-V fuzz test (spirv-fuzz.test.ts): mutates valid modules by one to
// three words and hands each to createPipeline, which must either refuse it with a coded error
// or build it without the driver (or the validation layer) crashing. A crash kills only this
// process, which the parent reports. Prints a JSON summary as its last line.
import { readdirSync, readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { native } from "../../ts/native.js";
import { Mulberry32 } from "../../ts/random.js";
import { type Access, KERNELS } from "../kernels/index.js";

interface Seed {
  name: string;
  words: Uint32Array;
  layout: { bindings: Access[]; pushConstantBytes: number; label: string };
}

function irSeeds(): Seed[] {
  const dir = join(dirname(fileURLToPath(import.meta.url)), "../../../__test__/kernels/ir");
  const out: Seed[] = [];
  for (const file of readdirSync(dir).filter((f) => f.endsWith(".json")).sort()) {
    const desc = readFileSync(join(dir, file), "utf8");
    try {
      const words = native.kernelSpirv(desc);
      const l = native.kernelLayout(desc);
      out.push({ name: file, words, layout: { bindings: l.bindings as Access[], pushConstantBytes: l.pushConstantBytes, label: file } });
    } catch {
      // needs a capability this device lacks (cooperative matrices on lavapipe)
    }
  }
  return out;
}

function mutate(words: Uint32Array, rng: Mulberry32): Uint32Array {
  const m = new Uint32Array(words);
  const n = 1 + Math.floor(rng.next() * 3);
  for (let i = 0; i < n; i++) {
    const at = Math.floor(rng.next() * m.length);
    const r = (rng.next() * 0x1_0000_0000) >>> 0;
    switch (Math.floor(rng.next() * 6)) {
      case 0: m[at] = r; break;
      case 1: m[at] ^= 1 << (r & 31); break;
      case 2: m[at] = (m[at] + (r % 9) - 4) >>> 0; break;
      case 3: m[at] = words[r % words.length]; break;
      case 4: m[at] = 0; break;
      default: m[at] = 0xffffffff;
    }
  }
  return m;
}

const seed = Number(process.argv[2] ?? 1);
const attempts = Number(process.argv[3] ?? 1000);
// `trace`: name each mutant on stderr before the driver sees it (pipes to stderr are synchronous
// on Linux), so a crash can be pinned to its mutant.
const trace = process.argv[4] === "trace";
native.initDevice({ validation: true });
const seeds: Seed[] = [
  ...Object.entries(KERNELS).map(([name, k]) => ({ name, words: k.spirv, layout: k.layout })),
  ...irSeeds(),
];
const rng = new Mulberry32(seed);
let accepted = 0;
const codes: Record<string, number> = {};
const messages: string[] = [];
for (let i = 0; i < attempts; i++) {
  const s = seeds[i % seeds.length];
  const words = mutate(s.words, rng);
  if (trace) process.stderr.write(`${s.name} #${i} ${Buffer.from(words.buffer).toString("base64")}\n`);
  try {
    native.destroyPipeline(native.createPipeline(words, s.layout));
    accepted++;
  } catch (e) {
    const code = (e as { code?: string }).code ?? "none";
    codes[code] = (codes[code] ?? 0) + 1;
  }
  for (const m of native.takeValidationMessages()) {
    if (messages.length < 20) messages.push(`${s.name} #${i}: ${m.slice(0, 400)}`);
  }
}
native.destroy();
console.log(JSON.stringify({ seeds: seeds.length, attempts, accepted, codes, messages }));
