#!/usr/bin/env bash
# session 11 call 10: the f16 parity suite (b2 twins degrade at the check shape; the timed kernel's spot check gates), then the GPT-2 train suite
set -uo pipefail
export HELIOS_CACHE_DIR=/tmp/hc10
S=2048x2048x2048,3072x3072x3072,4096x4096x4096,8192x8192x8192
timeout 150 node dist/bench/cli.js bench --suite=cuda --iters=40 --warmup=8 --dtype=float16 --shapes=$S --check=true --checkShape=384x384x384 --out=$OUT/suite-f16.json > $OUT/suite-f16.log 2>&1; echo "suite f16 exit $?"
grep -E "^\s*(2048|3072|4096|8192)|shape|rror" $OUT/suite-f16.log | tail -6
export HELIOS_CACHE_DIR=/tmp/hc10t
OUT=$OUT MAX_S=200 SUITE_TIMEOUT=330 bash bench/train/gpu.sh suite > $OUT/train.log 2>&1; echo "train suite exit $?"
tail -25 $OUT/train.log
