#!/usr/bin/env bash
# Helios inside Alpha on the GPU host (issue 23, item 6): Alpha's own trainer and `alpha bench
# --suite=cuda` with this package and with the upstream Helios, side by side with Helios's own
# trainer (bench/train/profile-step) and `helios bench --suite=cuda` on the same problems.
#
#   [PART=train|prof|own|bench|cold|tune] bash bench/alpha-gpu.sh ALPHA_HELIOS ALPHA_UPSTREAM|- [OUT]
#
# PART runs one part (each fits one 10-minute GPU-host call); unset runs them all.
# ALPHA_HELIOS: a built Alpha tree whose packages/helios is this repository (a symlink);
# ALPHA_UPSTREAM: the same tree with Alpha's own packages/helios built (C addon, gcc).
# Both are made by bench/alpha-trees.sh. Prints a table last and writes OUT/alpha-gpu.json.
# Runs nothing twice: the first step of each trainer run is reported apart (cold start).
set -uo pipefail
cd "$(dirname "$0")/.."
repo=$(pwd)
# ALPHA_UPSTREAM "-": no upstream tree (its runs are skipped; the report leaves them empty)
mine=$(cd "$1" && pwd); up=-; [ "$2" = - ] || up=$(cd "$2" && pwd); out=${3:-${OUT:-perf}}
mkdir -p "$out/logs" && out=$(cd "$out" && pwd)
# tuning and pipeline caches (kept out of OUT: hundreds of files); HELIOS_ALPHA_CACHES keeps them
# across calls on a warm host
caches=${HELIOS_ALPHA_CACHES:-$(mktemp -d)}
export NCCL_NVLS_ENABLE=0
data=$(mktemp -d)/alpha-data.txt
python3 - "$data" <<'PY'
import random, sys
random.seed(7)
words = [''.join(random.choice('abcdefghijklmnopqrstuvwxyz') for _ in range(random.randint(2, 9))) for _ in range(3000)]
with open(sys.argv[1], 'w') as f:
    f.write(' '.join(random.choice(words) + random.choice(['', '', ',', '.', '\n']) for _ in range(1500000)))
PY

common=(--data="$data" --tokenizer=char --evalInterval=1000000 --sampleInterval=0 --postSamples=false --logEvery=1 --seed=42)
small=(--layers=8 --dim=512 --heads=8 --block=512 --batch=32)
gpt2=(--layers=12 --dim=768 --heads=12 --block=1024 --batch=8)

# alpha_train NAME TREE STEPS ARGS...: Alpha's CLI trainer, log to logs/NAME.log
alpha_train() {
  local name=$1 tree=$2 steps=$3; shift 3
  [ "$tree" = - ] && return 0
  echo "== $name" >&2
  local cache="$caches/$name"
  if [ "${!#}" = --cacheShared ]; then cache="$caches/tuned"; set -- "${@:1:$#-1}"; fi
  (cd "$tree" && HELIOS_CACHE_DIR="$cache" timeout 900 node --expose-gc apps/cli/dist/main.js train \
    --backend=helios --steps="$steps" --runDir="$out/runs/$name" "${common[@]}" "$@") > "$out/logs/$name.log" 2>&1
  echo "   rc=$? $(grep -c '^step ' "$out/logs/$name.log") steps" >&2
}

part=${PART:-all}
want() { [ "$part" = all ] || [ "$part" = "$1" ]; }

if want cold; then
# first steps on empty caches (Helios's and the NVIDIA driver's shader cache), default tuning
# (deferred: shipped winners, else the planner's default, no tuning inside a step)
for cfg in small gpt2; do
  args=("${small[@]}"); [ "$cfg" = gpt2 ] && args=("${gpt2[@]}")
  __GL_SHADER_DISK_CACHE_PATH=$(mktemp -d) HELIOS_STARTUP_TRACE=1 alpha_train "cold-$cfg-f32" "$mine" 12 "${args[@]}"
done
fi

if want tune; then
# Alpha's shape classes tuned (eager: inside the first step) into one cache, exported in the
# shipped-data format: OUT/matmul-tuning.json (bench/tuning-export.ts) to copy into data/
for cfg in small gpt2; do
  args=("${small[@]}"); [ "$cfg" = gpt2 ] && args=("${gpt2[@]}")
  HELIOS_AUTOTUNE=eager alpha_train "tune-$cfg" "$mine" 3 "${args[@]}" --cacheShared
