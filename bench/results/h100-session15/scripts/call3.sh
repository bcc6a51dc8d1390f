#!/usr/bin/env bash
# session 15 call 3: what the SIMT tile's staging costs: unchecked loads/stores on whole tiles (_al,
# HELIOS_MATMUL_ALIGNED), the next k-tile stored halfway through the k-steps (_sm), and a probe with
# no global loads at all (_nog, results wrong, --check=false); ABAB at 4096³, sustained protocol
# (simt_128x128_8x8_nog was a probe variant, removed after this call; simt_128x128_8x16_t128 likewise)
set -uo pipefail
W=/tmp/s15w3; mkdir -p $W
S=${S:-4096x4096x4096}
HELIOS_PIPELINE_STATS=1 timeout 60 node dist/bench/kernel-stats.js '--match=^mm_simt_f32_f32_128x128x8_8x8_NN_b4c4' --out=$W/stats.json > $W/stats.log 2>&1; echo "stats exit $?"
n=0
run() { # variant aligned(0/1) torch check
  n=$((n+1))
  HELIOS_MATMUL_ALIGNED=$2 HELIOS_CACHE_DIR=/tmp/hc15 timeout 90 node dist/bench/cli.js bench --suite=cuda --iters=40 --warmup=8 --dtype=float32 --variant=$1 --shapes=$S --check=$4 --checkShape=384x384x384 --torch=$3 --out=$W/$n-$1-al$2.json > $W/$n-$1-al$2.log 2>&1
  echo "$n $1 aligned=$2 exit $?"
}
run simt_128x128_8x8 0 true true
run simt_128x128_8x8 1 false true
run simt_128x128_8x8_sm 1 false true
run simt_128x128_8x8_nog 1 false false
run simt_128x128_8x8_sm 0 false true
run simt_128x128_8x16_t128 1 false true
run simt_128x128_8x8 0 false true
run simt_128x128_8x8 1 false true
run simt_128x128_8x8_sm 1 false true
nvidia-smi --query-gpu=name,clocks.sm,power.draw,temperature.gpu --format=csv,noheader 2>/dev/null
tar czf ${OUT:-/tmp}/s15call3.tgz -C $W .
python3 - <<'PY'
import json, glob, os
w = "/tmp/s15w3"
try:
    for r in json.load(open(f"{w}/stats.json")).get("rows", []): print(r["id"], r.get("stats", {}).get("Register Count"), r.get("stats", {}).get("Shared Memory Size"), r.get("error", ""))
except Exception as e: print("stats", e)
rows = []
for f in sorted(glob.glob(f"{w}/[0-9]*.json"), key=lambda f: int(os.path.basename(f).split("-")[0])):
    for row in json.load(open(f))["rows"]:
        rows.append({"run": os.path.basename(f)[:-5], **row})
        print(f"{os.path.basename(f)[:-5]:34s} {row['shape']:16s} {row['heliosMs']:8.4f} ms {row['heliosTflops']:6.1f} TF/s  cuBLAS {row.get('cudaTflops') or 0:6.1f}  {row['variant'][:40]}")
json.dump(rows, open(os.environ.get("OUT", "/tmp") + "/s15call3.json", "w"), indent=1)
PY
