#!/usr/bin/env bash
# session 16 call 1: the f32 SIMT tiles (fma-peak forms, then the f32 suite per forced SIMT tile),
# then the issue's f16-accumulation suite on 2048³–8192³ and two more 8192³ suites, one tuning cache.
set -uo pipefail
W=/tmp/s16w1; mkdir -p $W
nvidia-smi --query-gpu=name,driver_version,power.limit --format=csv,noheader | tee $W/gpu.txt
timeout 150 node dist/bench/fma-peak.js --steps=4096 --iters=10 --out=$W/fma-peak.json > $W/fma-peak.log 2>&1; echo "fma-peak exit $?"
n=0
suite() { # name args...
  n=$((n+1)); local name=$1; shift
  HELIOS_CACHE_DIR=/tmp/hc16 timeout 170 node dist/bench/cli.js bench --suite=cuda --iters=40 --warmup=8 "$@" --out=$W/$n-$name.json > $W/$n-$name.log 2>&1
  echo "$n $name exit $?"
}
S=2048x2048x2048,4000x4000x4000,4096x4096x4096,8192x8192x8192
suite simt_sm --dtype=float32 --variant=simt_128x128_8x8_sm --shapes=$S --check=true --checkShape=384x384x384 --torch=true
suite simt_t128_sm --dtype=float32 --variant=simt_128x128_8x16_t128_sm --shapes=$S --check=true --checkShape=384x384x384 --torch=false
suite simt_old --dtype=float32 --variant=simt_128x128_8x8 --shapes=$S --check=true --checkShape=384x384x384 --torch=false
suite f16acc --dtype=float16 --accF16=true --shapes=2048x2048x2048,3072x3072x3072,4096x4096x4096,8192x8192x8192 --check=true --checkShape=384x384x384
suite f16acc8k --dtype=float16 --accF16=true --shapes=8192x8192x8192 --check=false
suite f16acc8k --dtype=float16 --accF16=true --shapes=8192x8192x8192 --check=false
nvidia-smi --query-gpu=name,clocks.sm,power.draw,temperature.gpu --format=csv,noheader 2>/dev/null
tar czf ${OUT:-/tmp}/s16call1.tgz -C $W .
python3 - <<'PY'
import json, glob, os
w = "/tmp/s16w1"
try:
    fp = json.load(open(f"{w}/fma-peak.json"))
    for r in fp.get("rows", fp if isinstance(fp, list) else []):
        print("fma-peak", r.get("form"), round(r.get("tflops", 0), 1))
except Exception as e:
    print("fma-peak json:", e)
rows = []
for f in sorted(glob.glob(f"{w}/[0-9]*.json"), key=lambda f: int(os.path.basename(f).split("-")[0])):
    for row in json.load(open(f))["rows"]:
        rows.append({"run": os.path.basename(f)[:-5], **row})
        print(f"{os.path.basename(f)[:-5]:16s} {row['shape']:16s} {row['heliosMs']:8.4f} ms {row['heliosTflops']:6.1f} TF/s  cuBLAS {row.get('cudaTflops') or 0:6.1f}  {row['variant'][:44]}")
json.dump(rows, open(os.environ.get("OUT", "/tmp") + "/s16call1.json", "w"), indent=1)
PY
