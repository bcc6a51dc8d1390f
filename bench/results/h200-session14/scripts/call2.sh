#!/usr/bin/env bash
# session 14 call 2: bench/matmul-gpu.sh --phase=perf (parity suites f16, bf16, f16-acc, f32 at
# 2048^3-8192^3 + the fused epilogue), then the issue's f16-accumulation suite twice more, each with
# a fresh tuning cache; nvidia-smi clocks/power every 200 ms beside it. Everything lands in one tarball.
set -uo pipefail
W=$OUT/w; mkdir -p $W
nvidia-smi --query-gpu=timestamp,clocks.sm,power.draw,power.limit,temperature.gpu,clocks_event_reasons.active --format=csv,noheader -lms 200 > $W/smi.csv 2>&1 &
SMI=$!
stamp() { while IFS= read -r l; do echo "$(date +%s.%N) $l"; done; }
HELIOS_CACHE_DIR=/tmp/hc14-perf OUT=$W/perf bash bench/matmul-gpu.sh --phase=perf 2>&1 | stamp > $W/perf.log
echo "perf exit ${PIPESTATUS[0]}"
S=2048x2048x2048,3072x3072x3072,4096x4096x4096,8192x8192x8192
for i in 1 2; do
  sleep 3
  HELIOS_CACHE_DIR=/tmp/hc14-acc$i timeout 240 node dist/bench/cli.js bench --suite=cuda --iters=40 --warmup=8 --dtype=float16 --accF16=true --shapes=$S --check=true --checkShape=384x384x384 --out=$W/acc16-$i.json 2>&1 | stamp > $W/acc16-$i.log
  echo "acc16-$i exit ${PIPESTATUS[0]}"
done
kill $SMI
tar czf $OUT/call2.tgz -C $OUT w
python3 - <<'PY'
import json, os, glob
w = os.environ["OUT"] + "/w"
files = sorted(glob.glob(f"{w}/perf/*.json")) + [f"{w}/acc16-1.json", f"{w}/acc16-2.json"]
print(f"{'file':28s} {'shape':16s} {'variant':44s} {'helios':>7s} {'cuBLAS':>7s} {'ratio':>6s}")
for f in files:
    try: r = json.load(open(f))
    except Exception as e: print(os.path.basename(f), "unreadable", e); continue
    if not isinstance(r, dict) or "rows" not in r: continue
    tag = os.path.basename(f)[:-5] + ("/acc16" if r.get("meta", {}).get("accF16") else "")
    for row in r["rows"]:
        if "heliosTflops" not in row: continue
        print(f"{tag[:28]:28s} {row['shape']:16s} {row['variant'][:44]:44s} {row['heliosTflops']:7.1f} {row.get('cudaTflops') or 0:7.1f} {row.get('ratio') or 0:6.3f}")
PY
cat $W/perf/summary.json 2>/dev/null | head -c 3000
