#!/usr/bin/env bash
# session 11 call 4: MLP f16->f32 fused candidates; parity suites with the _kpr_a2 twins raced
set -uo pipefail
export HELIOS_CACHE_DIR=/tmp/hc4
F=cm_128x256x32_w2x4_v128_s1
OUT32=1 timeout 120 node perf/s11/steps.mjs "16384x3072x768:acc32:${F},${F}_kpr,${F}_kpr_a2,cm_128x128x32_w2x2_v128_s1_kpa:bias+gelu" "16384x3072x768:acc32:${F},${F}_kpr,${F}_kpr_a2,cm_128x128x32_w2x2_v128_s1_kpa" 2>&1 | grep -v "^$"
S=2048x2048x2048,3072x3072x3072,4096x4096x4096,8192x8192x8192
for spec in "float16 false f16" "bfloat16 false bf16" "float16 true acc16" "float32 false f32"; do
  set -- $spec
  timeout 150 node dist/bench/cli.js bench --suite=cuda --iters=40 --warmup=8 --dtype=$1 --accF16=$2 --shapes=$S --check=true --checkShape=384x384x384 --out=$OUT/suite-$3.json > $OUT/suite-$3.log 2>&1; echo "suite $3 exit $?"
  grep -E "^\s*(2048|3072|4096|8192)|shape" $OUT/suite-$3.log | tail -5
done
cp $HELIOS_CACHE_DIR/matmul-tune-v1.json $OUT/ 2>/dev/null
