#!/usr/bin/env bash
# session 12 call 4: the final build end to end: GPT-2 train suite, ops bench (shared torch helper), one prepack case
set -uo pipefail
export HELIOS_CACHE_DIR=/tmp/hc4
timeout 60 node dist/bench/prepack.js --m=8192 --iters=20 --dtypes=f16 --cases=fc --out=$OUT/prepack-fc.json > $OUT/prepack-fc.log 2>&1; echo "prepack exit $?"
tail -3 $OUT/prepack-fc.log
timeout 90 node dist/bench/ops.js --quick --out=$OUT/ops-quick.json > $OUT/ops-quick.log 2>&1; echo "ops exit $?"; tail -4 $OUT/ops-quick.log
OUT=$OUT MAX_S=200 SUITE_TIMEOUT=330 bash bench/train/gpu.sh suite > $OUT/train.log 2>&1; echo "train suite exit $?"
grep -E "tok/s|parity|step 1:" $OUT/train.log | tail -12
