#!/usr/bin/env bash
# session 11 call 15: after the tidy (redundant barriers before the _es epilogue removed), the two-stage twins' GPU gate again
set -uo pipefail
export HELIOS_CACHE_DIR=/tmp/hc15
BUDGET_MS=90000 timeout 160 node perf/s11/check-2st.mjs 2>&1 | tail -4
