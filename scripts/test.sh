#!/usr/bin/env bash
# Every test, with the Khronos validation layer on (any validation message fails a test).
# Run by `npm test`; assumes scripts/setup.sh has run (README: `bash scripts/setup.sh && npm test`).
set -euo pipefail
cd "$(dirname "$0")/.."
# setup.sh may have installed Rust in this very shell session.
export PATH="$HOME/.cargo/bin:$PATH"
export HELIOS_VALIDATION=1
export HELIOS_CACHE_DIR=${HELIOS_CACHE_DIR:-$(mktemp -d)}

step() { echo; echo "=== $* ==="; }

step "generated files are up to date (index.d.ts, native/index.cjs)"
git diff --exit-code -- index.d.ts native/index.cjs

step "cargo test"
cargo test --quiet 2>&1

step "test kernels are up to date (__test__/kernels/spirv.ts)"
bash scripts/gen-test-kernels.sh --check

step "JS tests (node --test, validation on)"
node --expose-gc --test --test-concurrency=2 dist/__test__/

step "JS tests again with staging copies and descriptor pools forced (the non-default paths)"
HELIOS_FORCE_STAGING=1 HELIOS_NO_PUSH_DESCRIPTORS=1 node --test --test-concurrency=2 \
  dist/__test__/dispatch.test.js dist/__test__/ordering.test.js dist/__test__/leasing.test.js dist/__test__/buffers.test.js \
  dist/__test__/capture.test.js dist/__test__/profiling.test.js dist/__test__/inbatch-reuse.test.js

step "JS tests again with per-buffer hazard barriers (HELIOS_BARRIER=buffer)"
HELIOS_BARRIER=buffer node --test --test-concurrency=2 \
  dist/__test__/dispatch.test.js dist/__test__/ordering.test.js dist/__test__/buffers.test.js dist/__test__/capture.test.js \
  dist/__test__/inbatch-reuse.test.js

step "Bun smoke test"
npx bun __test__/bun-smoke.mjs

step "npm pack + install into a scratch project"
bash scripts/test-pack.sh

step "Helios inside Alpha: the packed package in a copy of ../shared/alpha2, Alpha's own build and code"
bash scripts/test-alpha.sh
