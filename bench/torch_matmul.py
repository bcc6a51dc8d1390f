#!/usr/bin/env python3
"""PyTorch reference for `helios bench --suite=cuda`: times torch.matmul with CUDA events.

Same protocol as Helios: warmup and --warm-ms of sustained load, then `repeats` runs of `iters`
timed iterations, one CUDA event pair per iteration; with --rest every repeat follows that many
idle seconds and its own warm-up. Prints one JSON object on stdout; errors are reported in it too (never a
traceback without JSON), so the caller can fall back to Helios-only rows with a clear note.
"""
import argparse
import json
import time
import sys


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--dtype", default="float16", choices=["float16", "bfloat16", "float32"])
    p.add_argument("--shapes", required=True, help="MxNxK,MxNxK,...")
    p.add_argument("--iters", type=int, default=40)
    p.add_argument("--warmup", type=int, default=8)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--epilogue", default="none")
    p.add_argument("--tf32", default="off", choices=["on", "off"])
    p.add_argument("--warm-ms", type=float, default=400.0, help="sustained load before timing")
    p.add_argument("--rest", type=float, default=0.0, help="idle seconds before each repeat")
    a = p.parse_args()
    out = {"ok": False, "rows": []}
    try:
        import torch
    except Exception as e:  # noqa: BLE001 - any import failure means "no reference"
        out["error"] = f"torch not importable: {e}"
        print(json.dumps(out))
        return 0
    out["torch"] = torch.__version__
    if not torch.cuda.is_available():
        out["error"] = "torch.cuda.is_available() is False"
        print(json.dumps(out))
        return 0
    # Strict f32 unless asked: Helios' f32 path is true f32, so compare like with like.
    torch.backends.cuda.matmul.allow_tf32 = a.tf32 == "on"
    torch.backends.cuda.matmul.allow_fp16_reduced_precision_reduction = False
    dt = getattr(torch, a.dtype)
    dev = torch.device("cuda")
    out["device"] = torch.cuda.get_device_name(dev)
    out["cuda"] = torch.version.cuda
    out["tf32"] = a.tf32
    for s in a.shapes.split(","):
        m, n, k = (int(v) for v in s.split("x"))
        x = torch.randn(m, k, device=dev, dtype=dt)
        w = torch.randn(k, n, device=dev, dtype=dt)
        bias = torch.randn(n, device=dev, dtype=dt)

        def step():
            y = torch.matmul(x, w)
            if a.epilogue == "bias":
                y = y + bias
            elif a.epilogue.startswith("bias_"):
                act = a.epilogue[5:]
                y = y + bias
                if act == "gelu":
                    y = torch.nn.functional.gelu(y, approximate="tanh")
                elif act == "relu":
                    y = torch.relu(y)
                elif act == "silu":
                    y = torch.nn.functional.silu(y)
            return y

        def warm():
            for _ in range(a.warmup):
                step()
            torch.cuda.synchronize()
            # the same sustained load as the Helios side (GPU clocks ramped)
            t0 = time.time()
            while time.time() - t0 < a.warm_ms / 1000:
                step()
                torch.cuda.synchronize()

        if a.rest <= 0:
            warm()
        repeats = []
        for _ in range(a.repeats):
            if a.rest > 0:
                # every repeat from a rested board, as the Helios side does
                time.sleep(a.rest)
                warm()
            ev = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True))
                  for _ in range(a.iters)]
            for e0, e1 in ev:
                e0.record()
                step()
                e1.record()
            torch.cuda.synchronize()
            repeats.append([e0.elapsed_time(e1) for e0, e1 in ev])
        out["rows"].append({"shape": s, "repeats": repeats})
        del x, w, bias
    out["ok"] = True
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
