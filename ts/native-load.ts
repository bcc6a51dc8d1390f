// Finds and loads the native addon, once, on first call (ts/native.ts at import, ts/device.ts on
// first use). Kept apart from native.ts so importing it loads nothing.
import { existsSync } from "node:fs";
import { createRequire } from "node:module";
import path from "node:path";
import type * as Native from "../index.js";

const require = createRequire(import.meta.url);
let loaded: typeof Native | null = null;

// Where the addon is looked for, in order (the first that exists is loaded; a failure to load
// it is reported, not skipped):
//   1. HELIOS_NATIVE_ADDON: an explicit path to the addon file (the upstream Helios' variable).
//   2. helios_vk.node next to the executable: Alpha's scripts/bun-compile-safe.sh and
//      `alpha fleet deploy` put the addon there beside the Bun-compiled `alpha` binary, whose
//      bundle has no native/ directory. Never present next to a node binary.
//   3. native/index.cjs, napi-rs's loader for native/helios.<platform>.node (the package's own).
export function loadAddon(): typeof Native {
  if (loaded) return loaded;
  const explicit = process.env.HELIOS_NATIVE_ADDON;
  const sidecar = path.join(path.dirname(process.execPath), "helios_vk.node");
  let what = "native/index.cjs";
  try {
    if (explicit) {
      what = `HELIOS_NATIVE_ADDON=${explicit}`;
      if (!existsSync(explicit)) throw new Error("no such file");
      loaded = require(path.resolve(explicit)) as typeof Native;
    } else if (existsSync(sidecar)) {
      what = sidecar;
      loaded = require(sidecar) as typeof Native;
    } else {
      // dist/ts/native-load.js -> ../../native/index.cjs
      loaded = require("../../native/index.cjs") as typeof Native;
    }
    return loaded;
  } catch (err) {
    const why = err instanceof Error ? err.message : String(err);
    throw new Error(
      `@alpha/helios: the native addon could not be loaded from ${what} (${why}). ` +
        "Build it with `npm run build:native` (uses the prebuilt addon when it loads, else needs Rust/cargo); " +
        "a Bun executable needs helios_vk.node next to it.",
    );
  }
}
