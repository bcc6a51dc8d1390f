#!/usr/bin/env bash
# session 13 call 1: half of A in two stages (_ah2) — fp64 gate, interleaved timing, registers, f16-acc parity suite
set -uo pipefail
export HELIOS_CACHE_DIR=/tmp/hc1
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,temperature.gpu,power.draw --format=csv,noheader
timeout 330 node perf/s13/ah2.mjs 2>&1 | grep -v "^$"; echo "ah2 exit $?"
HELIOS_PIPELINE_STATS=1 timeout 60 node dist/bench/kernel-stats.js --match="256x256x32_w2x4_NN_v88_s1_lk_kpa" --out=$OUT/stats.json 2>&1 | tail -8
S=2048x2048x2048,3072x3072x3072,4096x4096x4096,8192x8192x8192
timeout 200 node dist/bench/cli.js bench --suite=cuda --iters=40 --warmup=8 --dtype=float16 --accF16=true --shapes=$S --check=true --checkShape=384x384x384 --out=$OUT/suite-acc16.json > $OUT/suite-acc16.log 2>&1; echo "suite exit $?"
grep -E "^\s*(2048|3072|4096|8192)|shape|rror" $OUT/suite-acc16.log | tail -6
nvidia-smi --query-gpu=clocks.sm,temperature.gpu,power.draw --format=csv,noheader
