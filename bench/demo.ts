// The main job (`npm run demo`): prints the chosen device, then runs bench/dispatch.
// Issue 6 replaces the second half with a training run.
import { spawnSync } from "node:child_process";
import { fileURLToPath } from "node:url";
import path from "node:path";
import { native } from "../ts/native.js";

const info = native.initDevice();
console.log(`Helios ${native.heliosVersion()} on ${info.deviceName} (${info.deviceType}, ${info.driverName} ${info.driverVersion}, Vulkan ${info.apiVersion})`);
console.log(
  `  f16 ${info.f16Supported}  bf16 ${info.bf16Supported}  coopmat ${info.coopMatSupported}` +
    `  coopmat2 ${info.coopMat2Supported}  subgroup ${info.subgroupSize}  shared ${info.maxSharedMemoryBytes} B`,
);
native.destroy();

const here = path.dirname(fileURLToPath(import.meta.url));
const run = spawnSync(process.execPath, [path.join(here, "dispatch.js"), ...process.argv.slice(2)], { stdio: "inherit" });
process.exit(run.status ?? 1);
