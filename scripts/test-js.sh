#!/usr/bin/env bash
# The JS test suite against the built addon, with Vulkan validation on in every test
# (any validation message fails the test that produced it):
#   1. the generated test kernels match their .spvasm sources;
#   2. every __test__/*.test.ts file (node:test, one process per file);
#   3. the files with alternative native paths again, with those paths forced: staging
#      copies instead of direct mapping, descriptor pools instead of push descriptors;
#   4. the Bun smoke test.
# Every stage runs even if an earlier one failed; the exit status says whether all passed.
# Needs the addon built first (npm run build:native). About a minute on lavapipe.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

failed=()
stage() {
  local name="$1"
  shift
  echo "== test-js: $name"
  "$@" || failed+=("$name")
}

stage "test kernels up to date" scripts/gen-test-kernels.sh --check
npx tsc -p tsconfig.json || { echo "test-js: tsc failed" >&2; exit 1; }
stage "node --test (all files)" node --test dist/__test__/
stage "forced staging + descriptor pools" env HELIOS_FORCE_STAGING=1 HELIOS_NO_PUSH_DESCRIPTORS=1 node --test \
  dist/__test__/dispatch.test.js dist/__test__/ordering.test.js dist/__test__/leasing.test.js dist/__test__/buffers.test.js \
  dist/__test__/capture.test.js dist/__test__/profiling.test.js
stage "bun smoke" npx --no-install bun __test__/bun-smoke.mjs

if ((${#failed[@]})); then
  printf 'test-js: FAILED: %s\n' "${failed[@]}" >&2
  exit 1
fi
echo "test-js: all stages passed"
