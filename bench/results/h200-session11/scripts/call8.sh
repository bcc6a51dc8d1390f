#!/usr/bin/env bash
# session 11 call 8: the tuner's timing of _kpr_a2 with f32 output against a direct timing
set -uo pipefail
export HELIOS_CACHE_DIR=/tmp/hc8
timeout 200 node perf/s11/tunecmp.mjs 2>&1 | grep -v "^$"
