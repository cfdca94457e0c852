#!/usr/bin/env bash
# The hardening steps of CI (issue 16; docs/reliability.md), run by
# scripts/run_tests.sh after the CPU and CUDA configurations:
#   1. asan build   clang, -fsanitize=address,undefined plus fuzzer-no-link,
#                   in $ASAN_BUILD_DIR: the library, the C++ test binary and
#                   the libFuzzer harnesses from one set of objects
#   2. asan tests   the C++ unit tests (core, layers, solvers, data, the
#                   in-process distributed tests) under AddressSanitizer +
#                   UndefinedBehaviorSanitizer, in two shards side by side
#   3. fuzz smoke   every harness for $FUZZ_SECONDS seconds from its seeds
#                   (scripts/fuzz/run_fuzzers.sh), psd_run's config included
#   4. tsan build   clang, -fsanitize=thread, in $TSAN_BUILD_DIR: the library
#                   and the tests of the threaded parts only
#   5. tsan tests   device workers, communication threads and the loopback
#                   communicator, shared-memory allreduce, action agreement,
#                   the thread pool, data prefetch, under ThreadSanitizer
# Each step is one check: the last line is "hardening: N passed, N failed,
# N skipped" (a step whose build failed counts the steps after it as
# skipped), after the time each step took.
#
# Environment: ASAN_BUILD_DIR (build-asan), TSAN_BUILD_DIR (build-tsan),
# JOBS (nproc), FUZZ_SECONDS (5 per harness).
set -uo pipefail
cd "$(dirname "$0")/.."
ASAN_BUILD_DIR=${ASAN_BUILD_DIR:-build-asan}
TSAN_BUILD_DIR=${TSAN_BUILD_DIR:-build-tsan}
JOBS=${JOBS:-$(nproc)}
FUZZ_SECONDS=${FUZZ_SECONDS:-5}
export POSEIDON_NUM_THREADS=2 OPENBLAS_NUM_THREADS=1

passed=0
failed=0
skipped=0
timings=()
start_all=$(date +%s)

# step NAME COMMAND...: runs one step, logs to $LOGS/NAME.log, counts it.
LOGS=$(mktemp -d /tmp/poseidon_hardening.XXXXXX)
step() {
  local name=$1 t0 rc
  shift
  t0=$(date +%s)
  echo "=== hardening: $name ==="
  "$@" > "$LOGS/$name.log" 2>&1
  rc=$?
  local took=$(( $(date +%s) - t0 ))
  timings+=("$(printf '%-12s %4d s  %s' "$name" "$took" \
               "$([ $rc -eq 0 ] && echo ok || echo FAILED)")")
  if [ $rc -eq 0 ]; then
    passed=$((passed + 1))
    tail -n 4 "$LOGS/$name.log"
  else
    failed=$((failed + 1))
    echo "--- $name failed (exit $rc); the end of its log:"
    tail -n 60 "$LOGS/$name.log"
  fi
  return $rc
}
skip() {
  skipped=$((skipped + 1))
  timings+=("$(printf '%-12s    -    skipped (%s)' "$1" "$2")")
}

# Dependencies, clang's included (scripts/install_deps.sh).
if ! command -v clang++ > /dev/null; then
  echo "hardening: clang++ is missing; run scripts/install_deps.sh"
  echo "hardening: 0 passed, 1 failed, 4 skipped"
  exit 1
fi

# Sanitizer builds: no optimisation beyond -O1, line tables for reports,
# assertions (DCHECK) on.
configure() {
  local dir=$1
  shift
  CC=clang CXX=clang++ cmake -S . -B "$dir" -DCMAKE_BUILD_TYPE=Debug \
    -DCMAKE_C_FLAGS_DEBUG="-O1 -gline-tables-only" \
    -DCMAKE_CXX_FLAGS_DEBUG="-O1 -gline-tables-only" \
    -DUSE_CUDA=OFF -DUSE_CUDNN=OFF -DBUILD_python=OFF "$@"
}

