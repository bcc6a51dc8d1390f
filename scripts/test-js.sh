#!/usr/bin/env bash
# The JS test suite against the built addon, with Vulkan validation on in every test
# (any validation message fails the test that produced it):
#   1. the generated test kernels match their .spvasm sources;
#   2. every __test__/*.test.ts file (node:test, one process per file);
#   3. the files with alternative native paths again, with those paths forced: staging
#      copies instead of direct mapping, descriptor pools instead of push descriptors;
#   4. the Bun smoke test.
# Needs the addon built first (npm run build:native). Takes about a minute on lavapipe.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

scripts/gen-test-kernels.sh --check
npx tsc -p tsconfig.json
node --test dist/__test__/
HELIOS_FORCE_STAGING=1 HELIOS_NO_PUSH_DESCRIPTORS=1 node --test \
  dist/__test__/dispatch.test.js dist/__test__/ordering.test.js dist/__test__/leasing.test.js \
  dist/__test__/capture.test.js dist/__test__/profiling.test.js
npx --no-install bun __test__/bun-smoke.mjs
