#!/usr/bin/env bash
# session 12 call 5: final rule (pack at the third product, history): GPT-2 train suite (first step, prepacks), prepack bench M=8192 f16
set -uo pipefail
export HELIOS_CACHE_DIR=/tmp/hc5
OUT=$OUT MAX_S=200 SUITE_TIMEOUT=330 bash bench/train/gpu.sh suite > $OUT/train.log 2>&1; echo "train suite exit $?"
grep -E "tok/s|parity|step 1:|memory:" $OUT/train.log | tail -14
timeout 220 node dist/bench/prepack.js --m=8192 --iters=20 --dtypes=f16 --out=$OUT/prepack-m8192.json > $OUT/prepack-m8192.log 2>&1; echo "m8192 exit $?"
grep -A14 "^x·Wᵀ" $OUT/prepack-m8192.log
