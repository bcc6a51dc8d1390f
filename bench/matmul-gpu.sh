#!/usr/bin/env bash
# GPU host: matmul correctness of every variant + variant sweep (--phase=check, ~3 min), CUDA parity
# suites + fused epilogue (--phase=perf, ~4 min; --phase=fused: the fused epilogue only), or both (default). JSON, SVG and a progress log in
# $OUT (default perf/gpu-<time>); summary.json holds the headline numbers.
#   bash bench/matmul-gpu.sh [--phase=check|perf|fused|all] [--quick]
# Needs dist/ (npx tsc -p tsconfig.json) and the release addon (npm run build:native).
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-perf/gpu-$(date +%Y%m%dT%H%M%S)}
mkdir -p "$OUT"
export HELIOS_CACHE_DIR=${HELIOS_CACHE_DIR:-$OUT/cache}
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,temperature.gpu,power.draw --format=csv > "$OUT/nvidia-smi.csv" 2>/dev/null || true
python3 -c "import torch;print(torch.__version__, torch.version.cuda, torch.cuda.is_available())" > "$OUT/torch.txt" 2>&1 || true
git rev-parse HEAD > "$OUT/commit.txt" 2>/dev/null || true
status=0
timeout 560 node dist/bench/matmul-gpu.js "$OUT" "$@" 2> >(tee "$OUT/progress.log" >&2) || status=$?
echo "matmul-gpu: exit $status, results in $OUT" >&2
exit $status
