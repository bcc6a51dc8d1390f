#!/usr/bin/env bash
# session 12 call 1: prepacking of reused weights, inference-style x·Wᵀ loops at M=8192 (f16, f32) and M=512 (f16)
set -uo pipefail
export HELIOS_CACHE_DIR=/tmp/hc1
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv,noheader
timeout 380 node dist/bench/prepack.js --m=8192 --iters=20 --dtypes=f16,f32 --out=$OUT/prepack-m8192.json > $OUT/prepack-m8192.log 2>&1; echo "m8192 exit $?"
timeout 150 node dist/bench/prepack.js --m=512 --iters=20 --dtypes=f16 --out=$OUT/prepack-m512.json > $OUT/prepack-m512.log 2>&1; echo "m512 exit $?"
grep -A20 "^x·Wᵀ" $OUT/prepack-m8192.log; grep -A10 "^x·Wᵀ" $OUT/prepack-m512.log
grep -i "fail\|error" $OUT/prepack-*.log | head
