#!/usr/bin/env bash
# Consumer test: Helios inside Alpha, the way Alpha's users get it (issue 23, item 7).
#
# Copies the pinned Alpha snapshot (../shared/alpha2 beside the repository; ALPHA_SRC overrides) to
# a temporary directory, puts the packed package (`npm pack`) in place of packages/helios, installs
# the workspaces the test needs, builds with Alpha's own `tsc -b`, then runs Alpha's unchanged code
# on the Vulkan device (lavapipe in CI) with HELIOS_VALIDATION=1:
#   packages/tests/src/gpu-perf.test.ts (vitest, Alpha's locked version), `alpha bench --suite=cuda
#   --check=true` on small odd shapes, `alpha eval` of a tiny checkpoint (made by `alpha train
#   --backend=cpu_ref`) with --backend=helios against --backend=cpu_ref, an autograd Tape step as
#   Alpha's trainer drives it (__test__/alpha/tape-step.mjs), scripts/bun-compile-safe.sh with
#   the compiled binary's `--help` and a bench run through the addon beside it, and `alpha fleet
#   deploy` to a local directory (ssh/rsync test doubles) with the deployed binary run there.
# Alpha's files are never changed. Every stage runs (a failed prerequisite skips its dependants);
# the summary lists each with its time, and the script fails if any stage failed.
#   HELIOS_ALPHA_KEEP=1   keep the temporary directory (printed) for inspection.
# Needs: scripts/setup.sh done (dist/ built, tools/ installed: Bun for the compile stage).
set -uo pipefail
cd "$(dirname "$0")/.."
repo=$(pwd)
export PATH="$HOME/.cargo/bin:$PATH"

alpha_src=${ALPHA_SRC:-$(git rev-parse --show-toplevel 2>/dev/null || echo "$repo")/../shared/alpha2}
if [ ! -f "$alpha_src/package.json" ] || [ ! -d "$alpha_src/apps/cli" ]; then
  echo "test-alpha: FAIL: the Alpha snapshot is not at $alpha_src (set ALPHA_SRC to its path)" >&2
  exit 1
fi
alpha_src=$(cd "$alpha_src" && pwd)

work=$(mktemp -d "${TMPDIR:-/tmp}/helios-alpha.XXXXXX")
if [ "${HELIOS_ALPHA_KEEP:-0}" = "1" ]; then
  echo "test-alpha: working in $work (kept)"
else
  trap 'rm -rf "$work"' EXIT
fi
alpha="$work/alpha"
logs="$work/logs"
mkdir -p "$logs"

export HELIOS_VALIDATION=1
export HELIOS_CACHE_DIR=${HELIOS_CACHE_DIR:-$work/helios-cache}
export HELIOS_ALPHA_VALIDATION_LOG="$work/validation.log"
export HELIOS_ALPHA_NATIVE="$alpha/packages/helios/native/index.cjs"
: > "$HELIOS_ALPHA_VALIDATION_LOG"
: > "$HELIOS_ALPHA_VALIDATION_LOG.checked"
# Preloaded only into the stages that run Alpha's code on the device (see the hook).
hook="--require=$repo/__test__/alpha/validation-hook.cjs"

passed=()
failed=()
skipped=()
declare -A status

# stage NAME NEEDS... -- COMMAND...: runs COMMAND (a function) unless a stage it needs did not pass;
# output goes to $logs/NAME.log, whose last 60 lines are shown when the stage fails.
stage() {
  local name=$1; shift
  local needs=()
  while [ "$1" != "--" ]; do needs+=("$1"); shift; done
  shift
  for n in "${needs[@]}"; do
    if [ "${status[$n]:-}" != "pass" ]; then
      echo "--- $name: SKIPPED (needs $n)"
      skipped+=("$name (needs $n)")
      status[$name]=skip
      return
    fi
  done
  echo "--- $name"
  local t0=$SECONDS
  local before checked0
  before=$(wc -l < "$HELIOS_ALPHA_VALIDATION_LOG")
  checked0=$(wc -l < "$HELIOS_ALPHA_VALIDATION_LOG.checked")
  "$@" > "$logs/$name.log" 2>&1
  local rc=$?
  local after
  after=$(wc -l < "$HELIOS_ALPHA_VALIDATION_LOG")
  if [ "$after" -gt "$before" ]; then
    echo "validation layer: $((after - before)) message(s) during this stage (first 20):" >> "$logs/$name.log"
    tail -n +"$((before + 1))" "$HELIOS_ALPHA_VALIDATION_LOG" | head -20 >> "$logs/$name.log"
    [ "$rc" -eq 0 ] && rc=90
  fi
  local checked=$(( $(wc -l < "$HELIOS_ALPHA_VALIDATION_LOG.checked") - checked0 ))
  [ "$rc" -eq 0 ] && [ "$checked" -gt 0 ] && echo "note: validation layer on; no messages in $checked process(es) with a device" >> "$logs/$name.log"
  local dt=$((SECONDS - t0))
  if [ "$rc" -eq 0 ]; then
    echo "    pass (${dt}s)"
    grep -E '^(note|ok|result):' "$logs/$name.log" | sed 's/^/    /' || true
    passed+=("$name (${dt}s)")
    status[$name]=pass
  else
    echo "    FAIL (exit $rc, ${dt}s); log $logs/$name.log:"
    tail -n 60 "$logs/$name.log" | sed 's/^/    | /'
    failed+=("$name (${dt}s)")
    status[$name]=fail
  fi
}

