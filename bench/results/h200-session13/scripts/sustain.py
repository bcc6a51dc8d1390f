# session 13: the same sustained loop for cuBLAS fp16 8192^3 (CUDA events per batch of 20)
import sys, time, os, torch
secs = float(sys.argv[1]) if len(sys.argv) > 1 else 4
a = torch.randn(8192, 8192, device="cuda", dtype=torch.float16); b = torch.randn(8192, 8192, device="cuda", dtype=torch.float16)
for _ in range(3): a @ b
torch.cuda.synchronize()
out = open(os.path.join(os.environ.get("OUT", "/tmp"), "sustain.txt"), "a")
t0 = time.time()
while time.time() - t0 < secs:
    s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    s.record()
    for _ in range(20): a @ b
    e.record(); e.synchronize()
    ms = s.elapsed_time(e) / 20
    out.write(f"{time.time():.2f} torch fp16 {ms:.4f} ms {2 * 8192**3 / ms / 1e9:.1f} TF/s\n")
out.close()
