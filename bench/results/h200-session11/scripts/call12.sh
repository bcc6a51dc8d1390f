#!/usr/bin/env bash
# session 11 call 12: f16, bf16 and f16-accumulation parity suites in one call (final build, fresh tuning cache)
set -uo pipefail
export HELIOS_CACHE_DIR=/tmp/hc12
S=2048x2048x2048,3072x3072x3072,4096x4096x4096,8192x8192x8192
for spec in "float16 false f16" "bfloat16 false bf16" "float16 true acc16"; do
  set -- $spec
  timeout 170 node dist/bench/cli.js bench --suite=cuda --iters=40 --warmup=8 --dtype=$1 --accF16=$2 --shapes=$S --check=true --checkShape=384x384x384 --out=$OUT/suite-$3.json > $OUT/suite-$3.log 2>&1; echo "suite $3 exit $?"
  grep -E "^\s*(2048|3072|4096|8192)|shape|rror" $OUT/suite-$3.log | tail -5
done
cd $OUT && tar czf logs.tgz suite-*.log && rm -f suite-*.log
