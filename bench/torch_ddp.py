#!/usr/bin/env python3
"""PyTorch reference for bench/dist-gpu.sh, run under torchrun (one process per GPU):
  python3 -m torch.distributed.run --nproc_per_node=N bench/torch_ddp.py train --out F
      GPT-2 124M (the model of the train suite's torch_gpt.py), bf16 autocast, AdamW, B=--batch
      sequences of T=--seq random tokens per GPU; DistributedDataParallel (25 MiB buckets, as
      shipped) when N > 1, the plain model when N = 1. Reports tokens/s over all GPUs (median step
      after --warmup steps) and the losses.
  python3 -m torch.distributed.run --nproc_per_node=N bench/torch_ddp.py allreduce --bytes B --out F
      torch.distributed.all_reduce (NCCL, sum, f32) of B bytes: time per call and bus bandwidth
      (2 (N-1) / N x bytes / time, NCCL's own definition).
Rank 0 writes the JSON. NCCL_NVLS_ENABLE=0 is forced (shared hosts)."""
import argparse, json, os, statistics, sys, time

os.environ["NCCL_NVLS_ENABLE"] = "0"
import torch
import torch.distributed as dist

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "train"))
from torch_gpt import GPT  # noqa: E402  (bench/train/torch_gpt.py: the train suite's model)

GPT2_124M = {"vocab": 50304, "blockSize": 1024, "layers": 12, "heads": 12, "dim": 768}


def setup():
    dist.init_process_group("nccl")
    local = int(os.environ.get("LOCAL_RANK", "0"))
    torch.cuda.set_device(local)
    return dist.get_rank(), dist.get_world_size(), torch.device("cuda", local)


def train(a, rank, world, dev):
    torch.manual_seed(1337)  # identical initial weights on every rank (DDP also broadcasts them)
    model = GPT(GPT2_124M).to(dev)
    fwd = torch.nn.parallel.DistributedDataParallel(model, device_ids=[dev.index]) if world > 1 else model
    optim = torch.optim.AdamW(model.parameters(), lr=6e-4, weight_decay=0.1, fused=True)
    gen = torch.Generator(device="cpu").manual_seed(1000 + rank)
    losses, ms = [], []
    for s in range(a.steps):
        tok = torch.randint(0, GPT2_124M["vocab"], (a.batch, a.seq + 1), generator=gen).to(dev)
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        with torch.autocast(device_type="cuda", dtype=torch.bfloat16):
            loss = fwd(tok[:, :-1], tok[:, 1:])
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optim.step()
        optim.zero_grad(set_to_none=True)
        lv = loss.item()
        ms.append((time.perf_counter() - t0) * 1000)
        losses.append(lv)
    t = statistics.median(ms[a.warmup:]) if len(ms) > a.warmup else statistics.median(ms)
    return {"world": world, "batch_per_gpu": a.batch, "seq": a.seq, "median_ms": t,
            "tokens_per_s": world * a.batch * a.seq / (t / 1000), "losses": losses, "ms": ms}


def allreduce(a, rank, world, dev):
    x = torch.ones(a.bytes // 4, dtype=torch.float32, device=dev)
    for _ in range(5):
        dist.all_reduce(x)
    torch.cuda.synchronize()
    times = []
    for _ in range(3):  # back-to-back calls, one synchronize per round (as nccl-tests times them)
        t0 = time.perf_counter()
        for _ in range(a.iters):
            dist.all_reduce(x)
        torch.cuda.synchronize()
        times.append((time.perf_counter() - t0) / a.iters)
    t = statistics.median(times)
    return {"world": world, "bytes": a.bytes, "median_ms": t * 1000,
            "bus_gbps": 2 * (world - 1) / world * a.bytes / t / 1e9 if world > 1 else None}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("what", choices=["train", "allreduce"])
    ap.add_argument("--out", required=True)
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--warmup", type=int, default=10)
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--seq", type=int, default=1024)
    ap.add_argument("--bytes", type=int, default=1 << 30)
    ap.add_argument("--iters", type=int, default=20)
    a = ap.parse_args()
    rank, world, dev = setup()
    r = train(a, rank, world, dev) if a.what == "train" else allreduce(a, rank, world, dev)
    r["device"] = torch.cuda.get_device_name(dev)
    r["torch"] = torch.__version__
    r["nccl"] = ".".join(map(str, torch.cuda.nccl.version()))
    if rank == 0:
        with open(a.out, "w") as f:
            json.dump(r, f)
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
