#!/usr/bin/env bash
# Idempotent set-up on a fresh Debian/Ubuntu machine: system packages (Vulkan loader,
# lavapipe, validation layers, spirv-tools), Node >= 20, Rust, the Node tools in tools/, then
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

# Helios's own Node tools (TypeScript, the napi-rs CLI, @types/node, Bun for the smoke test) are
# declared in tools/package.json with their lock, not in package.json: the published package has
# no devDependencies, so installing it as a workspace (Alpha's monorepo) pulls in none of them.
# ./node_modules is a link to tools/node_modules, so `npx tsc`, `npx napi`, `npx bun` and
# tsconfig's "types": ["node"] find them as before.
if [ ! -f tools/node_modules/.package-lock.json ] || [ tools/package-lock.json -nt tools/node_modules/.package-lock.json ]; then
  # `npm install`, not `npm ci`: npm 11.19's ci rejects this lock (it wants entries for the
  # other platforms' optional @napi-rs/lzma binaries, which npm itself never writes).
  echo "setup: npm install (tools/)"
  npm install --prefix tools --ignore-scripts --no-audit --no-fund >/dev/null
  # Scripts are off for the install (npm 11 would ask about each); bun's own postinstall puts
  # the platform binary in place for the Bun smoke test.
  (cd tools/node_modules/bun && node install.js >/dev/null)
fi
if [ "$(readlink node_modules 2>/dev/null)" != "tools/node_modules" ]; then
  # A checkout set up before tools/ existed has a real node_modules: move it aside first, so a
  # process running from it keeps its files while the link takes its place.
  if [ -e node_modules ] || [ -L node_modules ]; then
    old="node_modules.old.$$"
    mv node_modules "$old"
    ln -s tools/node_modules node_modules
    rm -rf "$old"
  else
    ln -s tools/node_modules node_modules
  fi
fi

echo "setup: SPIRV-Tools with cooperative-matrix support (.tools/spirv)"
if ! bash scripts/install-spirv-tools.sh; then
  # CI must validate every module; elsewhere the spirv-val test says what it could not check.
  if [ "${CI:-}" = "true" ]; then echo "setup: SPIRV-Tools 2025.5 is required in CI" >&2; exit 1; fi
  echo "setup: could not install SPIRV-Tools 2025.5; the spirv-val test will skip cooperative-matrix and bf16 variants"
fi

echo "setup: building the native addon (release)"
npx napi build --platform --release --output-dir native --js index.cjs --dts ../index.d.ts >/dev/null
# native/helios_vk.node: the addon under the upstream C addon's name (Alpha's Bun and fleet tooling).
node -e 'require("./scripts/install.cjs").writeAlphaName()'
echo "setup: compiling TypeScript"
npx tsc -p tsconfig.json
