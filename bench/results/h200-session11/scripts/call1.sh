#!/usr/bin/env bash
# session 11 call 1: overlapped last-step multiplies (_ov), per-dispatch GPU times
set -uo pipefail
export HELIOS_CACHE_DIR=/tmp/hc11
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader
timeout 420 node perf/s11/ov.mjs 2>&1 | grep -v "^$"; echo "exit $?"
HELIOS_PIPELINE_STATS=1 timeout 100 node dist/bench/kernel-stats.js --match="^mm_cm_f16_acc(16_f16_256x256x32_w2x4|32_f16_128x256x32_w2x4)_NN_v88_s1_lk(_kp[ar])?(_ov)?(_stk)?_al" --out=$OUT/stats.json 2>&1 | tail -30