done
fi

if want train; then
alpha_train helios-f32 "$mine" 20 "${small[@]}"
alpha_train helios-fp16 "$mine" 20 "${small[@]}" --fp16=true
alpha_train upstream-f32 "$up" 8 "${small[@]}"
alpha_train upstream-fp16 "$up" 8 "${small[@]}" --fp16=true
alpha_train helios-gpt2-f32 "$mine" 12 "${gpt2[@]}"
alpha_train upstream-gpt2-f32 "$up" 5 "${gpt2[@]}"
fi

if want prof; then
# where Alpha's step goes with Helios: a CPU profile (Alpha's code, Helios's per-op code, waits)
# and GPU time per kernel (bench/alpha-profile-hook.mjs), on the runs above' warm caches
for cfg in small gpt2; do
  args=("${small[@]}"); [ "$cfg" = gpt2 ] && args=("${gpt2[@]}")
  cache="$caches/helios-f32"; [ "$cfg" = gpt2 ] && cache="$caches/helios-gpt2-f32"
  (cd "$mine" && HELIOS_CACHE_DIR="$cache" timeout 300 node --expose-gc --cpu-prof --cpu-prof-dir="$out/cpuprof-$cfg" \
    apps/cli/dist/main.js train --backend=helios --steps=10 --runDir="$out/runs/prof-$cfg" "${common[@]}" "${args[@]}") > "$out/logs/helios-$cfg-cpuprof.log" 2>&1
  (cd "$mine" && HELIOS_CACHE_DIR="$cache" HELIOS_ALPHA_PROFILE="$out/gpu-profile-$cfg.json" timeout 300 node --expose-gc \
    --import "$repo/bench/alpha-profile-hook.mjs" apps/cli/dist/main.js train --backend=helios --steps=8 --runDir="$out/runs/gprof-$cfg" \
    "${common[@]}" "${args[@]}") > "$out/logs/helios-$cfg-gpuprof.log" 2>&1
done
rm -rf "$out/runs"
fi

# Helios's own trainer on the same models (vocab: Alpha's char vocabulary of the data)
if want own; then
vocab=256 # profile-step draws token ids below 256; Alpha's char vocabulary here is ~30 (a smaller head)
for mode in "" --matmul16; do
  node dist/bench/train/profile-step.js $mode --batch=32 --seq=512 --layers=8 --dim=512 --heads=8 --vocab="$vocab" --top=12 \
    --out="$out/profile-small${mode/--/-}.json" > "$out/logs/profile-small${mode/--/-}.log" 2>&1
  node dist/bench/train/profile-step.js $mode --batch=8 --seq=1024 --layers=12 --dim=768 --heads=12 --vocab="$vocab" --top=12 \
    --out="$out/profile-gpt2${mode/--/-}.json" > "$out/logs/profile-gpt2${mode/--/-}.log" 2>&1
done

fi

# alpha bench --suite=cuda (Alpha feeds f32 randn whatever --dtype says) and helios bench, same shapes
if want bench; then
shapes=2048x2048x2048,3072x3072x3072,4096x4096x4096,8192x8192x8192
for tree in mine up; do
  dir=$mine; [ "$tree" = up ] && dir=$up
  [ "$dir" = - ] && continue
  (cd "$dir" && HELIOS_CACHE_DIR="$caches/bench-$tree" timeout 900 node apps/cli/dist/main.js bench --suite=cuda --iters=40 --warmup=8 \
    --dtype=float16 --shapes=$shapes --check=true --out="$out/alpha-bench-$tree.json") > "$out/logs/alpha-bench-$tree.log" 2>&1
done
HELIOS_CACHE_DIR="$caches/bench-mine" timeout 900 node dist/bench/cli.js bench --suite=cuda --iters=40 --warmup=8 --dtype=float32 \
  --shapes=$shapes --out="$out/helios-bench-f32.json" --quiet > "$out/logs/helios-bench-f32.log" 2>&1

fi

if want tune; then
  cp data/matmul-tuning.json "$out/matmul-tuning.json"
  node dist/bench/tuning-export.js "$caches/tuned/matmul-tune-v1.json" --out="$out/matmul-tuning.json" > "$out/logs/tuning-export.log" 2>&1
fi
rm -rf "$out/runs"
node bench/alpha-gpu-report.mjs "$out" | tee "$out/summary-$part.txt"
