#!/usr/bin/env bash
# session 11 call 9: interleaved tuning rounds; the fused phase, then the f16 / bf16 / f16-acc suites
set -uo pipefail
mkdir -p /tmp/mm9
OUT=/tmp/mm9 timeout 300 bash bench/matmul-gpu.sh --phase=fused > $OUT/mm.log 2>&1; echo "fused exit $?"
cp /tmp/mm9/fused.json $OUT/ 2>/dev/null
grep -E "fused " $OUT/mm.log | tail -14
export HELIOS_CACHE_DIR=/tmp/hc9
S=2048x2048x2048,3072x3072x3072,4096x4096x4096,8192x8192x8192
for spec in "float16 false f16" "bfloat16 false bf16" "float16 true acc16"; do
  set -- $spec
  timeout 150 node dist/bench/cli.js bench --suite=cuda --iters=40 --warmup=8 --dtype=$1 --accF16=$2 --shapes=$S --check=true --checkShape=384x384x384 --out=$OUT/suite-$3.json > $OUT/suite-$3.log 2>&1; echo "suite $3 exit $?"
  grep -E "^\s*(2048|3072|4096|8192)|shape" $OUT/suite-$3.log | tail -5
done
cd $OUT && tar czf suites.tgz suite-*.json suite-*.log && rm -f suite-*.json suite-*.log
