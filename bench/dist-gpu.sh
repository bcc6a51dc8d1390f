#!/usr/bin/env bash
# Data-parallel training on a 2-GPU host (issue 28), about 6 minutes; JSON and logs under $OUT,
# a short table last. Run from the repository root with dist/ and native/ built:
#   source .gpu/enter.sh; bash bench/dist-gpu.sh
# Parts (each with its own timeout; a failed part leaves its row empty, the rest still runs):
#   1. all-reduce of 1 GiB (f32, sum) across both GPUs: Helios's NCCL transport (buffers shared
#      between Vulkan and CUDA) vs torch.distributed.all_reduce, bus bandwidth;
#   2. PyTorch DDP bf16, GPT-2 124M, B=16 T=1024 per GPU: tok/s on 1 and 2 GPUs (efficiency);
#   3. Helios matmul16 on the same model: 1 GPU B=16, 2 GPUs B=32 (16 per GPU), 1 GPU B=32 (the
#      loss reference for the same global batch), 50 steps each: efficiency and loss after 50;
#   4. a rank killed mid-step (SIGKILL, ranks started without the launcher): the other rank must
#      exit non-zero with a message naming it within 60 s.
# NCCL_NVLS_ENABLE=0 throughout (NVLink multicast off on shared hosts).
set -uo pipefail
export NCCL_NVLS_ENABLE=0
OUT="${OUT:-perf/dist-gpu}"
mkdir -p "$OUT"
PY="${PYTHON:-python3}"
STEPS="${STEPS:-50}"
TRAIN_CLI=dist/bench/train/cli.js
command -v node >/dev/null || { echo "dist-gpu: node is not on PATH (source .gpu/enter.sh first)" >&2; exit 2; }
nvidia-smi --query-gpu=index,name,driver_version,memory.total --format=csv > "$OUT/gpu.txt" 2>/dev/null || true
NCCL_LIB=$("$PY" -c 'import os,nvidia.nccl as n; print(os.path.join(list(n.__path__)[0],"lib","libnccl.so.2"))' 2>/dev/null || true)
[ -n "${HELIOS_NCCL_LIB:-}" ] || { [ -f "$NCCL_LIB" ] && export HELIOS_NCCL_LIB="$NCCL_LIB"; }
echo "dist-gpu: $(wc -l < "$OUT/gpu.txt") line(s) of GPUs, NCCL ${HELIOS_NCCL_LIB:-as the dynamic linker finds it}, trainer $TRAIN_CLI"
export HELIOS_CACHE_DIR="${HELIOS_CACHE_DIR:-/tmp/helios-dist-cache}"

TORCHRUN=("$PY" -m torch.distributed.run --standalone)
part() { echo "== dist-gpu: $1"; }

part "1. all-reduce 1 GiB, Helios then PyTorch"
timeout 120 node dist/bench/cli.js launch --gpus=2 dist/bench/dist-allreduce.js --bytes=1073741824 --iters=20 \
  --out="$OUT/helios-allreduce.json" 2>&1 | tee "$OUT/helios-allreduce.log"
timeout 120 "${TORCHRUN[@]}" --nproc_per_node=2 bench/torch_ddp.py allreduce --bytes=1073741824 --iters=20 --out="$OUT/torch-allreduce.json" \
  2>&1 | tee "$OUT/torch-allreduce.log"

part "2. PyTorch DDP bf16, 1 and 2 GPUs"
for n in 1 2; do
  timeout 150 "${TORCHRUN[@]}" --nproc_per_node="$n" bench/torch_ddp.py train --steps=30 --warmup=10 --batch=16 --seq=1024 --out="$OUT/torch-ddp-$n.json" \
    2>&1 | tee "$OUT/torch-ddp-$n.log"
done

part "3. Helios matmul16, GPT-2 124M"
suite() { # name gpus batch
  timeout 240 node "$TRAIN_CLI" --no-torch --helios-modes=matmul16 --steps="$STEPS" --batch="$3" --seq=1024 --gpus="$2" \
    --max-seconds=150 --work-dir="/tmp/helios-dist-$1" --out="$OUT/helios-$1.json" 2>&1 | tee "$OUT/helios-$1.log"
}
suite 1gpu 1 16
suite 2gpu 2 32
suite 1gpu-b32 1 32

part "4. a rank killed mid-step"
port=$((29500 + RANDOM % 1000))
pids=()
for r in 0 1; do
  RANK=$r WORLD_SIZE=2 LOCAL_RANK=$r LOCAL_WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=$port \
    node "$TRAIN_CLI" --no-torch --helios-modes=matmul16 --steps=500 --batch=32 --seq=1024 --gpus=2 --max-seconds=300 \
    --work-dir=/tmp/helios-dist-kill > "$OUT/kill-rank$r.log" 2>&1 &
  pids+=($!)
