#!/usr/bin/env bash
# session 14 call 7: the new tuner on the f32 suite (SIMT and bf16x3 candidates, long products) and on the fused phase
set -uo pipefail
W=$OUT/w; mkdir -p $W
S=2048x2048x2048,3072x3072x3072,4096x4096x4096,8192x8192x8192
HELIOS_CACHE_DIR=/tmp/hc14g timeout 300 node dist/bench/cli.js bench --suite=cuda --iters=40 --warmup=8 --dtype=float32 --shapes=$S --check=true --checkShape=384x384x384 --out=$W/f32.json > $W/f32.log 2>&1
echo "f32 exit $?"
HELIOS_CACHE_DIR=/tmp/hc14h OUT=$W/fused bash bench/matmul-gpu.sh --phase=fused > $W/fused.log 2>&1
echo "fused exit $?"
tar czf $OUT/call7.tgz -C $OUT w
python3 - <<'PY'
import json, os
w = os.environ["OUT"] + "/w"
for row in json.load(open(f"{w}/f32.json"))["rows"]:
    print(f"f32 {row['shape']:16s} {row['variant'][:44]:44s} {row['heliosTflops']:7.1f} {row.get('cudaTflops') or 0:7.1f} {row.get('ratio') or 0:6.3f}")
try:
    for r in json.load(open(f"{w}/fused/summary.json"))["fused"]:
        print(f"fused {str(r['size']):16s} {r['dtype']:9s} {r['fusedMs']:.4f} ms vs one {r['unfusedOneKernelMs']:.4f} two {r['unfusedTwoKernelsMs']:.4f}: {r['speedupVsOne']:.2f}x / {r['speedupVsTwo']:.2f}x  err {r['fusedRelErr']:.1e}")
except Exception as e: print("fused summary", e)
PY
