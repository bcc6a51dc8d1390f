#!/usr/bin/env bash
# session 11 call 5: 256x256 f16-acc with 16-deep k-tiles in two stages (probe)
set -uo pipefail
export HELIOS_CACHE_DIR=/tmp/hc5
timeout 300 node perf/s11/k16.mjs 2>&1 | grep -v "^$"; echo "exit $?"
