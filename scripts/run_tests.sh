#!/usr/bin/env bash
# The test suite: install what is missing, then build and run every test under
# CTest in two configurations:
#   CPU   ($BUILD_DIR, default build): the C++ unit tests, the tool and
#         distributed scripts, and the pytest suite of the `caffe` package
#         (one CTest test, pycaffe_pytest);
#   CUDA  ($CUDA_BUILD_DIR, default build-cuda; USE_CUDA=ON, USE_CUDNN=ON):
#         the same suite built with the GPU backend. On a machine without a
#         GPU every GPU test skips, with the reason, and the skips are counted.
#   hardening (scripts/run_hardening.sh): the unit tests under ASan + UBSan
#         and the threaded ones under TSan (clang builds in build-asan/ and
#         build-tsan/), and a short run of every fuzz harness; each of its
#         checks counts once (docs/reliability.md).
# CUDA=0 leaves the CUDA configuration out (it needs the CUDA toolkit);
# HARDENING=0 leaves the hardening checks out.
# The last line sums all runs: "N passed, N failed, N skipped".
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

if [ "${HARDENING:-1}" != 0 ]; then
  echo "=== hardening: sanitizers and fuzzing (scripts/run_hardening.sh) ==="
  hardening_log=$(mktemp /tmp/poseidon_hardening_run.XXXXXX)
  JOBS=$JOBS bash scripts/run_hardening.sh 2>&1 | tee "$hardening_log"
  [ "${PIPESTATUS[0]}" -eq 0 ] || status=1
  counts=$(grep -E '^hardening: [0-9]+ passed, [0-9]+ failed, [0-9]+ skipped' \
           "$hardening_log" | tail -1)
  if [ -z "$counts" ]; then
    echo "hardening: no summary line"
    status=1
  else
    read -r h_pass h_fail h_skip < <(sed -E \
      's/hardening: ([0-9]+) passed, ([0-9]+) failed, ([0-9]+) skipped/\1 \2 \3/' \
      <<<"$counts")
    total_pass=$((total_pass + h_pass))
    total_fail=$((total_fail + h_fail))
    total_skip=$((total_skip + h_skip))
  fi
  rm -f "$hardening_log"
fi

echo "$total_pass passed, $total_fail failed, $total_skip skipped"
exit "$status"
