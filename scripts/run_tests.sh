#!/usr/bin/env bash
# The test suite: install what is missing, build, run every C++ test under
# CTest. The last line is CTest's summary.
set -euo pipefail
cd "$(dirname "$0")/.."
export BUILD_DIR=${BUILD_DIR:-build}
bash scripts/install_deps.sh
bash scripts/build.sh
cd "$BUILD_DIR"
ctest --output-on-failure -j "${JOBS:-$(nproc)}" --timeout 900 2>&1 | tail -n 200
exit "${PIPESTATUS[0]}"
