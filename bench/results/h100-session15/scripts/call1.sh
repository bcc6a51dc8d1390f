#!/usr/bin/env bash
# session 15 call 1: the 128-thread SIMT tiles (128 accumulators per thread) against simt_128x128_8x8,
# (ran with simt_128x128_16x8_t128 and simt_128x128_8x16_t128, removed after call 4: the 128-thread tile ships only as simt_128x128_8x16_t128_sm)
# forced, the parity suite's sustained protocol (f32, fp64 gate at 384³); register counts; ABAB repeats at 4096³
set -uo pipefail
W=/tmp/s15w; mkdir -p $W
BIG=${BIG:-4096x4096x4096,8192x8192x8192}
MID=${MID:-4096x4096x4096}
HELIOS_PIPELINE_STATS=1 timeout 60 node dist/bench/kernel-stats.js '--match=^mm_simt_f32_f32_128x128x8_(8x8|8x16_t128|16x8_t128)_NN_b4c4$' --out=$W/stats.json > $W/stats.log 2>&1; echo "stats exit $?"
n=0
run() { # variant shapes torch
  n=$((n+1))
  HELIOS_CACHE_DIR=/tmp/hc15 timeout 90 node dist/bench/cli.js bench --suite=cuda --iters=40 --warmup=8 --dtype=float32 --variant=$1 --shapes=$2 --check=true --checkShape=384x384x384 --torch=$3 --out=$W/$n-$1.json > $W/$n-$1.log 2>&1
  echo "$n $1 exit $?"
}
run simt_128x128_8x8 $BIG true
run simt_128x128_8x16_t128 $BIG false
run simt_128x128_16x8_t128 $BIG false
run simt_128x128_8x8 $MID false
run simt_128x128_8x16_t128 $MID false
run simt_128x128_16x8_t128 $MID false
nvidia-smi --query-gpu=name,clocks.sm,power.draw,temperature.gpu --format=csv,noheader 2>/dev/null
tar czf ${OUT:-/tmp}/s15call1.tgz -C $W .
python3 - <<'PY'
import json, glob, os
w = "/tmp/s15w"
try:
    for r in json.load(open(f"{w}/stats.json")).get("rows", []): print(r["id"], r.get("stats", {}).get("Register Count"), r.get("stats", {}).get("Shared Memory Size"), r.get("error", ""))
except Exception as e: print("stats", e)
rows = []
for f in sorted(glob.glob(f"{w}/[0-9]*.json")):
    for row in json.load(open(f))["rows"]:
        rows.append({"run": os.path.basename(f)[:-5], **row})
        print(f"{os.path.basename(f)[:-5]:28s} {row['shape']:16s} {row['heliosMs']:8.4f} ms {row['heliosTflops']:6.1f} TF/s  cuBLAS {row.get('cudaTflops') or 0:6.1f}  spot {row.get('spotCheckRelErr', 0):.1e}")
json.dump(rows, open(os.environ.get("OUT", "/tmp") + "/s15call1.json", "w"), indent=1)
PY
