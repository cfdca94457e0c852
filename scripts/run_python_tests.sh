#!/usr/bin/env bash
# The Python bindings' test suite: installs what is missing, builds the
# `pycaffe` target (cmake -DBUILD_python=ON) in $BUILD_DIR (default
# build-python, or the first argument), with poseidon_train for the C++
# interop test, and runs pytest on python/caffe/test
# against <build>/python. The last line is pytest's summary.
#
#   scripts/run_python_tests.sh [build-dir] [pytest args...]
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${1:-${BUILD_DIR:-build-python}}
shift || true
PYTHON=${PYTHON:-python3}
export PYTHON

bash scripts/install_python_deps.sh >&2
cmake -S . -B "$BUILD_DIR" -DCMAKE_BUILD_TYPE=Release -DBUILD_python=ON \
  -DPython_EXECUTABLE="$(command -v "$PYTHON")" ${CMAKE_ARGS:-} >/dev/null
cmake --build "$BUILD_DIR" --target pycaffe poseidon_train -j "${JOBS:-$(nproc)}" >&2

BUILD_ABS=$(cd "$BUILD_DIR" && pwd)
export PYTHONPATH="$BUILD_ABS/python${PYTHONPATH:+:$PYTHONPATH}"
export GLOG_minloglevel=${GLOG_minloglevel:-2}
exec "$PYTHON" -m pytest -p no:cacheprovider -q python/caffe/test "$@"
