#!/usr/bin/env bash
# session 11 call 14: the GPT-2 train suite on the final build (the _es twins in the race)
set -uo pipefail
export HELIOS_CACHE_DIR=/tmp/hc14
OUT=$OUT MAX_S=200 SUITE_TIMEOUT=330 bash bench/train/gpu.sh suite > $OUT/train.log 2>&1; echo "train suite exit $?"
grep -E "tok/s|parity|step 1:" $OUT/train.log | tail -12
