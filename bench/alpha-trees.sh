#!/usr/bin/env bash
# Packs the two Alpha trees bench/alpha-gpu.sh runs on the GPU host (which has no network):
#   perf/alpha/helios.tgz    Alpha, built, with packages/helios a link to this repository
#   perf/alpha/upstream.tgz  the same with Alpha's own Helios (its C addon built here with gcc;
#                            NAPI_VERSION 10 lowered to 9, which Node 20 accepts)
#   bash bench/alpha-trees.sh BUILT_ALPHA
# BUILT_ALPHA: an installed and built Alpha tree, e.g. the one `HELIOS_ALPHA_KEEP=1 bash
# scripts/test-alpha.sh` leaves. Build tools and test runners are left out (the trees stay small
# enough to carry). On the host: tar xzf ... -C DIR; ln -sfn "$PWD" DIR/alpha/packages/helios.
set -euo pipefail
cd "$(dirname "$0")/.."
src=$(cd "$1" && pwd)
dest=perf/alpha
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$dest"
skip=(typescript turbo-linux-64 @esbuild webgpu vite @rollup rollup vitest @vitest)
excludes=()
for m in "${skip[@]}"; do excludes+=(--exclude="alpha/node_modules/$m"); done
excludes+=(--exclude=alpha/.bun-out --exclude=alpha/runs --exclude=alpha/.turbo)

cp -a "$src" "$work/alpha"
rm -rf "$work/alpha/packages/helios"
ln -s /nonexistent "$work/alpha/packages/helios" # replaced by the repository on the host
tar -C "$work" "${excludes[@]}" -czf "$dest/helios.tgz" alpha

rm "$work/alpha/packages/helios"
cp -a "${ALPHA_SRC:-../shared/alpha2}/packages/helios" "$work/alpha/packages/helios"
chmod -R u+w "$work/alpha/packages/helios"
(
  cd "$work/alpha/packages/helios"
  sed -i 's/#define NAPI_VERSION 10/#define NAPI_VERSION 9/' native/helios_vk.c
  node native/build.mjs >/dev/null
  PATH="$src/node_modules/.bin:$PATH" tsc -b
)
tar -C "$work" "${excludes[@]}" -czf "$dest/upstream.tgz" alpha
ls -la "$dest"
