#!/usr/bin/env bash
# session 14 call 8: the fused phase again after the fix (the product alone gets its own plan's buffers)
set -uo pipefail
W=$OUT/w; mkdir -p $W
HELIOS_CACHE_DIR=/tmp/hc14i OUT=$W/fused bash bench/matmul-gpu.sh --phase=fused > $W/fused.log 2>&1
echo "fused exit $?"
tar czf $OUT/call8.tgz -C $OUT w
python3 - <<'PY'
import json, os
w = os.environ["OUT"] + "/w"
for r in json.load(open(f"{w}/fused/summary.json"))["fused"]:
    if "error" in r: print("fused", r["size"], r["dtype"], "ERROR", r["error"]); continue
    print(f"fused {str(r['size']):16s} {r['dtype']:9s} {r['fusedMs']:.4f} ms ({r['variant']}) product {r['productMs']:.4f} ({r['plainVariant']}) one {r['unfusedOneKernelMs']:.4f} two {r['unfusedTwoKernelsMs']:.4f}: {r['speedupVsOne']:.2f}x / {r['speedupVsTwo']:.2f}x  err {r['fusedRelErr']:.1e}")
PY
