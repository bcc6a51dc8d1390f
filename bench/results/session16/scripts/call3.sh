#!/usr/bin/env bash
# session 16 call 3: the k-tile-pair SIMT tile (_u2) against _sm: GPU fp64 gate, f32 suites ABAB,
# the driver's SASS of both (bench/gpu-host.sh sass), then two f16-accumulation suites at 8192³.
set -uo pipefail
W=/tmp/s16w3; mkdir -p $W
nvidia-smi --query-gpu=name,driver_version,power.limit --format=csv,noheader | tee $W/gpu.txt
timeout 120 node bench/results/session16/scripts/check.mjs $W/check.json; echo "check exit $?"
n=0
suite() { # name args...
  n=$((n+1)); local name=$1; shift
  HELIOS_CACHE_DIR=/tmp/hc16 timeout 170 node dist/bench/cli.js bench --suite=cuda --iters=40 --warmup=8 "$@" --out=$W/$n-$name.json > $W/$n-$name.log 2>&1
  echo "$n $name exit $?"
}
S=2048x2048x2048,4000x4000x4000,4096x4096x4096,8192x8192x8192
for r in 1 2; do
  suite simt_sm --dtype=float32 --variant=simt_128x128_8x8_sm --shapes=$S --check=true --checkShape=384x384x384 --torch=$([ $r = 1 ] && echo true || echo false)
  suite simt_sm_u2 --dtype=float32 --variant=simt_128x128_8x8_sm_u2 --shapes=$S --check=true --checkShape=384x384x384 --torch=false
done
SASS_CASES="float32:simt_128x128_8x8_sm:4096 float32:simt_128x128_8x8_sm_u2:4096 float16+acc16:cm_256x256x32_w2x4_v128_s1_kpa_ah2_stk:8192 float16:cm_128x256x32_w2x4_v128_s1_kpr_b2_stk:8192" \
  OUT=$W bash bench/gpu-host.sh sass > $W/sass-part.log 2>&1; echo "sass part exit $?"
suite f16acc8k --dtype=float16 --accF16=true --shapes=8192x8192x8192 --check=false
suite f16acc8k --dtype=float16 --accF16=true --shapes=8192x8192x8192 --check=false
tar czf ${OUT:-/tmp}/s16call3.tgz -C $W .
grep -E "simt|loop|==" $W/sass-part.log | grep -B1 -A2 "mm_simt" | cut -c1-260
python3 - <<'PY'
import json, glob, os
w = "/tmp/s16w3"
rows = []
for f in sorted(glob.glob(f"{w}/[0-9]*.json"), key=lambda f: int(os.path.basename(f).split("-")[0])):
    for row in json.load(open(f))["rows"]:
        rows.append({"run": os.path.basename(f)[:-5], **row})
        print(f"{os.path.basename(f)[:-5]:14s} {row['shape']:16s} {row['heliosMs']:8.4f} ms {row['heliosTflops']:6.1f} TF/s  cuBLAS {row.get('cudaTflops') or 0:6.1f}  {row['variant'][:44]}")
json.dump(rows, open(os.environ.get("OUT", "/tmp") + "/s16call3.json", "w"), indent=1)
PY
