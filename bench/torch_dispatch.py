#!/usr/bin/env python3
"""CUDA reference for bench/dispatch: what the same trivial work costs through PyTorch.

Each kernel is `x.add_(1)` on 64 int32 values (the work of bench/dispatch's `inc` chain): one
stream, so every kernel waits for the one before it, as CUDA streams are ordered. Times are
wall clock around the launches and a synchronize, like bench/dispatch's end-to-end rows;
median of `iters` samples per repetition, median over repetitions.

  python3 bench/torch_dispatch.py [--kernels=1000] [--iters=20] [--reps=3]

Prints one JSON line: {ok, device, torch, cuda, rows: [{name, unit, value, perRep}]}.
"""
import json
import statistics
import sys
import time


def parse_args(argv):
    opts = {"kernels": 1000, "iters": 20, "reps": 3}
    for arg in argv:
        key, _, value = arg.lstrip("-").partition("=")
        if key not in opts:
            raise SystemExit(f"torch_dispatch: unknown option {arg}")
        opts[key] = int(value)
    return opts


def main():
    opts = parse_args(sys.argv[1:])
    try:
        import torch
    except Exception as e:  # no PyTorch here: say so in the JSON, not as a crash
        print(json.dumps({"ok": False, "error": f"import torch failed: {e}"}))
        return
    if not torch.cuda.is_available():
        print(json.dumps({"ok": False, "error": "torch.cuda.is_available() is False"}))
        return
    n = opts["kernels"]
    x = torch.arange(64, dtype=torch.int32, device="cuda")

    def chain():
        for _ in range(n):
            x.add_(1)

    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        chain()  # warm-up before capture
    torch.cuda.current_stream().wait_stream(stream)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        chain()
    one = torch.cuda.CUDAGraph()
    with torch.cuda.graph(one):
        x.add_(1)

    def us_per(units, fn):
        t0 = time.perf_counter()
        fn()
        return (time.perf_counter() - t0) * 1e6 / units

    def eager_chain():
        chain()
        torch.cuda.synchronize()

    def replay():
        graph.replay()
        torch.cuda.synchronize()

    def launch_sync():
        x.add_(1)
        torch.cuda.synchronize()

    def replay_one():
        one.replay()
        torch.cuda.synchronize()

    cases = [
        (f"eager, {n} dependent add_ kernels", "µs/kernel", lambda: us_per(n, eager_chain)),
        (f"CUDA graph replay, {n} dependent add_ kernels", "µs/kernel", lambda: us_per(n, replay)),
        ("launch+sync round trip, 1 kernel", "µs", lambda: us_per(1, launch_sync)),
        ("graph replay+sync round trip, 1 kernel", "µs", lambda: us_per(1, replay_one)),
    ]
    before = x.clone()
    rows = []
    for name, unit, fn in cases:
        for _ in range(5):
            fn()
        per_rep = []
        for _ in range(opts["reps"]):
            per_rep.append(statistics.median(fn() for _ in range(opts["iters"])))
        rows.append({"name": name, "unit": unit, "value": statistics.median(per_rep), "perRep": per_rep})
    # the chain really ran: every kernel added one to every element
    if int((x - before).min()) <= 0:
        print(json.dumps({"ok": False, "error": "the add_ chain did not change x"}))
        return
    print(json.dumps({
        "ok": True,
        "device": torch.cuda.get_device_name(0),
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "rows": rows,
    }))


if __name__ == "__main__":
    main()
