#!/usr/bin/env node
// npm `install` hook for consumers of @alpha/helios: use the prebuilt addon when one
// matches this platform, otherwise build it from the shipped Rust sources with cargo.
//   HELIOS_BUILD_FROM_SOURCE=1  ignore any prebuilt binary and build with cargo.
"use strict";
const { execFileSync, spawnSync } = require("node:child_process");
const fs = require("node:fs");
const path = require("node:path");

const root = path.resolve(__dirname, "..");
const triple = `${process.platform}-${process.arch}${process.platform === "linux" ? "-gnu" : ""}`;
const target = path.join(root, "native", `helios.${triple}.node`);
const forceBuild = process.env.HELIOS_BUILD_FROM_SOURCE === "1";

function prebuiltLoads() {
  if (!fs.existsSync(target)) return false;
  const probe = spawnSync(process.execPath, ["-e", `require(${JSON.stringify(target)})`], { stdio: "ignore" });
  return probe.status === 0;
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

if (!forceBuild && prebuiltLoads()) {
  process.exit(0);
}
buildFromSource();