# ── stages ────────────────────────────────────────────────────────────────────

do_pack() (
  set -e
  local tgz
  tgz=$(npm pack --silent --ignore-scripts --pack-destination "$work" | tail -n 1)
  mv "$work/$tgz" "$work/helios.tgz"
  local listing
  listing=$(tar tzf "$work/helios.tgz")
  for f in package/package.json package/tsconfig.json package/index.d.ts package/dist/ts/index.js \
           package/dist/ts/index.d.ts package/native/index.cjs package/native/helios.linux-x64-gnu.node \
           package/native/helios_vk.c package/scripts/install.cjs package/scripts/build.cjs; do
    grep -qx "$f" <<<"$listing" || { echo "the package lacks ${f#package/}"; return 1; }
  done
  tar xzf "$work/helios.tgz" -C "$work" package/package.json
  # A workspace install installs a workspace's devDependencies too: the package must declare none,
  # and no build tool among its other dependencies.
  node -e '
    const p = require(process.argv[1]);
    const tool = /^(typescript|bun|vitest|tsx)$|^@(napi-rs|types|oven)\//;
    const bad = [
      ...Object.keys(p.devDependencies ?? {}).map((d) => `devDependencies.${d}`),
      ...["dependencies", "optionalDependencies", "peerDependencies"].flatMap((k) =>
        Object.keys(p[k] ?? {}).filter((d) => tool.test(d)).map((d) => `${k}.${d}`)),
    ];
    if (bad.length) { console.error("the package declares tooling a workspace install would pull into Alpha:", bad.join(", ")); process.exit(1); }
  ' "$work/package/package.json"
  echo "note: $(du -h "$work/helios.tgz" | cut -f1) tarball, $(wc -l <<<"$listing") files"
)

do_copy() (
  set -e
  mkdir -p "$alpha"
  (cd "$alpha_src" && tar cf - --exclude=./packages/helios --exclude=./node_modules .) | (cd "$alpha" && tar xf -)
  mkdir -p "$alpha/packages/helios"
  tar xzf "$work/helios.tgz" -C "$alpha/packages/helios" --strip-components=1
  # The upstream tree minus packages/helios, byte for byte.
  local differ
  differ=$(diff -rq -x helios "$alpha_src" "$alpha" || true)
  [ -z "$differ" ] || { echo "the copy differs from the snapshot: $differ"; return 1; }
)

do_install() (
  set -e
  cd "$alpha"
  # Only the workspaces the test runs (apps/cli and packages/tests, and what they depend on) and
  # the root's tools (typescript, turbo), at the versions Alpha's lock pins. npm rewrites the lock
  # for the workspaces left out of the snapshot (web, tui, server); that is the copy's lock only.
  npm install -w apps/cli -w packages/tests --include-workspace-root --no-audit --no-fund
  [ -f packages/helios/native/helios_vk.node ] || { echo "the install hook did not write native/helios_vk.node"; return 1; }
  local dragged=()
  for d in node_modules/bun node_modules/@napi-rs/cli node_modules/@oven packages/helios/node_modules; do
    [ -e "$d" ] && dragged+=("$d")
  done
  if [ "${#dragged[@]}" -gt 0 ]; then echo "installing Helios pulled tooling into Alpha: ${dragged[*]}"; return 1; fi
  echo "note: node_modules $(du -sh node_modules | cut -f1), typescript $(node -p 'require("typescript/package.json").version'), vitest $(node -p 'require("vitest/package.json").version'); no Helios tooling installed"
)

# PATH with cargo and rustc shadowed by stubs that fail as a missing command does: the package's
# build must not need a Rust toolchain (and a stage that calls one fails).
mkdir -p "$work/norust"
for t in cargo rustc rustup; do
  printf '#!/bin/sh\necho "%s: not available in this test (no Rust toolchain)" >&2\nexit 127\n' "$t" > "$work/norust/$t"
  chmod +x "$work/norust/$t"
done
no_rust_path() {
  echo "$work/norust:$PATH"
}

