#!/usr/bin/env bash
# session 14 call 3: the tuner timing product by product (dist/) against round-long turns (dist-old/,
# HEAD 3803862), same machine, fresh tuning cache per suite, alternating ABBA; the issue's suite command.
set -uo pipefail
W=$OUT/w; mkdir -p $W
nvidia-smi --query-gpu=timestamp,clocks.sm,power.draw,temperature.gpu,clocks_event_reasons.active --format=csv,noheader -lms 200 > $W/smi.csv 2>&1 &
SMI=$!
S=2048x2048x2048,3072x3072x3072,4096x4096x4096,8192x8192x8192
n=0
suite() { # tree name args...
  local tree=$1 name=$2; shift 2; n=$((n+1))
  sleep 2
  HELIOS_CACHE_DIR=/tmp/hc14c-$n timeout 240 node $tree/bench/cli.js bench --suite=cuda --iters=40 --warmup=8 --shapes=$S --check=true --checkShape=384x384x384 --out=$W/$n-$name.json "$@" > $W/$n-$name.log 2>&1
  echo "$n $name exit $?"
}
suite dist new-acc16 --dtype=float16 --accF16=true
suite dist-old old-acc16 --dtype=float16 --accF16=true
suite dist-old old-f16 --dtype=float16
suite dist new-f16 --dtype=float16
suite dist new-bf16 --dtype=bfloat16
suite dist-old old-bf16 --dtype=bfloat16
suite dist-old old-acc16 --dtype=float16 --accF16=true
suite dist new-acc16 --dtype=float16 --accF16=true
kill $SMI
tar czf $OUT/call3.tgz -C $OUT w
python3 - <<'PY'
import json, os, glob, re
w = os.environ["OUT"] + "/w"
print(f"{'run':16s} {'shape':16s} {'variant':44s} {'helios':>7s} {'cuBLAS':>7s} {'ratio':>6s}")
for f in sorted(glob.glob(f"{w}/*.json"), key=lambda x: int(os.path.basename(x).split('-')[0])):
    r = json.load(open(f))
    for row in r["rows"]:
        print(f"{os.path.basename(f)[:-5]:16s} {row['shape']:16s} {row['variant'][:44]:44s} {row['heliosTflops']:7.1f} {row.get('cudaTflops') or 0:7.1f} {row.get('ratio') or 0:6.3f}")
PY
