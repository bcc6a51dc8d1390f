#!/usr/bin/env bash
# session 13 call 5: the tuner's ranking with and without 100 ms of each candidate's own load per timing, against sustained runs
set -uo pipefail
export HELIOS_CACHE_DIR=/tmp/hc5
timeout 280 node perf/s13/tunewarm.mjs 8192x8192x8192 acc16 2>&1 | grep -v "^$"; echo "acc16 exit $?"
timeout 250 node perf/s13/tunewarm.mjs 8192x8192x8192 acc32 2>&1 | grep -v "^$"; echo "acc32 exit $?"
