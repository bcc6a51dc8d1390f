#!/usr/bin/env python3
"""PyTorch reference for `helios bench --suite=train`: the same GPT-2 as train/model.ts,
started from the same weights (init.safetensors) on the same batches (batches.safetensors), with
the same AdamW / clipping / lr. Runs each mode and writes JSON:
  {"device", "torch", "modes": {mode: {"losses": [...], "ms": [...], "peak_bytes", "error"?}}}
Modes: f32_strict (TF32 off: the parity reference), f32 (TF32 on), bf16 (autocast), compile
(bf16 autocast + torch.compile). Needs only torch (no safetensors package)."""
import argparse, json, math, struct, sys, time

import torch
import torch.nn as nn
import torch.nn.functional as F


def read_safetensors(path):
    with open(path, "rb") as f:
        raw = f.read()
    (hlen,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8:8 + hlen])
    meta = header.pop("__metadata__", {})
    dt = {"F32": torch.float32, "I32": torch.int32}
    out = {}
    for name, e in header.items():
        s, t = e["data_offsets"]
        buf = bytearray(raw[8 + hlen + s: 8 + hlen + t])
        out[name] = torch.frombuffer(buf, dtype=dt[e["dtype"]]).reshape(e["shape"]).clone()
    return out, meta


class Block(nn.Module):
    def __init__(self, c):
        super().__init__()
        C, self.H = c["dim"], c["heads"]
        self.ln_1 = nn.LayerNorm(C, eps=1e-5)
        self.attn = nn.Module()
        self.attn.c_attn = nn.Linear(C, 3 * C)
        self.attn.c_proj = nn.Linear(C, C)
        self.ln_2 = nn.LayerNorm(C, eps=1e-5)
        self.mlp = nn.Module()
        self.mlp.c_fc = nn.Linear(C, 4 * C)
        self.mlp.c_proj = nn.Linear(4 * C, C)

    def forward(self, x):
        B, T, C = x.shape
        q, k, v = self.attn.c_attn(self.ln_1(x)).split(C, dim=2)
        heads = lambda t: t.view(B, T, self.H, C // self.H).transpose(1, 2)
        y = F.scaled_dot_product_attention(heads(q), heads(k), heads(v), is_causal=True)
        x = x + self.attn.c_proj(y.transpose(1, 2).contiguous().view(B, T, C))
        return x + self.mlp.c_proj(F.gelu(self.mlp.c_fc(self.ln_2(x)), approximate="tanh"))


class GPT(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.transformer = nn.Module()
        self.transformer.wte = nn.Embedding(c["vocab"], c["dim"])
        self.transformer.wpe = nn.Embedding(c["blockSize"], c["dim"])
        self.transformer.h = nn.ModuleList([Block(c) for _ in range(c["layers"])])
        self.transformer.ln_f = nn.LayerNorm(c["dim"], eps=1e-5)

    def forward(self, idx, targets):
        B, T = idx.shape
        t = self.transformer
        x = t.wte(idx) + t.wpe(torch.arange(T, device=idx.device))
        for blk in t.h:
            x = blk(x)
        logits = F.linear(t.ln_f(x), t.wte.weight)  # LM head tied to the token embedding
        return F.cross_entropy(logits.float().view(-1, logits.size(-1)), targets.reshape(-1))


def run_mode(mode, cfg, init, tokens, opt, steps, dev):
    torch.backends.cuda.matmul.allow_tf32 = mode != "f32_strict"
    torch.backends.cudnn.allow_tf32 = mode != "f32_strict"
    torch.manual_seed(0)
    model = GPT(cfg).to(dev)
    missing = set(model.state_dict()) - set(init)
    if missing:
        raise RuntimeError(f"init file lacks {sorted(missing)[:3]}")
    model.load_state_dict({k: v for k, v in init.items() if k in model.state_dict()})
    decay = [p for n, p in model.named_parameters() if p.dim() >= 2]
    other = [p for n, p in model.named_parameters() if p.dim() < 2]
    optim = torch.optim.AdamW(
        [{"params": decay, "weight_decay": opt["weightDecay"]}, {"params": other, "weight_decay": 0.0}],
        lr=opt["lr"], betas=(opt["beta1"], opt["beta2"]), eps=opt["eps"],
        **({"fused": True} if dev == "cuda" else {}),
    )
    fwd = model
    if mode == "compile":
        fwd = torch.compile(model)
    amp = mode in ("bf16", "compile")
    if dev == "cuda":
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats()
    losses, ms = [], []
    for s in range(steps):
        batch = tokens[s % tokens.shape[0]].to(dev, dtype=torch.long)
        x, y = batch[:, :-1], batch[:, 1:]
        lr = lr_at(opt, s)
        for g in optim.param_groups:
            g["lr"] = lr
        if dev == "cuda":
            torch.cuda.synchronize()
        t0 = time.perf_counter()
        with torch.autocast(device_type=dev, dtype=torch.bfloat16, enabled=amp):
            loss = fwd(x, y)
        loss.backward()
        if opt["clip"] > 0:
            torch.nn.utils.clip_grad_norm_(model.parameters(), opt["clip"])
        optim.step()
        optim.zero_grad(set_to_none=True)
        lv = loss.item()  # synchronizes, like the Helios step's loss read
        ms.append((time.perf_counter() - t0) * 1000)
        losses.append(lv)
    peak = torch.cuda.max_memory_allocated() if dev == "cuda" else 0
    return {"losses": losses, "ms": ms, "peak_bytes": peak}


def lr_at(o, step):
    """train/optim.ts learningRate."""
    if o["warmup"] > 0 and step < o["warmup"]:
        return o["lr"] * (step + 1) / o["warmup"]
    if o["decaySteps"] <= 0:
        return o["lr"]
    t = min(1.0, (step - o["warmup"]) / o["decaySteps"])
    return o["minLr"] + 0.5 * (o["lr"] - o["minLr"]) * (1 + math.cos(math.pi * t))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--init", required=True)
    ap.add_argument("--batches", required=True)
    ap.add_argument("--steps", type=int, default=50)
    ap.add_argument("--modes", default="f32_strict,f32,bf16,compile")
    ap.add_argument("--parity-steps", type=int, default=20)
    ap.add_argument("--out", required=True)
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    a = ap.parse_args()
    init, meta = read_safetensors(a.init)
    cfg, opt = json.loads(meta["config"]), json.loads(meta["optim"])
    data, _ = read_safetensors(a.batches)
    tokens = data["tokens"]
    res = {"device": torch.cuda.get_device_name(0) if a.device == "cuda" else "cpu", "torch": torch.__version__, "modes": {}}
    for mode in a.modes.split(","):
        steps = min(a.steps, a.parity_steps) if mode == "f32_strict" else a.steps
        try:
            res["modes"][mode] = run_mode(mode, cfg, init, tokens, opt, steps, a.device)
        except Exception as e:  # torch.compile may be unavailable; the other modes still count
            res["modes"][mode] = {"error": f"{type(e).__name__}: {e}"[:2000]}
        print(f"torch {mode}: {json.dumps({k: (v[:3] if isinstance(v, list) else v) for k, v in res['modes'][mode].items()})}", file=sys.stderr)
    with open(a.out, "w") as f:
        json.dump(res, f)


if __name__ == "__main__":
    main()
