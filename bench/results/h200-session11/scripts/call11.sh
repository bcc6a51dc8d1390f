#!/usr/bin/env bash
# session 11 call 11: the final build — the GPU check phase (every variant, new NN case), the f16 suite, the fused phase
set -uo pipefail
mkdir -p /tmp/mm11c /tmp/mm11f
OUT=/tmp/mm11c timeout 260 bash bench/matmul-gpu.sh --phase=check > $OUT/check.log 2>&1; echo "check exit $?"
grep -E "checks:" $OUT/check.log | tail -2
python3 - <<'PY' > $OUT/check-summary.txt
import json
j=json.load(open('/tmp/mm11c/check.json'))
print(json.dumps(j['summary']))
bad=[r for r in j['rows'] if not r.get('pass')]
print(len(bad),'failed'); [print(r) for r in bad[:10]]
PY
cat $OUT/check-summary.txt | head -12
export HELIOS_CACHE_DIR=/tmp/hc11
timeout 130 node dist/bench/cli.js bench --suite=cuda --iters=40 --warmup=8 --dtype=float16 --shapes=2048x2048x2048,3072x3072x3072,4096x4096x4096,8192x8192x8192 --check=true --checkShape=384x384x384 --out=$OUT/suite-f16.json > $OUT/suite-f16.log 2>&1; echo "suite f16 exit $?"
grep -E "^\s*(2048|3072|4096|8192)|shape|rror" $OUT/suite-f16.log | tail -6
OUT=/tmp/mm11f timeout 200 bash bench/matmul-gpu.sh --phase=fused > $OUT/fused.log 2>&1; echo "fused exit $?"
cp /tmp/mm11f/fused.json $OUT/ 2>/dev/null
grep -E "fused " $OUT/fused.log | tail -12
