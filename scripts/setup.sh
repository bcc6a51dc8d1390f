#!/usr/bin/env bash
# Idempotent set-up on a fresh Debian/Ubuntu machine: system packages (Vulkan loader,
# lavapipe, validation layers, spirv-tools), Node >= 20, Rust, npm dependencies, then
# builds the native addon (release) and the TypeScript.
set -euo pipefail
cd "$(dirname "$0")/.."

SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi

apt_pkgs=(libvulkan1 mesa-vulkan-drivers vulkan-validationlayers spirv-tools
          build-essential pkg-config curl ca-certificates xz-utils git python3 python3-venv)
missing=()
for p in "${apt_pkgs[@]}"; do
  dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
done
if [ "${#missing[@]}" -gt 0 ]; then
  echo "setup: installing ${missing[*]}"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}" >/dev/null
fi

node_major=$(node -p 'process.versions.node.split(".")[0]' 2>/dev/null || echo 0)
if [ "$node_major" -lt 20 ]; then
  echo "setup: installing Node.js 20 (NodeSource)"
  curl -fsSL https://deb.nodesource.com/setup_20.x | $SUDO bash - >/dev/null
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq nodejs >/dev/null
fi

if ! command -v cargo >/dev/null 2>&1; then
  if [ -x "$HOME/.cargo/bin/cargo" ]; then
    export PATH="$HOME/.cargo/bin:$PATH"
  else
    echo "setup: installing Rust (rustup)"
    curl -fsSL https://sh.rustup.rs | sh -s -- -y --profile minimal >/dev/null
    export PATH="$HOME/.cargo/bin:$PATH"
  fi
fi

if [ ! -d node_modules ] || [ package-lock.json -nt node_modules/.package-lock.json ]; then
  # `npm install`, not `npm ci`: npm 11.19's ci rejects this lock (it wants entries for the
  # other platforms' optional @napi-rs/lzma binaries, which npm itself never writes).
  echo "setup: npm install"
  npm install --ignore-scripts --no-audit --no-fund >/dev/null
  # Scripts are off for the install (npm 11 would ask about each); bun's own postinstall puts
  # the platform binary in place for the Bun smoke test.
  (cd node_modules/bun && node install.js >/dev/null)
fi

echo "setup: SPIRV-Tools with cooperative-matrix support (.tools/spirv)"
if ! bash scripts/install-spirv-tools.sh; then
  # CI must validate every module; elsewhere the spirv-val test says what it could not check.
  if [ "${CI:-}" = "true" ]; then echo "setup: SPIRV-Tools 2025.5 is required in CI" >&2; exit 1; fi
  echo "setup: could not install SPIRV-Tools 2025.5; the spirv-val test will skip cooperative-matrix and bf16 variants"
fi

echo "setup: building the native addon (release)"
npx napi build --platform --release --output-dir native --js index.cjs --dts ../index.d.ts >/dev/null
echo "setup: compiling TypeScript"
npx tsc -p tsconfig.json
