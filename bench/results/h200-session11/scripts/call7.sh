#!/usr/bin/env bash
# session 11 call 7: GPU gate of the two-stage twins; the fused phase again, with the tuner's timings kept
set -uo pipefail
export HELIOS_CACHE_DIR=/tmp/hc7
BUDGET_MS=170000 timeout 240 node perf/s11/check-2st.mjs 2>&1 | tail -12
mkdir -p /tmp/mm7
OUT=/tmp/mm7 timeout 330 bash bench/matmul-gpu.sh --phase=fused > $OUT/mm.log 2>&1; echo "fused exit $?"
cp /tmp/mm7/fused.json $OUT/ 2>/dev/null
grep -E "fused " $OUT/mm.log | tail -14
