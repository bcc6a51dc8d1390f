// The one place TypeScript touches the addon at import: ts/native-load.ts finds it (the package's
// native/index.cjs, or the helios_vk.node Alpha's tooling puts next to a Bun executable).
import type * as Native from "../index.js";
import { loadAddon } from "./native-load.js";

export const native: typeof Native = loadAddon();