asan_build() {
  configure "$ASAN_BUILD_DIR" -DPOSEIDON_SANITIZE=address,undefined \
    -DBUILD_fuzzers=ON -DPOSEIDON_TEST_SOURCES= &&
  cmake --build "$ASAN_BUILD_DIR" -j "$JOBS" \
    --target poseidon_tests fuzzers
}

# The unit tests that need no GPU, in $JOBS shards side by side. LeakSanitizer
# stays on; Open MPI's own allocations at startup are suppressed.
SUPPRESSIONS=$PWD/scripts/sanitizer_suppressions
asan_tests() {
  local bin="$ASAN_BUILD_DIR/test/poseidon_tests" pids=() rc=0 i
  export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1:strict_string_checks=1:detect_stack_use_after_return=0
  export LSAN_OPTIONS=suppressions=$SUPPRESSIONS/lsan.supp:print_suppressions=0
  export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
  for ((i = 0; i < JOBS; i++)); do
    GTEST_TOTAL_SHARDS=$JOBS GTEST_SHARD_INDEX=$i "$bin" \
      --gtest_filter="$ASAN_TEST_FILTER" --gtest_brief=1 \
      > "$LOGS/asan_shard$i.log" 2>&1 &
    pids+=($!)
  done
  for ((i = 0; i < JOBS; i++)); do
    if ! wait "${pids[$i]}"; then
      rc=1
      echo "--- shard $i failed:"
      grep -E "FAILED|ERROR: |runtime error|SUMMARY|Check failed" \
        "$LOGS/asan_shard$i.log" | head -20
      tail -n 30 "$LOGS/asan_shard$i.log"
    fi
    grep -E "tests? ran|PASSED|SKIPPED \[" "$LOGS/asan_shard$i.log" | tail -3
  done
  return $rc
}
# GPU tests skip without a GPU anyway; the model corpus is covered by the
# regular configurations (and takes long under ASan).
ASAN_TEST_FILTER=${ASAN_TEST_FILTER:--*GPU*:*ModelCorpus*}

fuzz_smoke() {
  bash scripts/fuzz/run_fuzzers.sh -b "$ASAN_BUILD_DIR" -t "$FUZZ_SECONDS" \
    -c "$ASAN_BUILD_DIR/fuzz-corpus"
}

TSAN_TESTS='/dist/test_|/test_parallel|/test_data_layer|/test_data_skip|/test_image_data_layer|/test_signal_handler'
tsan_build() {
  configure "$TSAN_BUILD_DIR" -DPOSEIDON_SANITIZE=thread \
    -DBUILD_fuzzers=OFF -DPOSEIDON_TEST_SOURCES="$TSAN_TESTS" &&
  cmake --build "$TSAN_BUILD_DIR" -j "$JOBS" --target poseidon_tests
}

tsan_tests() {
  export TSAN_OPTIONS="halt_on_error=1:second_deadlock_stack=1:suppressions=$SUPPRESSIONS/tsan.supp"
  # Without address-space randomisation: ThreadSanitizer's fixed memory
  # layout collides with high-entropy ASLR on some kernels.
  local run=()
  command -v setarch > /dev/null && run=(setarch "$(uname -m)" -R)
  "${run[@]}" "$TSAN_BUILD_DIR/test/poseidon_tests" --gtest_filter='-*GPU*' \
    --gtest_brief=1
}

if step asan_build asan_build; then
  step asan_tests asan_tests
  step fuzz_smoke fuzz_smoke
else
  skip asan_tests "no ASan build"
  skip fuzz_smoke "no ASan build"
fi
if step tsan_build tsan_build; then
  step tsan_tests tsan_tests
else
  skip tsan_tests "no TSan build"
fi

echo "=== hardening: steps (logs in $LOGS) ==="
printf '  %s\n' "${timings[@]}"
echo "  total        $(( $(date +%s) - start_all )) s"
echo "hardening: $passed passed, $failed failed, $skipped skipped"
[ "$failed" -eq 0 ]
