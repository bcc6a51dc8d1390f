#!/usr/bin/env bash
# The two entry points README documents:
#   bash scripts/run.sh demo   set up, then run the main job
#   bash scripts/run.sh test   set up, then run every test (cargo + JS, validation on)
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$HOME/.cargo/bin:$PATH"
what=${1:-}
case "$what" in
  demo)
    bash scripts/setup.sh
    node dist/bench/demo.js "${@:2}"
    ;;
  test)
    bash scripts/setup.sh
    bash scripts/test.sh
    ;;
  *)
    echo "usage: bash scripts/run.sh demo|test" >&2
    exit 2
    ;;
esac
