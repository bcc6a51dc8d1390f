#!/usr/bin/env node
// The package's `build` (addon + TypeScript) and `build:native` (addon only, `--native`).
//
// In a source checkout (this repository: ts/ and tools/package.json present), the addon is built
// from the Rust sources (`napi build`, or cargo when the napi CLI is not installed) and the
// TypeScript is compiled.
// In the published package (e.g. packages/helios inside Alpha's monorepo, where Alpha's
// `turbo build` and scripts/bun-compile-safe.sh run these scripts), nothing needs compiling: the
// prebuilt addon is used when it loads on this machine (no Rust toolchain needed), else it is
// built with cargo (HELIOS_BUILD_FROM_SOURCE=1 forces that), and dist/ is shipped compiled.
// Both end by writing native/helios_vk.node, the file name Alpha's bun-compile-safe.sh and fleet
// deploy copy next to the Bun executable (ts/native-load.ts loads it from there).
"use strict";
const { spawnSync } = require("node:child_process");
const fs = require("node:fs");
const path = require("node:path");
const addon = require("./install.cjs");

const { root } = addon;
const nativeOnly = process.argv.includes("--native");
// The repository (TS sources and the dev tools' manifest, neither of which the package ships).
const sourceCheckout = fs.existsSync(path.join(root, "ts")) && fs.existsSync(path.join(root, "tools", "package.json"));
const rel = (p) => path.relative(root, p);

function localBin(name) {
  const p = path.join(root, "node_modules", ".bin", name);
  return fs.existsSync(p) ? p : null;
}

function run(cmd, args) {
  const r = spawnSync(cmd, args, { cwd: root, stdio: "inherit" });
  if (r.status !== 0) {
    console.error(`@alpha/helios build: \`${path.basename(cmd)} ${args.join(" ")}\` failed (status ${r.status ?? r.signal})`);
    process.exit(r.status || 1);
  }
}

function buildNative() {
  if (sourceCheckout) {
    const napi = localBin("napi");
    if (napi && addon.cargoAvailable()) {
      // What scripts/setup.sh runs: also regenerates native/index.cjs and index.d.ts.
      run(napi, ["build", "--platform", "--release", "--output-dir", "native", "--js", "index.cjs", "--dts", "../index.d.ts"]);
    } else if (addon.cargoAvailable()) {
      addon.buildFromSource();
    } else if (addon.prebuiltLoads()) {
      console.log(`@alpha/helios build: no cargo on PATH; keeping the existing ${rel(addon.target)} (it loads)`);
    } else {
      addon.buildFromSource(); // exits with the message naming cargo
    }
  } else if (process.env.HELIOS_BUILD_FROM_SOURCE === "1" || !addon.prebuiltLoads()) {
    addon.buildFromSource();
  } else {
    console.log(`@alpha/helios build: using the prebuilt addon ${rel(addon.target)} (it loads; no Rust toolchain needed)`);
  }
  if (!addon.writeAlphaName()) {
    console.error(`@alpha/helios build: ${rel(addon.target)} is missing after the build`);
    process.exit(1);
  }
  console.log(`@alpha/helios build: ${rel(addon.alphaName)} = ${rel(addon.target)} (for Bun executables and fleet deploy)`);
}

function buildTs() {
  if (sourceCheckout) {
    const tsc = localBin("tsc");
    if (!tsc) {
      console.error("@alpha/helios build: TypeScript is not installed; run `bash scripts/setup.sh` (it installs tools/)");
      process.exit(1);
    }
    run(tsc, ["-p", "tsconfig.json"]);
    return;
  }
  const entry = path.join(root, "dist", "ts", "index.js");
  if (!fs.existsSync(entry)) {
    console.error(`@alpha/helios build: ${rel(entry)} is missing: this copy of the package was published without its compiled TypeScript`);
    process.exit(1);
  }
  console.log("@alpha/helios build: TypeScript ships compiled (dist/ts); nothing to compile");
}

buildNative();
if (!nativeOnly) buildTs();
