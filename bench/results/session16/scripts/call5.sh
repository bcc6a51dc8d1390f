#!/usr/bin/env bash
# session 16 call 5: a fourth machine start: the f16-accumulation suite at 8192³ three times and the
# default SIMT tile at 4096³ (fp64 gate at 384³), one tuning cache.
set -uo pipefail
W=/tmp/s16w5; mkdir -p $W
nvidia-smi --query-gpu=name,driver_version,power.limit --format=csv,noheader | tee $W/gpu.txt
n=0
suite() { # name args...
  n=$((n+1)); local name=$1; shift
  HELIOS_CACHE_DIR=/tmp/hc16-5 timeout 170 node dist/bench/cli.js bench --suite=cuda --iters=40 --warmup=8 "$@" --out=$W/$n-$name.json > $W/$n-$name.log 2>&1
  echo "$n $name exit $?"
}
suite f16acc8k --dtype=float16 --accF16=true --shapes=8192x8192x8192 --check=true --checkShape=384x384x384
suite f16acc8k --dtype=float16 --accF16=true --shapes=8192x8192x8192 --check=false
suite f16acc8k --dtype=float16 --accF16=true --shapes=8192x8192x8192 --check=false
suite simt_sm --dtype=float32 --variant=simt_128x128_8x8_sm --shapes=4096x4096x4096 --check=true --checkShape=384x384x384
tar czf ${OUT:-/tmp}/s16call5.tgz -C $W .
python3 - <<'PY'
import json, glob, os
w = "/tmp/s16w5"
rows = []
for f in sorted(glob.glob(f"{w}/[0-9]*.json"), key=lambda f: int(os.path.basename(f).split("-")[0])):
    for row in json.load(open(f))["rows"]:
        rows.append({"run": os.path.basename(f)[:-5], **row})
        print(f"{os.path.basename(f)[:-5]:12s} {row['shape']:16s} {row['heliosMs']:8.4f} ms {row['heliosTflops']:6.1f} TF/s  cuBLAS {row.get('cudaTflops') or 0:6.1f}  {row['variant'][:44]}")
json.dump(rows, open(os.environ.get("OUT", "/tmp") + "/s16call5.json", "w"), indent=1)
PY
