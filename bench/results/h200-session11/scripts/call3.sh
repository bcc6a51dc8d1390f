#!/usr/bin/env bash
# session 11 call 3: the fused phase with tuned plans on both sides and the f16->f32 rows
set -uo pipefail
mkdir -p /tmp/mm3
OUT=/tmp/mm3 timeout 520 bash bench/matmul-gpu.sh --phase=fused > $OUT/mm.log 2>&1; echo "fused exit $?"
cp /tmp/mm3/fused.json $OUT/ 2>/dev/null
grep -E "fused " $OUT/mm.log | tail -14
