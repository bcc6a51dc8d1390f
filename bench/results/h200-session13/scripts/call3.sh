#!/usr/bin/env bash
# session 13 call 3: GPU gate of the _ah2 twins (matmul-gpu --phase=check --variants), f16-accumulation parity suite, _ah2 interleaved at 8192^3
set -uo pipefail
export HELIOS_CACHE_DIR=/tmp/hc3
V=cm_256x256x32_w2x4_v128_s1_kpa_ah2,cm_256x256x32_w2x4_v128_s1_kpa_ah2_stk,cm_256x256x32_w2x4_v128_s1_ah2
timeout 150 node dist/bench/matmul-gpu.js $OUT/gate --phase=check --variants=$V --checkBudget=100 > $OUT/gate.log 2>&1; echo "gate exit $?"
tail -4 $OUT/gate.log
S=2048x2048x2048,3072x3072x3072,4096x4096x4096,8192x8192x8192
timeout 200 node dist/bench/cli.js bench --suite=cuda --iters=40 --warmup=8 --dtype=float16 --accF16=true --shapes=$S --check=true --checkShape=384x384x384 --out=$OUT/suite-acc16.json > $OUT/suite-acc16.log 2>&1; echo "suite exit $?"
grep -E "^\s*(2048|3072|4096|8192)|shape|rror" $OUT/suite-acc16.log | tail -6
SKIP_CHECKS=1 timeout 120 node perf/s13/ah2.mjs 8192x8192x8192 2>&1 | grep "TF/s\|fails"; echo "ah2 exit $?"
nvidia-smi --query-gpu=clocks.sm,temperature.gpu,power.draw --format=csv,noheader
