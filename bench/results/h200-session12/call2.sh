#!/usr/bin/env bash
# session 12 call 2: the qkv f16 anomaly (79 TF/s): first case vs later case, tuned records
set -uo pipefail
export HELIOS_CACHE_DIR=/tmp/hc2a
timeout 150 node dist/bench/prepack.js --m=8192 --iters=20 --dtypes=f16 --cases=qkv,fc,qkv --out=$OUT/pp-a.json > $OUT/pp-a.log 2>&1; echo "a exit $?"
grep -A5 "^x·Wᵀ" $OUT/pp-a.log; node perf/s12/cachedump.mjs /tmp/hc2a
export HELIOS_CACHE_DIR=/tmp/hc2b
timeout 150 node dist/bench/prepack.js --m=8192 --iters=20 --dtypes=f16 --cases=fc,qkv --out=$OUT/pp-b.json > $OUT/pp-b.log 2>&1; echo "b exit $?"
grep -A4 "^x·Wᵀ" $OUT/pp-b.log; node perf/s12/cachedump.mjs /tmp/hc2b
