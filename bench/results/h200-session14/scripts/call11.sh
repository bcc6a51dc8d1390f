#!/usr/bin/env bash
# session 14 call 11: the warp-tiled SIMT thread layout (_wt) against simt_128x128_8x8, forced, sustained suite; register counts
set -uo pipefail
W=$OUT/w; mkdir -p $W
HELIOS_PIPELINE_STATS=1 timeout 120 node dist/bench/kernel-stats.js '--match=^mm_simt_f32_f32_128x128x8_8x8_NN_b4c4w?$' --out=$W/stats.json > $W/stats.log 2>&1; echo "stats exit $?"
n=0
for v in simt_128x128_8x8 simt_128x128_8x8_wt simt_128x128_8x8 simt_128x128_8x8_wt; do
  n=$((n+1))
  HELIOS_CACHE_DIR=/tmp/hc14l timeout 200 node dist/bench/cli.js bench --suite=cuda --iters=40 --warmup=8 --dtype=float32 --variant=$v --shapes=4096x4096x4096,8192x8192x8192 --check=true --checkShape=384x384x384 --torch=$([ $n = 1 ] && echo true || echo false) --out=$W/$n-$v.json > $W/$n-$v.log 2>&1
  echo "$n $v exit $?"
done
python3 - <<'PY'
import json, os, glob
w = os.environ["OUT"] + "/w"
try:
    for r in json.load(open(f"{w}/stats.json")).get("rows", []): print(r["id"], r.get("stats", {}).get("Register Count"), r.get("stats", {}).get("Shared Memory Size"), r.get("error", ""))
except Exception as e: print("stats", e)
for f in sorted(glob.glob(f"{w}/*.json")):
    if "stats" in f: continue
    for row in json.load(open(f))["rows"]:
        print(f"{os.path.basename(f)[:-5]:28s} {row['shape']:16s} {row['heliosMs']:8.4f} ms {row['heliosTflops']:6.1f} TF/s  cuBLAS {row.get('cudaTflops') or 0:6.1f}  spot {row.get('spotCheckRelErr', 0):.1e}")
PY