done
# rank 0 logs for both (the ranks run in step); kill rank 1 once step 10 is done, mid-way into step 11
for _ in $(seq 1 360); do grep -q "step 10:" "$OUT/kill-rank0.log" && break; sleep 0.5; done
sleep 0.05
killed_at=$(date +%s.%N)
kill -9 "${pids[1]}" 2>/dev/null
( sleep 90; kill -9 "${pids[0]}" 2>/dev/null ) & guard=$!
wait "${pids[0]}"; rc0=$?
exited_at=$(date +%s.%N)
kill "$guard" 2>/dev/null
secs=$(awk -v a="$killed_at" -v b="$exited_at" 'BEGIN { printf "%.1f", b - a }')
msg=$(grep -m1 -E "rank 1 " "$OUT/kill-rank0.log" | cut -c1-300)
# the kill counts only if training had reached step 10 (a rank failing at start is not this test)
reached=$(grep -q "step 10:" "$OUT/kill-rank0.log" && echo 1 || echo 0)
"$PY" - "$OUT/kill.json" "$rc0" "$secs" "$msg" "$reached" <<'EOF'
import json, sys
json.dump({"rank0_status": int(sys.argv[2]), "seconds_to_exit": float(sys.argv[3]), "message": sys.argv[4], "reached_step_10": sys.argv[5] == "1"}, open(sys.argv[1], "w"))
EOF

part "report"
"$PY" - "$OUT" <<'EOF'
import json, os, sys
out = sys.argv[1]
def load(name):
    try:
        return json.load(open(os.path.join(out, name)))
    except Exception:
        return None
def h(name):
    r = load(f"helios-{name}.json")
    return (r or {}).get("helios", {}).get("matmul16") or {}
ha, ta = load("helios-allreduce.json") or {}, load("torch-allreduce.json") or {}
t1, t2 = load("torch-ddp-1.json") or {}, load("torch-ddp-2.json") or {}
h1, h2, h32 = h("1gpu"), h("2gpu"), h("1gpu-b32")
kill = load("kill.json") or {}
def eff(one, two):
    return two / (2 * one) if one and two else None
he = eff(h1.get("tokensPerSec"), h2.get("tokensPerSec"))
te = eff(t1.get("tokens_per_s"), t2.get("tokens_per_s"))
l2, l1 = (h2.get("losses") or [None])[-1], (h32.get("losses") or [None])[-1]
ldiff = abs(l2 - l1) / abs(l1) if l1 and l2 is not None else None
bw = ha.get("bus_gbps"), ta.get("bus_gbps")
bwr = bw[0] / bw[1] if all(bw) else None
f = lambda v, d=3: "-" if v is None else f"{v:.{d}f}"
ok = lambda c: "-" if c is None else ("PASS" if c else "FAIL")
rows = [
    ("Helios tok/s 1 GPU / 2 GPUs", f"{f(h1.get('tokensPerSec'),0)} / {f(h2.get('tokensPerSec'),0)}", ""),
    ("Helios scaling efficiency", f(he), ok(he is not None and he >= 0.92) if he else "-"),
    ("PyTorch DDP bf16 tok/s 1 / 2", f"{f(t1.get('tokens_per_s'),0)} / {f(t2.get('tokens_per_s'),0)}", ""),
    ("PyTorch DDP efficiency", f(te), ""),
    ("Helios within 3 points of PyTorch", f(None if he is None or te is None else te - he), ok(None if he is None or te is None else te - he <= 0.03)),
    ("all-reduce 1 GiB bus GB/s Helios / torch", f"{f(bw[0],1)} / {f(bw[1],1)}", ok(None if bwr is None else bwr >= 0.9)),
    (f"loss after {len(h2.get('losses') or [])} steps 2 GPUs / 1 GPU (B 32)", f"{f(l2,4)} / {f(l1,4)} ({f(None if ldiff is None else 100*ldiff,2)} %)", ok(None if ldiff is None else ldiff <= 0.01)),
    ("rank killed: other rank status, seconds", f"{kill.get('rank0_status','-')}, {kill.get('seconds_to_exit','-')}", ok(None if not kill else kill.get("rank0_status", 0) != 0 and kill.get("seconds_to_exit", 1e9) <= 60 and "rank 1" in kill.get("message", "") and kill.get("reached_step_10"))),
]
summary = {"helios": {"1gpu": h1.get("tokensPerSec"), "2gpu": h2.get("tokensPerSec"), "efficiency": he, "perRank": h2.get("perRankTokensPerSec"),
                      "loss2gpu": l2, "loss1gpuB32": l1, "lossRelDiff": ldiff},
           "torch": {"1gpu": t1.get("tokens_per_s"), "2gpu": t2.get("tokens_per_s"), "efficiency": te},
           "allreduce": {"heliosBusGBps": bw[0], "torchBusGBps": bw[1], "ratio": bwr}, "kill": kill}
json.dump(summary, open(os.path.join(out, "dist-gpu.json"), "w"), indent=1)
print(f"\n{'what':46} {'value':34} check")
for a, b, c in rows:
    print(f"{a:46} {b:34} {c}")
EOF
