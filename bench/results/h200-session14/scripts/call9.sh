#!/usr/bin/env bash
# session 14 call 9: the f32 SIMT path alone (forced variant), the parity suite's sustained protocol
set -uo pipefail
W=$OUT/w; mkdir -p $W
for v in simt_128x128_8x8 simt_64x64_4x4; do
  HELIOS_CACHE_DIR=/tmp/hc14j timeout 200 node dist/bench/cli.js bench --suite=cuda --iters=40 --warmup=8 --dtype=float32 --variant=$v --shapes=2048x2048x2048,4096x4096x4096,8192x8192x8192 --check=true --checkShape=384x384x384 --out=$W/$v.json > $W/$v.log 2>&1
  echo "$v exit $?"
done
nvidia-smi --query-gpu=clocks.sm,power.draw,temperature.gpu --format=csv,noheader
python3 - <<'PY'
import json, os, glob
w = os.environ["OUT"] + "/w"
for f in sorted(glob.glob(f"{w}/*.json")):
    for row in json.load(open(f))["rows"]:
        print(f"{row['shape']:16s} {row['variant'][:30]:30s} {row['heliosMs']:8.4f} ms {row['heliosTflops']:6.1f} TF/s  cuBLAS {row.get('cudaTflops') or 0:6.1f}")
PY
