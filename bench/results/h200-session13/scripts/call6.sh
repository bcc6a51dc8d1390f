#!/usr/bin/env bash
# session 13 call 6: B two stages + half of A (_kpr_b2_ah2) on the 128x256 tile — fp64 gate, interleaved vs _kpr_b2 / _kpr_a2
set -uo pipefail
export HELIOS_CACHE_DIR=/tmp/hc6
T=cm_128x256x32_w2x4_v128_s1
V=${T}_kpr_a2,${T}_kpr_b2,${T}_kpr_b2_ah2,${T}_kpr_a2_stk,${T}_kpr_b2_stk,${T}_kpr_b2_ah2_stk
timeout 200 node perf/s13/race.mjs 2048x2048x2048,4096x4096x4096,8192x8192x8192 f16 $V ${T}_kpr_b2_ah2,${T}_kpr_b2_ah2_stk 2>&1 | grep -v "^$"; echo "f16 exit $?"
timeout 120 node perf/s13/race.mjs 4096x4096x4096,8192x8192x8192 bf16 $V ${T}_kpr_b2_ah2 2>&1 | grep -v "^$"; echo "bf16 exit $?"
timeout 100 node perf/s13/race.mjs 16384x3072x768,16384x768x3072 f16 ${T}_kpr_a2,${T}_kpr_b2,${T}_kpr_b2_ah2,${T}_kpr_b2_ah2_stk 2>&1 | grep -v "^$"; echo "gpt2 exit $?"
HELIOS_PIPELINE_STATS=1 timeout 60 node dist/bench/kernel-stats.js --match="128x256x32_w2x4_NN_v88_s1_lk_kpr_b2" --out=$OUT/stats.json 2>&1 | tail -6
