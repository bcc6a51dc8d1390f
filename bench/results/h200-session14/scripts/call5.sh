#!/usr/bin/env bash
# session 14 call 5: GPT-2 124M train suite with the tuner timing in ~2 ms turns (first step = tuning, prepack races, tok/s)
set -uo pipefail
export HELIOS_CACHE_DIR=/tmp/hc5
mkdir -p $OUT/w
OUT=$OUT/w MAX_S=200 SUITE_TIMEOUT=340 bash bench/train/gpu.sh suite > $OUT/w/train.log 2>&1; echo "train suite exit $?"
grep -E "tok/s|parity|step 1:|memory:|prepacked" $OUT/w/train.log | tail -16
tar czf $OUT/call5.tgz -C $OUT w
