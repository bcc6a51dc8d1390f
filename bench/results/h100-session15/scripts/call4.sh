#!/usr/bin/env bash
# session 15 call 4: GPU fp64 gate of the SIMT variants (check.mjs), then the f32 suite with the
# shipped default SIMT tile (_sm), the 128-thread _sm tile and the previous default, forced
set -uo pipefail
W=/tmp/s15w4; mkdir -p $W
S=${S:-2048x2048x2048,4000x4000x4000,4096x4096x4096,8192x8192x8192}
timeout 120 node bench/results/h100-session15/scripts/check.mjs $W/check.json; echo "check exit $?"
n=0
run() { # variant torch
  n=$((n+1))
  HELIOS_CACHE_DIR=/tmp/hc15 timeout 100 node dist/bench/cli.js bench --suite=cuda --iters=40 --warmup=8 --dtype=float32 --variant=$1 --shapes=$S --check=true --checkShape=384x384x384 --torch=$2 --out=$W/$n-$1.json > $W/$n-$1.log 2>&1
  echo "$n $1 exit $?"
}
run simt_128x128_8x8_sm true
run simt_128x128_8x16_t128_sm false
run simt_128x128_8x8 false
nvidia-smi --query-gpu=name,clocks.sm,power.draw,temperature.gpu --format=csv,noheader 2>/dev/null
tar czf ${OUT:-/tmp}/s15call4.tgz -C $W .
python3 - <<'PY'
import json, glob, os
w = "/tmp/s15w4"
rows = []
for f in sorted(glob.glob(f"{w}/[0-9]*.json"), key=lambda f: int(os.path.basename(f).split("-")[0])):
    for row in json.load(open(f))["rows"]:
        rows.append({"run": os.path.basename(f)[:-5], **row})
        print(f"{os.path.basename(f)[:-5]:30s} {row['shape']:16s} {row['heliosMs']:8.4f} ms {row['heliosTflops']:6.1f} TF/s  cuBLAS {row.get('cudaTflops') or 0:6.1f}  {row['variant'][:40]}")
json.dump(rows, open(os.environ.get("OUT", "/tmp") + "/s15call4.json", "w"), indent=1)
PY
