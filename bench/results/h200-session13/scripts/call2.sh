#!/usr/bin/env bash
# session 13 call 2: GPT-2 train suite on the final prepack rule (first step, weights prepacked), then _ah2 at 8192^3 again
set -uo pipefail
export HELIOS_CACHE_DIR=/tmp/hc2
OUT=$OUT MAX_S=200 SUITE_TIMEOUT=340 bash bench/train/gpu.sh suite > $OUT/train.log 2>&1; echo "train suite exit $?"
grep -E "tok/s|parity|step 1:|memory:|prepacked" $OUT/train.log | tail -16
timeout 150 node perf/s13/ah2.mjs 8192x8192x8192 2>&1 | grep "TF/s\|fails"; echo "ah2 exit $?"
nvidia-smi --query-gpu=clocks.sm,temperature.gpu,power.draw --format=csv,noheader
