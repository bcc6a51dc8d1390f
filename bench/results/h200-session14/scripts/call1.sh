#!/usr/bin/env bash
# session 14 call 1: the parity suite at 4096^3/8192^3, sustained (default: 400 ms of load before timing)
# against rested (--rest=3: 3 s idle before every repeat, both sides), f16 and f32 accumulation,
# with nvidia-smi clocks/power/throttle reasons every 100 ms beside it
set -uo pipefail
export HELIOS_CACHE_DIR=/tmp/hc14
nvidia-smi --query-gpu=timestamp,clocks.sm,power.draw,power.limit,temperature.gpu,clocks_event_reasons.active --format=csv,noheader -lms 100 > $OUT/smi.csv 2>&1 &
SMI=$!
S=4096x4096x4096,8192x8192x8192
stamp() { while IFS= read -r l; do echo "$(date +%s.%N) $l"; done; }
suite() { # name, extra args...
  local name=$1; shift
  echo "== $name: $*"
  timeout 240 node dist/bench/cli.js bench --suite=cuda --iters=40 --warmup=8 --dtype=float16 --check=true --checkShape=384x384x384 --out=$OUT/$name.json "$@" 2>&1 | stamp > $OUT/$name.log
  echo "exit ${PIPESTATUS[0]}"; grep -E "TFLOP/s|FAIL|rror" $OUT/$name.log | tail -3
}
suite acc16-sustained --accF16=true --shapes=$S
sleep 3
suite acc16-rested --accF16=true --shapes=$S --rest=3 --warmMs=0
sleep 3
suite acc16-rested100 --accF16=true --shapes=8192x8192x8192 --rest=3 --warmMs=100
sleep 3
suite acc32-rested --shapes=$S --rest=3 --warmMs=0
sleep 3
suite acc32-sustained --shapes=$S
sleep 3
suite acc16-rested-b --accF16=true --shapes=$S --rest=3 --warmMs=0
sleep 3
suite acc16-sustained-b --accF16=true --shapes=$S
kill $SMI
python3 - <<'PY'
import json, os, glob
out = os.environ["OUT"]
print(f"{'run':22s} {'shape':16s} {'variant':42s} {'helios TF/s':>11s} {'cuBLAS TF/s':>11s} {'ratio':>6s}")
for name in ["acc16-sustained", "acc16-rested", "acc16-rested100", "acc16-rested-b", "acc16-sustained-b", "acc32-sustained", "acc32-rested"]:
    try: r = json.load(open(f"{out}/{name}.json"))
    except Exception as e: print(name, "no json", e); continue
    for row in r["rows"]:
        print(f"{name:22s} {row['shape']:16s} {row['variant'][:42]:42s} {row['heliosTflops']:11.1f} {row['cudaTflops'] or 0:11.1f} {row['ratio'] or 0:6.3f}")
PY
