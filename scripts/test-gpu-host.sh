#!/usr/bin/env bash
# The JS test suite on a GPU host that has no Vulkan validation layer (the device tool's NVIDIA
# hosts: `source .gpu/enter.sh` first; dist/ and native/ built elsewhere and carried along).
# Every __test__ file runs in its own node process with its own time limit, JOBS at a time, so a
# hanging file is named instead of stalling the run. Prints failures and the slowest files;
# writes per-file results to $OUT/gpu-suite.json when OUT is set, and each failing file's report
# to $OUT/failed-<file>.tap.
#   JOBS=12 FILE_S=600 bash scripts/test-gpu-host.sh [files...]
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
export HELIOS_TEST_NO_LAYER=1 VK_LOADER_LAYERS_DISABLE=VK_LAYER_KHRONOS_validation NCCL_NVLS_ENABLE=0
export HELIOS_CACHE_DIR="${HELIOS_CACHE_DIR:-/tmp/helios-test-cache}"
JOBS="${JOBS:-12}" FILE_S="${FILE_S:-600}"
LOGS=$(mktemp -d /tmp/gpu-suite.XXXXXX)
files=("$@")
# largest files first: the interpreter-checked kernel tests are the long ones, and starting them
# last left them running alone at the end (two passed 300 s under 14-way load on an H200 host)
((${#files[@]})) || mapfile -t files < <(ls -S dist/__test__/*.test.js)
one() { # file logdir limit
  local f="$1" base t0 rc
  base=$(basename "$f" .test.js)
  t0=$(date +%s.%N)
  timeout "$3" node --expose-gc --test --test-reporter=tap "$f" > "$2/$base.tap" 2>&1
  rc=$?
  echo "$base $rc $(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }')" > "$2/$base.rc"
}
export -f one
printf '%s\n' "${files[@]}" | xargs -P "$JOBS" -I{} bash -c 'one "$1" "$2" "$3"' _ {} "$LOGS" "$FILE_S"
cat "$LOGS"/*.rc | sort > "$LOGS/all.txt"
pass=0 fail=0 tests=0 tfail=0 skipped=0
while read -r name rc secs; do
  n=$(grep -cE "^ok |^not ok " "$LOGS/$name.tap" || true)
  nf=$(grep -E "^# fail " "$LOGS/$name.tap" | awk '{print $3}')
  ns=$(grep -E "^# skipped " "$LOGS/$name.tap" | awk '{print $3}')
  tests=$((tests + n)); tfail=$((tfail + ${nf:-0})); skipped=$((skipped + ${ns:-0}))
  if [ "$rc" = 0 ]; then pass=$((pass + 1)); else
    fail=$((fail + 1))
    why=$([ "$rc" = 124 ] && echo "timed out after ${FILE_S} s" || echo "exit $rc")
    echo "FAIL $name ($why, ${secs} s)"
    grep -E "^not ok|^# Subtest" "$LOGS/$name.tap" | grep -B1 "^not ok" | head -12 | sed 's/^/    /'
    # the assertion with its diff (deepEqual's + / - lines follow error:)
    grep -A12 -E "^ +error:" "$LOGS/$name.tap" | head -26 | sed 's/^/    /'
    # the failing file's whole report comes back with the results (its tail, bounded)
    [ -n "${OUT:-}" ] && tail -c 20000 "$LOGS/$name.tap" > "$OUT/failed-$name.tap"
  fi
done < "$LOGS/all.txt"
# every skip with its reason: a skip must say why this host cannot run the test, never hide a failure
grep -H "# SKIP" "$LOGS"/*.tap 2>/dev/null | sed -E 's#^.*/([^/]+)\.tap:#  skipped in \1:#' | head -20
echo "slowest files:"
sort -k3 -rn "$LOGS/all.txt" | head -8 | awk '{printf "  %-40s %6.1f s\n", $1, $3}'
echo "gpu-suite: ${#files[@]} files, $pass passed, $fail failed; $tests tests reported, $tfail failing, $skipped skipped"
if [ -n "${OUT:-}" ]; then
  python3 - "$LOGS/all.txt" "$OUT/gpu-suite.json" <<'P'
import json, sys
rows = [l.split() for l in open(sys.argv[1]) if l.strip()]
json.dump([{"file": r[0], "status": int(r[1]), "seconds": float(r[2])} for r in rows], open(sys.argv[2], "w"), indent=1)
P
fi
[ "$fail" = 0 ]
