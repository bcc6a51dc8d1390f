#!/usr/bin/env bash
# session 11 call 6: B in two stages (_b2) on the 128x256 tile, against _a2 (probe)
set -uo pipefail
export HELIOS_CACHE_DIR=/tmp/hc6
timeout 300 node perf/s11/b2.mjs 2>&1 | grep -v "^$"; echo "exit $?"
