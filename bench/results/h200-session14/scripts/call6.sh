#!/usr/bin/env bash
# session 14 call 6: another machine start: the issue's f16-accumulation suite (new tuner) three times, fresh caches
set -uo pipefail
W=$OUT/w; mkdir -p $W
S=2048x2048x2048,3072x3072x3072,4096x4096x4096,8192x8192x8192
for i in 1 2 3; do
  sleep 2
  HELIOS_CACHE_DIR=/tmp/hc14f-$i timeout 240 node dist/bench/cli.js bench --suite=cuda --iters=40 --warmup=8 --dtype=float16 --accF16=true --shapes=$S --check=true --checkShape=384x384x384 --out=$W/$i-acc16.json > $W/$i-acc16.log 2>&1
  echo "$i exit $?"
done
tar czf $OUT/call6.tgz -C $OUT w
python3 - <<'PY'
import json, os, glob
w = os.environ["OUT"] + "/w"
for f in sorted(glob.glob(f"{w}/*.json")):
    for row in json.load(open(f))["rows"]:
        print(f"{os.path.basename(f)[:-5]:10s} {row['shape']:16s} {row['variant'][:44]:44s} {row['heliosTflops']:7.1f} {row.get('cudaTflops') or 0:7.1f} {row.get('ratio') or 0:6.3f}")
PY
