#!/usr/bin/env bash
# session 15 call 2: the FMA rate of generated kernels, the SIMT tile's inner-loop parts added one at a time
set -uo pipefail
timeout 120 node dist/bench/fma-peak.js --steps=4096 --iters=10 --out=${OUT:-/tmp}/s15call2.json 2>&1
nvidia-smi --query-gpu=name,clocks.sm,power.draw,temperature.gpu --format=csv,noheader 2>/dev/null
