// Writes every registered matmul kernel description as JSON into a directory (default
// perf/matmul-kernels): input for spirv-val sweeps and for reading what the generators emit.
import { mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { matmulKernelVariants } from "../lab/registry-matmul.js";

const dir = process.argv[2] ?? "perf/matmul-kernels";
mkdirSync(dir, { recursive: true });
const vs = matmulKernelVariants();
for (const v of vs) writeFileSync(join(dir, `${v.id}.json`), JSON.stringify(v.build()));
process.stdout.write(`wrote ${vs.length} kernel descriptions to ${dir}\n`);
