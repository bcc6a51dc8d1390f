#!/usr/bin/env bash
# session 11 call 2: A in two shared stages (_a2), per-dispatch GPU times, registers
set -uo pipefail
export HELIOS_CACHE_DIR=/tmp/hc11
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader
timeout 450 node perf/s11/a2.mjs 2>&1 | grep -v "^$"; echo "exit $?"
HELIOS_PIPELINE_STATS=1 timeout 100 node dist/bench/kernel-stats.js --match="^mm_cm_f16_acc32_f16_128x256x32_w2x4_NN_v88_s1_lk(_kp[ar])?(_a2)?(_stk)?_al" --out=$OUT/stats.json 2>&1 | tail -14
