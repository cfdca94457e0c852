#!/usr/bin/env bash
# The test suite: install what is missing, then build and run every test under
# CTest in two configurations:
#   CPU   ($BUILD_DIR, default build): the C++ unit tests, the tool and
#         distributed scripts, and the pytest suite of the `caffe` package
#         (one CTest test, pycaffe_pytest);
#   CUDA  ($CUDA_BUILD_DIR, default build-cuda; USE_CUDA=ON, USE_CUDNN=ON):
#         the same suite built with the GPU backend. On a machine without a
#         GPU every GPU test skips, with the reason, and the skips are counted.
# CUDA=0 leaves the CUDA configuration out (it needs the CUDA toolkit).
# The last line sums both runs: "N passed, N failed, N skipped".
set -uo pipefail
cd "$(dirname "$0")/.."
export BUILD_DIR=${BUILD_DIR:-build}
CUDA_BUILD_DIR=${CUDA_BUILD_DIR:-build-cuda}
JOBS=${JOBS:-$(nproc)}
bash scripts/install_deps.sh || exit 1
bash scripts/install_python_deps.sh || exit 1

total_pass=0
total_fail=0
total_skip=0
status=0

# run_suite NAME BUILD_DIR: runs CTest there, shows the end of its output
# (without the long list of skipped tests), and adds to the totals.
run_suite() {
  local name=$1 dir=$2 log
  log="$dir/ctest.log"
  echo "=== $name configuration: ctest in $dir ==="
  (cd "$dir" && ctest --output-on-failure -j "$JOBS" --timeout 900) >"$log" 2>&1
  local rc=$?
  grep -v -E '^[[:space:]]+[0-9]+ - .* \(Skipped\)$' "$log" | tail -n 120
  local summary run failed skipped
  summary=$(grep -E 'tests passed, [0-9]+ tests? failed out of' "$log" | tail -1)
  run=$(sed -E 's/.* out of ([0-9]+).*/\1/' <<<"$summary")
  failed=$(sed -E 's/.*passed, ([0-9]+) tests? failed.*/\1/' <<<"$summary")
  skipped=$(grep -c -E '\(Skipped\)$' "$log")
  if [ -z "$summary" ]; then
    echo "$name configuration: CTest printed no summary (exit $rc)"
    status=1
    return
  fi
  local passed=$((run - failed - skipped))
  echo "$name configuration: $passed passed, $failed failed, $skipped skipped"
  if [ "$skipped" -gt 0 ]; then
    local reason
    reason=$(grep -m1 -o 'GPU test skipped: .*' "$dir"/Testing/Temporary/LastTest.log 2>/dev/null)
    [ -n "$reason" ] && echo "  ($reason)"
  fi
  total_pass=$((total_pass + passed))
  total_fail=$((total_fail + failed))
  total_skip=$((total_skip + skipped))
  [ "$rc" -eq 0 ] || status=1
}

echo "=== CPU configuration: build ($BUILD_DIR) ==="
if bash scripts/build.sh -DBUILD_python=ON -DBUILD_matlab=ON -DUSE_CUDA=OFF -DUSE_CUDNN=OFF; then
  run_suite CPU "$BUILD_DIR"
else
  echo "CPU configuration: build failed"
  status=1
fi

if [ "${CUDA:-1}" != 0 ]; then
  echo "=== CUDA configuration: build ($CUDA_BUILD_DIR) ==="
  if BUILD_DIR=$CUDA_BUILD_DIR bash scripts/build.sh -DUSE_CUDA=ON \
      -DUSE_CUDNN=ON -DBUILD_python=OFF; then
    run_suite CUDA "$CUDA_BUILD_DIR"
  else
    echo "CUDA configuration: build failed"
    status=1
  fi
fi

echo "$total_pass passed, $total_fail failed, $total_skip skipped"
exit "$status"
