#!/usr/bin/env bash
# GPU-host runs of issue 6 (each part < 8 minutes; JSON and logs under $OUT):
#   bash bench/train/gpu.sh demo    # npm run demo on the GPU: loss must reach < 1.6 nats/char (val)
#   bash bench/train/gpu.sh demo16  # the same with 16-bit matmul operands (--matmul16)
#   bash bench/train/gpu.sh suite   # GPT-2 124M, B=16, T=1024: Helios f32 + matmul16 vs PyTorch (f32_strict, f32, bf16, compile)
#   bash bench/train/gpu.sh smoke   # the tiny suite (seconds): checks the pipeline end to end
#   bash bench/train/gpu.sh soak    # 100 consecutive GPT-2 steps, f32 and matmul16: finite losses, flat pool
# Expects dist/ built (npx tsc -p tsconfig.json) and the native addon in native/.
set -euo pipefail
OUT="${OUT:-perf/train-gpu}"
mkdir -p "$OUT"
part="${1:-demo}"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv > "$OUT/gpu.txt" 2>/dev/null || true
case "$part" in
  demo)
    timeout 450 node dist/train/demo.js --json="$OUT/demo.json" --checkpoint=/tmp/helios-demo.safetensors 2>&1 | tee "$OUT/demo.log"
    ;;
  demo16)
    timeout 450 node dist/train/demo.js --matmul16 --json="$OUT/demo16.json" 2>&1 | tee "$OUT/demo16.log"
    ;;
  suite)
    timeout "${SUITE_TIMEOUT:-470}" node dist/bench/train/cli.js --work-dir=/tmp/helios-train --max-seconds="${MAX_S:-110}" --out="$OUT/train-suite.json" 2>&1 | tee "$OUT/train-suite.log"
    ;;
  smoke)
    timeout 300 node dist/bench/train/cli.js --tiny --work-dir=/tmp/helios-train-tiny --out="$OUT/train-suite-tiny.json" 2>&1 | tee "$OUT/train-suite-tiny.log"
    ;;
  soak)
    for m in "" --matmul16; do
      timeout 240 node dist/bench/train/soak.js --steps=100 $m --out="$OUT/soak${m:+-m16}.json" 2>&1 | tee -a "$OUT/soak.log"
    done
    ;;
  *) echo "usage: $0 demo|demo16|suite|smoke|soak" >&2; exit 2 ;;
esac