do_build_helios() (
  set -e
  cd "$alpha"
  rm -f packages/helios/native/helios_vk.node
  # What Alpha's `turbo build` runs in this workspace, and what bun-compile-safe.sh runs.
  PATH=$(no_rust_path) npm run build -w @alpha/helios
  PATH=$(no_rust_path) npm run build:native -w @alpha/helios
  cmp packages/helios/native/helios_vk.node packages/helios/native/helios.linux-x64-gnu.node
  PATH=$(no_rust_path) npx turbo build --filter=@alpha/helios --output-logs=errors-only
  echo "note: npm run build / build:native / turbo build in packages/helios without a Rust toolchain"
)

do_tsc() (
  set -e
  cd "$alpha"
  # ALPHA.md: apps/cli's tsc -b needs packages/inference built first.
  npx tsc -b packages/inference
  npx tsc -b apps/cli packages/tests
)

run_vitest() (
  cd "$alpha/packages/tests"
  NODE_OPTIONS="$hook" npx vitest run src/gpu-perf.test.ts
)

alpha_cli() {
  (cd "$alpha" && NODE_OPTIONS="$hook" node apps/cli/dist/main.js "$@")
}

do_bench() (
  set -e
  # Odd shapes through Alpha's parity loop; --check compares a product with Alpha's CPU backend.
  # No PyTorch here: Alpha prints "cuda benchmark unavailable" and the Helios rows alone.
  local out
  out=$(alpha_cli bench --suite=cuda --check=true --checkShape=67x45x33 --shapes=67x45x33,129x65x97 \
        --iters=3 --warmup=1 --python=/bin/false 2>&1)
  echo "$out"
  grep -q "fails=0/" <<<"$out" || { echo "no passing check line"; return 1; }
  for s in 67x45x33 129x65x97; do grep -q "^$s " <<<"$out" || { echo "no row for $s"; return 1; }; done
  echo "result: $(grep -o 'check_shape=.*fails=[0-9/]*' <<<"$out")"
)

do_checkpoint() (
  set -e
  cd "$alpha"
  mkdir -p "$work/data"
  # A small text in the snapshot's own data, repeated to a few KB.
  for i in 1 2 3 4 5 6 7 8; do
    echo "The quick brown fox jumps over the lazy dog; pack my box with five dozen liquor jugs ($i)."
  done > "$work/data/tiny.txt"
  alpha_cli train --data="$work/data/tiny.txt" --backend=cpu_ref --tokenizer=char --steps=2 --layers=1 \
    --dim=16 --heads=1 --block=16 --batch=2 --evalInterval=1000 --sampleInterval=0 --remote=false \
    --postSamples=false --runDir="$work/run" --seed=7
  ls "$work/run"/checkpoint-2.json
)

do_eval() (
  set -e
  local ck="$work/run/checkpoint-2.json" cpu gpu
  cpu=$(alpha_cli eval --checkpoint="$ck" --data="$work/data/tiny.txt" --backend=cpu_ref --batch=2 --nBatches=3)
  echo "$cpu"
  gpu=$(alpha_cli eval --checkpoint="$ck" --data="$work/data/tiny.txt" --backend=helios --batch=2 --nBatches=3)
  echo "$gpu"
  node -e '
    const pick = (s) => Number(/Loss:\s+([-\d.eE+]+)/.exec(s)?.[1]);
    const [a, b] = [pick(process.argv[1]), pick(process.argv[2])];
    console.log(`result: eval loss cpu_ref ${a} helios ${b}`);
    if (!Number.isFinite(a) || !Number.isFinite(b) || Math.abs(a - b) > 1e-3 * Math.max(1, Math.abs(a))) {
      console.error("eval losses differ"); process.exit(1);
    }' "$cpu" "$gpu"
)

do_tape() (
  NODE_OPTIONS="$hook" node "$repo/__test__/alpha/tape-step.mjs" "$alpha"
)

do_bun() (
  set -e
  cd "$alpha"
  # Bun from Helios's tools (scripts/setup.sh), on PATH as `bun` for Alpha's script.
  local bun_bin
  bun_bin=$(cd "$repo" && node -p 'require.resolve("bun/package.json").replace(/package\.json$/, "bin/bun.exe")')
  mkdir -p "$work/bin"
  ln -sf "$bun_bin" "$work/bin/bun"
  PATH="$work/bin:$(no_rust_path)" BUN_COMPILE_ATTEMPTS=1 BUN_COMPILE_TIMEOUT_SEC=240 bash scripts/bun-compile-safe.sh
  cmp .bun-out/helios_vk.node packages/helios/native/helios.linux-x64-gnu.node
  local help
  help=$(.bun-out/alpha --help 2>&1)
  grep -qi "usage\|commands" <<<"$help" || { echo "$help"; echo "no usage text from the Bun binary"; return 1; }
  # The binary loads the addon beside it (the bundle has no native/): run a checked product.
  (cd "$work" && HELIOS_VALIDATION=0 "$alpha/.bun-out/alpha" bench --suite=cuda --check=true --checkShape=33x17x9 \
     --shapes=33x17x9 --iters=1 --warmup=0 --python=/bin/false) > "$work/bun-bench.log" 2>&1 \
    || { cat "$work/bun-bench.log"; echo "the Bun binary could not run Helios"; return 1; }
  grep -q "fails=0/" "$work/bun-bench.log" || { cat "$work/bun-bench.log"; return 1; }
  echo "note: bun build --compile ok ($(du -h .bun-out/alpha | cut -f1)); --help and a checked bench run via .bun-out/helios_vk.node"
)

