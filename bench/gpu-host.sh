#!/usr/bin/env bash
# One call on the NVIDIA GPU host: builds nothing, checks, times, writes one tarball.
#   source .gpu/enter.sh; bash bench/gpu-host.sh core|matmul|matmul128|matmul-ab|train|ops-train|matmul-train|probe|colsum|lnbwd|runtime-ops|flash|clocks|simt|sass
# Needs dist/ (tsc) and native/ (release addon) carried from the build machine.
# Results: $OUT/<part>.tgz (JSON + logs), a short table at the end of stdout.
set -uo pipefail
part=${1:-core}
dest=${OUT:-/tmp}
work=/tmp/helios-$part
rm -rf "$work"; mkdir -p "$work"
export HELIOS_CACHE_DIR=${HELIOS_CACHE_DIR:-/tmp/helios-cache}
nvidia-smi --query-gpu=name,driver_version,clocks.sm --format=csv > "$work/nvidia-smi.csv" 2>&1
run() { # run <name> <timeout-s> <command...>: log to $work/<name>.log, keep going on failure
  local name=$1 limit=$2; shift 2
  timeout "$limit" "$@" > "$work/$name.log" 2>&1
  echo "$name: exit $?" | tee -a "$work/status.txt"
}
case "$part" in
  core)
    run dispatch 200 node dist/bench/dispatch.js --barrier=global,buffer --out="$work/dispatch.json"
    run ops 200 node dist/bench/ops.js --out="$work/ops.json"
    run compile 60 node dist/bench/compile.js --out="$work/compile.json"
    run coop-tests 120 node dist/bench/coop-tests.js
    ;;
  matmul)
    export OUT=$work/mm
    run matmul-check "${CHECK_S:-270}" bash bench/matmul-gpu.sh --phase=check
    run matmul-perf "${PERF_S:-270}" bash bench/matmul-gpu.sh --phase=perf
    ;;
  matmul128)
    # The 128-bit staged coopmat tiles (bench/MATMUL_NOTES.md, rounds 3-4) against the current best:
    # quick gate of the listed ones (75 s cap), sweep at 2048/4096/8192³ f16 and 4096/8192³ f16 acc,
    # then registers/spills of the swept tiles (~3.5-4 min in all). Round 4: the two-workgroups-per-SM
    # tiles (4-subgroup 128×128, 8-subgroup single-stage 128×128); run 15's losers left the list.
    export OUT=$work/mm
    : "${TAIL_LINES:=110}" # every sweep row and every kernel's registers in the stdout summary
    new=cm_128x128x32_w2x2_v128_s1,cm_128x128x64_w2x2_v128_s1,cm_128x128x32_w2x2_v128_lk,cm_128x128x32_w2x4_v128_s1,cm_128x256x32_w2x4_v128_s1,cm_256x128x32_w4x2_v128_s1,cm_128x128x64_w2x4_v128_s1,cm_128x256x16_w2x4_v128_pf2,cm_128x256x16_w2x2_v128,cm_128x256x32_w2x2_v128_s1,cm_256x256x32_w4x2_v128_s1
    base=cm_128x256x16_w2x4,cm_128x128x32_w2x4,cm_128x128x32_w2x2,cm_128x256x16_w2x2
    run matmul128 "${CHECK_S:-210}" bash bench/matmul-gpu.sh --phase=check --variants=$new --baseline=$base --checkBudget=75
    # NN kernels of those tiles (f32 acc: 8-subgroup 128×256 / 256×128 / 128×128, 4-subgroup 128×128;
    # f16 acc: the relu forms), not the run-15 probes (_du, _le, 128×128×16)
    HELIOS_PIPELINE_STATS=1 run kernel-stats 75 node dist/bench/kernel-stats.js --out="$work/kernel-stats.json" \
      --match='^(?!.*(_split$|_du|_le|128x128x16))mm_cm_f16_(acc32_f32_((128x256|256x128|128x128)x\w+_w(2x4|4x2)|128x128x\w+_w2x2)_NN_v(44|88)\w*|acc16_f16_(128x256|256x128|128x128|256x256)x\w+_NN_v88\w*_relu)$'
    ;;
  train)
    export OUT=$work/train
    run train-suite "${TRAIN_S:-420}" bash bench/train/gpu.sh suite
    [ "${SKIP_DEMO:-0}" = 1 ] || run train-demo 150 bash bench/train/gpu.sh demo
    ;;
  matmul-train)
    export OUT=$work/mm
    run matmul-check "${CHECK_S:-230}" bash bench/matmul-gpu.sh --phase=check
    run matmul-perf "${PERF_S:-180}" bash bench/matmul-gpu.sh --phase=perf
    export OUT=$work/train
    run train-suite "${TRAIN_S:-170}" bash bench/train/gpu.sh suite
    ;;
  ops-train)
    run ops 150 node dist/bench/ops.js --out="$work/ops.json"
    export OUT=$work/train
    run train-suite 400 bash bench/train/gpu.sh suite
    ;;
  probe)
    # Evidence for the next kernel changes: driver statistics, ops (GPU span timing), and
    # where a GPT-2 124M training step spends its GPU time (eager, f32 and matmul16).
    HELIOS_PIPELINE_STATS=1 run kernel-stats 120 node dist/bench/kernel-stats.js --out="$work/kernel-stats.json"
    run ops 150 node dist/bench/ops.js --out="$work/ops.json"
    run profile-f32 100 node dist/bench/train/profile-step.js --out="$work/profile-f32.json"
    run profile-m16 100 node dist/bench/train/profile-step.js --matmul16 --out="$work/profile-m16.json"
    ;;
  colsum)
    # Issue 27's column sums (bias gradients, LayerNorm dw/db at [16384, 768|2304|3072], f16 and f32):
    # the shipped plan, then the plan's knobs swept, then where a matmul16 step spends its GPU time
    # (~3 min; the kernels the plan replaced are in RESULTS, Session 20's column-sum section).
    : "${TAIL_LINES:=28}" # the whole table in stdout
    run colsum 150 node dist/bench/colsum.js --out="$work/colsum.json"
    run colsum-sweep 200 node dist/bench/colsum.js --target=264,528,1056 --segment=128,256 --out="$work/colsum-sweep.json"
    run profile-m16 100 node dist/bench/train/profile-step.js --matmul16 --out="$work/profile-m16.json"
    ;;
  lnbwd)
    # Issue 27's fused LayerNorm backward (ts/kernels/layernorm-bwd.ts): the separate passes against
    # the fused one (dx + dw + db, f32 as the trainer runs it, f16 too) at [16384, 768 | 2048 | 3072],
    # the fused plan's knobs at 768, then matmul16 step profiles with each (~4 min).
    : "${TAIL_LINES:=40}"
    run lnbwd 150 node dist/bench/colsum.js --ops=lnbwd --dtypes=f32,f16 --cols=768,2048,3072 --out="$work/lnbwd.json"
    run lnbwd-sweep 200 node dist/bench/colsum.js --ops=lnbwd --dtypes=f32 --cols=768 --ln-partials=64,128,256,512 --ln-slots=1,2,4 --ln-prefetch=0,1 --out="$work/lnbwd-sweep.json"
    run profile-m16-separate 100 node dist/bench/train/profile-step.js --matmul16 --ln-bwd=separate --out="$work/profile-m16-separate.json"
    run profile-m16-fused 100 node dist/bench/train/profile-step.js --matmul16 --ln-bwd=fused --out="$work/profile-m16-fused.json"
    ;;
  runtime-ops)
    # Transfers with per-phase read traces, streaming launch shapes, ops, a matmul16 step profile.
    HELIOS_TRACE_READS=1 run dispatch 200 node dist/bench/dispatch.js --out="$work/dispatch.json"
    run bandwidth 120 node dist/bench/bandwidth.js --out="$work/bandwidth.json"
    run ops 150 node dist/bench/ops.js --out="$work/ops.json"
    run profile-m16 100 node dist/bench/train/profile-step.js --matmul16 --out="$work/profile-m16.json"
    ;;
  flash)
    # Tensor-core flash forwards: correctness (and the acc/A lane layout), registers and spills
    # per variant, then all variants timed beside PyTorch sdpa.
    run coop-tests 150 node dist/bench/coop-tests.js
    HELIOS_PIPELINE_STATS=1 run kernel-stats 90 node dist/bench/kernel-stats.js --match='^backend/flash_fwd_cmacc/d64\w*$' --out="$work/kernel-stats.json"
    run flash 150 node dist/bench/flash.js ${FLASH_ARGS:-} --out="$work/flash.json"
    ;;
  clocks)
    # Runtime latencies at warm clocks, and the 3072³/4096³ swing: the f16 parity suite run
    # repeatedly, every log line time-stamped, with the SM clock sampled every 20 ms beside it.
    cat /sys/kernel/mm/transparent_hugepage/enabled /sys/kernel/mm/transparent_hugepage/defrag > "$work/thp.txt" 2>&1
    nvidia-smi --query-gpu=timestamp,clocks.sm,clocks.mem,power.draw,temperature.gpu,clocks_throttle_reasons.active \
      --format=csv -lms 20 > "$work/clocks.csv" 2>&1 & sampler=$!
    [ "${SKIP_DISPATCH:-0}" = 1 ] || HELIOS_TRACE_READS=1 run dispatch 200 node dist/bench/dispatch.js --out="$work/dispatch.json"
    stamp() { while IFS= read -r l; do printf '%s %s\n' "$(date +%T.%N)" "$l"; done; }
    for i in ${SUITE_RUNS:-1 2}; do
      timeout 150 node dist/bench/cli.js bench --suite=cuda --dtype=float16 --iters=40 --warmup=8 \
        --shapes=${SUITE_SHAPES:-2048x2048x2048,3072x3072x3072,4096x4096x4096,8192x8192x8192} --check=false \
        --out="$work/suite-f16-$i.json" 2>&1 | stamp > "$work/suite-f16-$i.log"
      echo "suite-f16-$i: exit ${PIPESTATUS[0]}" | tee -a "$work/status.txt"
    done
    kill "$sampler" 2>/dev/null
    ;;
  matmul-ab)
    # Session 5's A/B of the matmul paths (bench/MATMUL_NOTES.md, round 5): every variant timed with
    # unchecked and checked loads, and each output path (16-byte / coopmat / 8-byte staged stores),
    # on the GPT-2 products and squares; then a K sweep at M×N = 16384×2304 (fixed cost per product).
    V=${AB_VARIANTS:-cm_128x128x32_w2x2_v128_s1,cm_128x256x32_w2x4_v128_s1,cm_128x128x64_w2x4_v128_s1_pl}
    run ab-shapes 300 node dist/bench/matmul-shapes.js --checked=1 --stores=1 --square=2048,4096,8192 --variants="$V" --out="$work/ab-shapes.json"
    run k-sweep 120 node dist/bench/matmul-shapes.js --training=0 --stores=1 \
      --extra=16384x2304x256,16384x2304x768,16384x2304x3072 --variants="$V" --out="$work/k-sweep.json"
    ;;
  simt)
    # The f32 SIMT tiles (bench/MATMUL_NOTES.md, round 15): the FMA rate of the tile's inner-loop
    # parts, then the parity suite per forced SIMT variant (fp64 gate at 384³; cuBLAS f32 beside the
    # first), whole tiles and a 4000³ edge-tile shape (~2 min).
    run fma-peak 120 node dist/bench/fma-peak.js ${FMA_ARGS:-} --out="$work/fma-peak.json"
    first=true
    for v in ${SIMT_VARIANTS:-simt_128x128_8x8_sm simt_128x128_8x16_t128_sm simt_128x128_8x8}; do
      run "suite-$v" 150 node dist/bench/cli.js bench --suite=cuda --dtype=float32 --iters=40 --warmup=8 --variant="$v" \
        --shapes=${SIMT_SHAPES:-2048x2048x2048,4000x4000x4000,4096x4096x4096,8192x8192x8192} --check=true \
        --checkShape=384x384x384 --torch=$first --out="$work/suite-$v.json"
      first=false
    done
    ;;
  sass)
    # The driver's machine code (bench/sass.py, MATMUL_NOTES round 16): the fma-peak forms and the
    # shipped tiles, each compiled once into an empty driver disk cache (an empty Helios pipeline
    # cache too, or the driver would not compile them), then extracted and disassembled here.
    export __GL_SHADER_DISK_CACHE_PATH=$work/nvcache __GL_SHADER_DISK_CACHE_SKIP_CLEANUP=1 HELIOS_CACHE_DIR=$work/helios-cache
    mkdir -p "$__GL_SHADER_DISK_CACHE_PATH"
    run fma-peak 60 node dist/bench/fma-peak.js --steps=64 --iters=1 --out="$work/fma-peak.json"
    # dtype[+acc16]:variant:size, each compiled by one short forced-variant suite run
    for c in ${SASS_CASES:-float32:simt_128x128_8x8_sm:4096 float16+acc16:cm_256x256x32_w2x4_v128_s1_kpa_ah2_stk:8192 float16:cm_128x256x32_w2x4_v128_s1_kpr_b2_stk:8192}; do
      IFS=: read -r dt v n <<< "$c"
      acc=false; [ "${dt#*+}" = acc16 ] && acc=true
      run "compile-$v" 90 node dist/bench/cli.js bench --suite=cuda --dtype="${dt%+*}" --accF16=$acc --variant="$v" \
        --shapes="${n}x${n}x${n}" --iters=2 --warmup=1 --torch=false --check=false --warmMs=0 --out="$work/compile-$v.json"
    done
    run sass-extract 60 python3 bench/sass.py extract "$__GL_SHADER_DISK_CACHE_PATH" "$work/sass"
    run sass-disasm 120 python3 bench/sass.py disasm "$work/sass"
    : "${TAIL_LINES:=60}" # the whole summary in stdout
    run sass-summary 30 python3 bench/sass.py summary "$work/sass" --json="$work/sass-summary.json"
    rm -rf "$__GL_SHADER_DISK_CACHE_PATH" "$HELIOS_CACHE_DIR"
    ;;
  *) echo "usage: bash bench/gpu-host.sh core|matmul|matmul128|matmul-ab|train|ops-train|matmul-train|probe|colsum|lnbwd|runtime-ops|flash|clocks|simt|sass" >&2; exit 2 ;;
esac
# Weights, batches and checkpoints stay behind: only logs and JSON come back.
tar czf "$dest/$part.tgz" --exclude="*.safetensors" --exclude="*.bin" --exclude="cache" -C /tmp "helios-$part"
for f in "$work"/*.log; do echo "== $(basename "$f")"; grep -E "tok/s +[0-9.]+ ms/step|parity|^summary|^target" "$f" || tail -n "${TAIL_LINES:-14}" "$f"; done
cat "$work/status.txt"
