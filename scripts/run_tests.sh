#!/usr/bin/env bash
# The test suite: install what is missing, build (with the Python bindings),
# run every test under CTest: the C++ unit tests, the tool and distributed
# scripts, and the pytest suite of the `caffe` package (one CTest test,
# pycaffe_pytest). The last line is CTest's summary.
set -euo pipefail
cd "$(dirname "$0")/.."
export BUILD_DIR=${BUILD_DIR:-build}
bash scripts/install_deps.sh
bash scripts/install_python_deps.sh
bash scripts/build.sh -DBUILD_python=ON
cd "$BUILD_DIR"
ctest --output-on-failure -j "${JOBS:-$(nproc)}" --timeout 900 2>&1 | tail -n 200
exit "${PIPESTATUS[0]}"