do_fleet() (
  set -e
  # `alpha fleet deploy` to an "instance" that is a local directory: ssh and rsync are test doubles
  # that run the remote command here and copy the file (fleet.json sits in $work, above the copy,
  # where fleet looks for it). Fleet builds the Bun binary for bun-linux-x64-baseline (Bun fetches
  # that runtime from the npm registry), uploads alpha, helios_vk.node and helios_vk.c, and skips
  # the remote compile when `ldd helios_vk.node` passes there.
  mkdir -p "$work/fake" "$work/remote"
  printf '#!/usr/bin/env bash\nexec bash -c "${@: -1}"\n' > "$work/fake/ssh"
  printf '#!/usr/bin/env bash\nsrc="${@: -2:1}"; dst="${@: -1}"; cp "$src" "${dst#*:}"\n' > "$work/fake/rsync"
  chmod +x "$work/fake/ssh" "$work/fake/rsync"
  ln -sf "$work/bin/bun" "$work/fake/bun"
  printf '{ "sshUser": "test", "sshKey": "~/.ssh/none", "deployDir": "%s",\n  "instances": { "local": { "host": "127.0.0.1", "zone": "-", "machine": "-", "gpu": "-", "role": "training" } } }\n' \
    "$work/remote" > "$work/fleet.json"
  cd "$alpha"
  local out
  out=$(PATH="$work/fake:$(no_rust_path)" node apps/cli/dist/main.js fleet deploy local 2>&1)
  echo "$out"
  grep -q "Using prebuilt helios_vk.node (remote compile skipped)" <<<"$out" || { echo "fleet did not take the prebuilt addon"; return 1; }
  grep -q "Deploy successful" <<<"$out"
  cmp "$work/remote/helios_vk.node" packages/helios/native/helios.linux-x64-gnu.node
  # The deployed binary runs Helios from the addon beside it, from another directory.
  (cd / && HELIOS_VALIDATION=0 "$work/remote/alpha" bench --suite=cuda --check=true --checkShape=33x17x9 \
     --shapes=33x17x9 --iters=1 --warmup=0 --python=/bin/false) > "$work/remote-bench.log" 2>&1 \
    || { cat "$work/remote-bench.log"; echo "the deployed binary could not run Helios"; return 1; }
  grep -q "fails=0/" "$work/remote-bench.log" || { cat "$work/remote-bench.log"; return 1; }
  # A forced remote rebuild compiles helios_vk.c with gcc: it must stop with the message saying the
  # addon is Rust and prebuilt, and leave the deployed addon as it was.
  out=$(PATH="$work/fake:$(no_rust_path)" node apps/cli/dist/main.js fleet deploy local --rebuild-native=true 2>&1)
  echo "$out"
  grep -q "Helios is a Rust addon" <<<"$out" || { echo "the forced remote compile did not stop with the #error"; return 1; }
  cmp "$work/remote/helios_vk.node" packages/helios/native/helios.linux-x64-gnu.node
  echo "note: fleet deploy took the prebuilt addon; the deployed binary ran a checked product; --rebuild-native stops at helios_vk.c's #error, addon kept"
)

stage pack -- do_pack
stage copy pack -- do_copy
stage install copy -- do_install
stage build-helios install -- do_build_helios
stage tsc-b install -- do_tsc
stage vitest-gpu-perf install -- run_vitest
stage bench-cuda install -- do_bench
stage train-cpu-checkpoint install -- do_checkpoint
stage eval-helios-vs-cpu train-cpu-checkpoint -- do_eval
stage tape-step install -- do_tape
stage bun-compile install -- do_bun
stage fleet-deploy bun-compile -- do_fleet

echo
echo "test-alpha: ${#passed[@]} passed, ${#failed[@]} failed, ${#skipped[@]} skipped"
for s in "${failed[@]}"; do echo "  FAIL $s"; done
for s in "${skipped[@]}"; do echo "  skip $s"; done
[ "${#failed[@]}" -eq 0 ] && [ "${#skipped[@]}" -eq 0 ]
