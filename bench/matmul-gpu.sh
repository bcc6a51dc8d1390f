#!/usr/bin/env bash
# GPU host: matmul correctness of every variant + CUDA parity suites + fused epilogue, JSON in $OUT.
# Usage: bash bench/matmul-gpu.sh [--quick]      (needs dist/ built and the release addon)
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-perf/gpu-$(date +%Y%m%dT%H%M%S)}
mkdir -p "$OUT"
export HELIOS_CACHE_DIR=${HELIOS_CACHE_DIR:-$OUT/cache}
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,temperature.gpu --format=csv > "$OUT/nvidia-smi.csv" 2>/dev/null || true
python3 -c "import torch;print(torch.__version__, torch.cuda.is_available())" > "$OUT/torch.txt" 2>&1 || true
timeout 540 node dist/bench/matmul-gpu.js "$OUT" "$@" 2> >(tee "$OUT/progress.log" >&2)
