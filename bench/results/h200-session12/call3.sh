#!/usr/bin/env bash
# session 12 call 3: prepacking, final build: M=8192 f16+f32, M=512 f16; clocks after each case
set -uo pipefail
export HELIOS_CACHE_DIR=/tmp/hc3
timeout 380 node dist/bench/prepack.js --m=8192 --iters=20 --dtypes=f16,f32 --out=$OUT/prepack-m8192.json > $OUT/prepack-m8192.log 2>&1; echo "m8192 exit $?"
timeout 150 node dist/bench/prepack.js --m=512 --iters=20 --dtypes=f16 --out=$OUT/prepack-m512.json > $OUT/prepack-m512.log 2>&1; echo "m512 exit $?"
grep "after timing" $OUT/prepack-m8192.log | sed 's/.*after timing: //' ; grep -A20 "^x·Wᵀ" $OUT/prepack-m8192.log; grep -A10 "^x·Wᵀ" $OUT/prepack-m512.log
