#!/usr/bin/env bash
# session 11 call 13: the epilogue's tiles in B's stage (_es): GPU gate of the two-stage twins, f16 + bf16 suites in one call, f16->f32 MLP
set -uo pipefail
export HELIOS_CACHE_DIR=/tmp/hc13
BUDGET_MS=120000 timeout 200 node perf/s11/check-2st.mjs 2>&1 | tail -6
F=cm_128x256x32_w2x4_v128_s1
OUT32=1 timeout 100 node perf/s11/steps.mjs "16384x3072x768:acc32:${F}_kpr,${F}_kpr_a2,${F}_kpr_b2:bias+gelu" "3072x3072x3072:acc32:${F}_kpr_a2_stk,${F}_kpr_b2_stk" 2>&1 | grep -v "^$"
S=2048x2048x2048,3072x3072x3072,4096x4096x4096,8192x8192x8192
for spec in "float16 false f16" "bfloat16 false bf16"; do
  set -- $spec
  timeout 170 node dist/bench/cli.js bench --suite=cuda --iters=40 --warmup=8 --dtype=$1 --accF16=$2 --shapes=$S --check=true --checkShape=384x384x384 --out=$OUT/suite-$3.json > $OUT/suite-$3.log 2>&1; echo "suite $3 exit $?"
  grep -E "^\s*(2048|3072|4096|8192)|shape|rror" $OUT/suite-$3.log | tail -5
done
cd $OUT && tar czf logs.tgz suite-*.log && rm -f suite-*.log
