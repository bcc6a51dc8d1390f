#!/usr/bin/env bash
# session 16 call 2: the driver's binaries of four kernels, for SASS. Each case runs in a fresh
# Helios pipeline cache and a fresh driver shader cache, so each cache holds only that run's pipelines.
set -uo pipefail
W=/tmp/s16w2; mkdir -p $W
{ which zstd nvdisasm cuobjdump nvcc; ls -d /usr/local/cuda*/bin 2>/dev/null; python3 --version;
  python3 -c "import zstandard; print('py zstandard', zstandard.__version__)" 2>&1 | tail -1; } > $W/tools.txt 2>&1
cat $W/tools.txt
case_run() { # name command...
  local name=$1; shift
  mkdir -p $W/$name/helios $W/$name/driver
  HELIOS_CACHE_DIR=$W/$name/helios __GL_SHADER_DISK_CACHE_PATH=$W/$name/driver __GL_SHADER_DISK_CACHE_SKIP_CLEANUP=1 \
    timeout 120 "$@" > $W/$name/run.log 2>&1
  echo "$name exit $? $(find $W/$name -type f | wc -l) files $(du -sk $W/$name | cut -f1) KB"
}
B="node dist/bench/cli.js bench --suite=cuda --iters=2 --warmup=1 --torch=false --check=false --warmMs=0"
case_run fma node dist/bench/fma-peak.js --steps=64 --iters=1 --out=$W/fma/fma.json
case_run simt $B --dtype=float32 --variant=simt_128x128_8x8_sm --shapes=4096x4096x4096 --out=$W/simt/r.json
case_run f16acc $B --dtype=float16 --accF16=true --variant=cm_256x256x32_w2x4_v128_s1_kpa_ah2_stk --shapes=8192x8192x8192 --out=$W/f16acc/r.json
case_run f16 $B --dtype=float16 --variant=cm_128x256x32_w2x4_v128_s1_kpr_b2_stk --shapes=8192x8192x8192 --out=$W/f16/r.json
find $W -type f -size +1k | head -40
tar czf ${OUT:-/tmp}/s16call2.tgz -C $W .
