#!/usr/bin/env bash
# session 13 call 4: sustained 8192^3 — Helios f16-acc (_kpa_ah2_stk, _kpa_ah2, _kpa_stk) and cuBLAS fp16, with nvidia-smi clocks/power/throttle reasons every 100 ms
set -uo pipefail
export HELIOS_CACHE_DIR=/tmp/hc4
nvidia-smi --query-gpu=timestamp,clocks.sm,power.draw,power.limit,temperature.gpu,clocks_event_reasons.active --format=csv,noheader -lms 100 > $OUT/smi.csv 2>&1 &
SMI=$!
T=cm_256x256x32_w2x4_v128_s1
sleep 2
for v in ${T}_kpa_ah2_stk ${T}_kpa_ah2 ${T}_kpa_stk; do
  timeout 60 node perf/s13/sustain.mjs $v 5; sleep 3
  timeout 60 python3 perf/s13/sustain.py 5; sleep 3
done
kill $SMI
python3 - <<'PY'
import os, csv, statistics as st
out = os.environ["OUT"]
rows = [l.split() for l in open(f"{out}/sustain.txt")]
smi = []
import datetime
for r in csv.reader(open(f"{out}/smi.csv")):
    try:
        t = datetime.datetime.strptime(r[0].strip(), "%Y/%m/%d %H:%M:%S.%f").timestamp()
        smi.append((t, float(r[1].split()[0]), float(r[2].split()[0]), r[5].strip()))
    except Exception: pass
# group runs: consecutive lines of the same kernel
groups = []
for r in rows:
    key = " ".join(r[1:3])
    if not groups or groups[-1][0] != key or float(r[0]) - groups[-1][1][-1][0] > 2: groups.append((key, []))
    groups[-1][1].append((float(r[0]), float(r[5])))
off = 0.0  # smi timestamps are local time; assume same clock as time.time()
for key, pts in groups:
    t0, t1 = pts[0][0], pts[-1][0]
    tf = [p[1] for p in pts]
    win = [s for s in smi if t0 <= s[0] <= t1]
    clk = [s[1] for s in win]; pw = [s[2] for s in win]
    reasons = sorted(set(s[3] for s in win))
    print(f"{key:55s} first {tf[0]:6.1f} median {st.median(tf):6.1f} last {tf[-1]:6.1f} TF/s | sm clock median {st.median(clk) if clk else 0:.0f} MHz (min {min(clk) if clk else 0:.0f}) | power median {st.median(pw) if pw else 0:.0f} W | reasons {reasons}")
PY
