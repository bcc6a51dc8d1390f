#!/usr/bin/env bash
# Installs the package the way Alpha consumes it: `npm pack`, then `npm install` of the
# tarball into a scratch project, then `import { initDevice } from "@alpha/helios"`.
# Covers the prebuilt path, the build-from-source path and the missing-cargo message.
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$(pwd)
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT

tarball=$(npm pack --silent --ignore-scripts --pack-destination "$scratch" | tail -n 1)
mkdir -p "$scratch/app"
cd "$scratch/app"
# npm 11 runs a dependency's install script only when package.json allows it.
echo '{"name":"helios-consumer","version":"1.0.0","type":"module","private":true,"allowScripts":{"@alpha/helios":true}}' > package.json
probe='import { initDevice } from "@alpha/helios"; const info = initDevice(); if (!info.deviceName) process.exit(3); if (!["own", "seed", "empty"].includes(info.pipelineCacheSource)) process.exit(4); console.log("imported @alpha/helios; device:", info.deviceName, "pipeline cache from", info.pipelineCacheSource);'

echo "pack: installing $tarball (prebuilt addon)"
npm install --no-audit --no-fund "$scratch/$tarball" >/dev/null
# the shipped pipeline-cache seeds' directory (ts/device.ts PIPELINE_SEED_DIR), even with no seed in it
test -f node_modules/@alpha/helios/data/pipeline-cache/README.md || { echo "pack: data/pipeline-cache is missing" >&2; exit 1; }
node --input-type=module -e "$probe"

echo "pack: rebuilding from source (HELIOS_BUILD_FROM_SOURCE=1)"
HELIOS_BUILD_FROM_SOURCE=1 CARGO_TARGET_DIR="$repo/target" \
  node node_modules/@alpha/helios/scripts/install.cjs
node --input-type=module -e "$probe"

echo "pack: the message when cargo is missing"
set +e
out=$(HELIOS_BUILD_FROM_SOURCE=1 PATH="$(dirname "$(command -v node)")" \
  node node_modules/@alpha/helios/scripts/install.cjs 2>&1)
status=$?
set -e
if [ "$status" -eq 0 ] || ! grep -q "cargo" <<<"$out"; then
  echo "expected a failing install with a message naming cargo, got status $status: $out" >&2
  exit 1
fi
echo "pack: ok"
