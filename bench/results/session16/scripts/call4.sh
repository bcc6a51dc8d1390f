#!/usr/bin/env bash
# session 16 call 4: every issue-5 suite on one machine start: bash bench/matmul-gpu.sh --phase=perf
# (f16, bf16, f16 accumulation and f32 parity suites, then the fused bias+gelu phase), one tuning cache.
set -uo pipefail
W=/tmp/s16w4; mkdir -p $W
nvidia-smi --query-gpu=name,driver_version,power.limit --format=csv,noheader
OUT=$W HELIOS_CACHE_DIR=/tmp/hc16-4 timeout 560 bash bench/matmul-gpu.sh --phase=perf > $W/perf.log 2>&1; echo "perf exit $?"
tar czf ${OUT:-/tmp}/s16call4.tgz -C $W .
cp $W/summary.json ${OUT:-/tmp}/s16call4-summary.json 2>/dev/null
grep -E "TFLOP|ratio|fused|×|target|PASS|FAIL" $W/perf.log | tail -40
