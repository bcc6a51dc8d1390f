#!/usr/bin/env node
// npm `install` hook for consumers of @alpha/helios: use the prebuilt addon when one
// matches this platform, otherwise build it from the shipped Rust sources with cargo.
// Either way, native/helios_vk.node is then a copy of the addon: the name Alpha's
// scripts/bun-compile-safe.sh and `alpha fleet deploy` look for (see README, "Inside Alpha").
//   HELIOS_BUILD_FROM_SOURCE=1  ignore any prebuilt binary and build with cargo.
// Also a module: scripts/build.cjs (the package's `build` / `build:native`) uses these functions.
"use strict";
const { execFileSync, spawnSync } = require("node:child_process");
const fs = require("node:fs");
const path = require("node:path");

const root = path.resolve(__dirname, "..");
const triple = `${process.platform}-${process.arch}${process.platform === "linux" ? "-gnu" : ""}`;
const target = path.join(root, "native", `helios.${triple}.node`);
// The file name of Alpha's upstream C addon, kept so Alpha's unchanged tooling finds the addon.
const alphaName = path.join(root, "native", "helios_vk.node");

function loads(file) {
  if (!fs.existsSync(file)) return false;
  const probe = spawnSync(process.execPath, ["-e", `require(${JSON.stringify(file)})`], { stdio: "ignore" });
  return probe.status === 0;
}

function prebuiltLoads() {
  return loads(target);
}

function cargoAvailable() {
  return spawnSync("cargo", ["--version"], { stdio: "ignore" }).status === 0;
}

function buildFromSource() {
  if (!cargoAvailable()) {
    console.error(
      "@alpha/helios: no prebuilt native addon matches " + triple + " and `cargo` was not found on PATH.\n" +
        "Install Rust (https://rustup.rs, 1.80 or newer), then run `npm rebuild @alpha/helios`.",
    );
    process.exit(1);
  }
  console.log(`@alpha/helios: building the native addon from source for ${triple} (cargo build --release)...`);
  execFileSync("cargo", ["build", "--release", "--manifest-path", path.join(root, "Cargo.toml")], {
    stdio: "inherit",
    cwd: root,
  });
  const targetDir = process.env.CARGO_TARGET_DIR || path.join(root, "target");
  const ext = process.platform === "darwin" ? "dylib" : process.platform === "win32" ? "dll" : "so";
  const lib = path.join(targetDir, "release", `${process.platform === "win32" ? "" : "lib"}helios.${ext}`);
  fs.mkdirSync(path.dirname(target), { recursive: true });
  fs.copyFileSync(lib, target);
  console.log(`@alpha/helios: built ${path.relative(root, target)}`);
}

/** native/helios_vk.node := a copy of the addon (replaced only when its bytes differ). */
function writeAlphaName() {
  if (!fs.existsSync(target)) return false;
  const bytes = fs.readFileSync(target);
  if (fs.existsSync(alphaName) && fs.readFileSync(alphaName).equals(bytes)) return true;
  // Write beside it and rename, so a process that has the old file mapped keeps a whole file.
  const tmp = `${alphaName}.${process.pid}.tmp`;
  fs.writeFileSync(tmp, bytes, { mode: 0o755 });
  fs.renameSync(tmp, alphaName);
  return true;
}

/** The install hook: prebuilt when it loads (unless HELIOS_BUILD_FROM_SOURCE=1), else cargo. */
function ensureAddon() {
  const forceBuild = process.env.HELIOS_BUILD_FROM_SOURCE === "1";
  if (forceBuild || !prebuiltLoads()) buildFromSource();
  writeAlphaName();
}

/**
 * In the repository only (tools/package.json is never published): a root `npm install` finds no
 * dependencies in package.json and removes the ./node_modules link scripts/setup.sh made to
 * tools/node_modules (the dev tools); this hook runs after that, so it puts the link back.
 */
function relinkDevTools() {
  const tools = path.join(root, "tools", "node_modules");
  const link = path.join(root, "node_modules");
  if (!fs.existsSync(path.join(root, "tools", "package.json")) || !fs.existsSync(tools)) return;
  let present = true;
  try {
    fs.lstatSync(link);
  } catch {
    present = false;
  }
  if (!present) fs.symlinkSync(path.join("tools", "node_modules"), link);
}

module.exports = { root, triple, target, alphaName, loads, prebuiltLoads, cargoAvailable, buildFromSource, writeAlphaName, ensureAddon, relinkDevTools };

if (require.main === module) {
  relinkDevTools();
  ensureAddon();
}
