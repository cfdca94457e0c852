#!/usr/bin/env bash
# Runs Poseidon's libFuzzer harnesses (src/poseidon/test/fuzz/) from an
# instrumented build, and the psd_run config fuzzer; see docs/reliability.md.
#
#   scripts/fuzz/run_fuzzers.sh [-b BUILD_DIR] [-t SECONDS] [-c CORPUS_DIR]
#                               [-s SEED] [TARGET...]
#
#   -b  a build configured with CC=clang CXX=clang++ -DBUILD_fuzzers=ON
#       -DPOSEIDON_SANITIZE=address,undefined (scripts/run_hardening.sh makes
#       one in build-asan, the default)
#   -t  seconds per target (default 60; CI's smoke run uses a few)
#   -c  where corpora grow, one folder per target (default fuzz-corpus/, which
#       git ignores); findings go to CORPUS_DIR/findings/TARGET/
#   -s  libFuzzer's random seed (default 1: runs repeat)
#   TARGET  some of: net_prototxt solver_prototxt caffemodel solverstate datum
#       image hdf5 dist_messages layer_setup psd_run (default: all)
#
# Seeds are written by the build's fuzz_seeds from the repository's files.
# For each target one line gives the executions, the coverage libFuzzer
# measured (edges of the instrumented code, "cov") and the corpus size; a
# finding (crash, sanitizer report, CHECK failure, escaped exception, hang,
# allocation over -malloc_limit_mb) fails the run and is saved. Reproduce one
# with BUILD_DIR/fuzz/fuzz_TARGET FILE.
set -uo pipefail
cd "$(dirname "$0")/../.."
BUILD_DIR=build-asan
SECONDS_PER_TARGET=60
CORPUS=fuzz-corpus
SEED=1
while getopts "b:t:c:s:" opt; do
  case $opt in
    b) BUILD_DIR=$OPTARG ;;
    t) SECONDS_PER_TARGET=$OPTARG ;;
    c) CORPUS=$OPTARG ;;
    s) SEED=$OPTARG ;;
    *) sed -n '2,22p' "$0"; exit 2 ;;
  esac
done
shift $((OPTIND - 1))
TARGETS=("$@")
[ ${#TARGETS[@]} -gt 0 ] || TARGETS=(net_prototxt solver_prototxt caffemodel
  solverstate datum image hdf5 dist_messages layer_setup psd_run)

if [ ! -x "$BUILD_DIR/fuzz/fuzz_seeds" ]; then
  echo "run_fuzzers: $BUILD_DIR/fuzz/fuzz_seeds is missing; build with" \
       "BUILD_fuzzers=ON (scripts/run_hardening.sh)" >&2
  exit 2
fi
mkdir -p "$CORPUS"
CORPUS=$(cd "$CORPUS" && pwd)
SEEDS="$CORPUS/seeds"
# Scratch files (LMDBs, images) are written per execution: memory is faster.
# The harnesses make their scratch directories under one folder of this run,
# removed at the end (a harness ended by libFuzzer's time limit or a crash
# cannot always remove its own).
SCRATCH_PARENT=${TMPDIR:-}
if [ -z "$SCRATCH_PARENT" ] && [ -d /dev/shm ] && [ -w /dev/shm ]; then
  SCRATCH_PARENT=/dev/shm
fi
TMPDIR=$(mktemp -d "${SCRATCH_PARENT:-/tmp}/poseidon_fuzz.XXXXXX") || exit 1
export TMPDIR
trap 'rm -rf "$TMPDIR"' EXIT
rm -rf "$SEEDS"
"$BUILD_DIR/fuzz/fuzz_seeds" "$SEEDS" || exit 1

# Leaks are findings too; allocations over 1 GB are reported by libFuzzer
# (Poseidon's own blob limit is lowered to 256 MB by the harnesses); images
# above 16 M pixels are refused by OpenCV (its default allows 1 G, which a
# 100-byte file may declare: legal, but slow to fuzz).
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1:detect_stack_use_after_return=0}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
export LSAN_OPTIONS=${LSAN_OPTIONS:-suppressions=$PWD/scripts/sanitizer_suppressions/lsan.supp:print_suppressions=0}
export OPENCV_IO_MAX_IMAGE_PIXELS=16777216
export POSEIDON_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1

status=0
summary=()
for target in "${TARGETS[@]}"; do
  findings="$CORPUS/findings/$target"
  mkdir -p "$CORPUS/$target" "$findings"
  log="$CORPUS/$target.log"
  if [ "$target" = psd_run ]; then
    python3 scripts/fuzz/fuzz_psd_run.py --seconds "$SECONDS_PER_TARGET" \
      --seed "$SEED" --corpus "$CORPUS/$target" --crashes "$findings" \
      > "$log" 2>&1
    rc=$?
  else
    binary="$BUILD_DIR/fuzz/fuzz_$target"
    if [ ! -x "$binary" ]; then
      echo "run_fuzzers: $binary is missing" >&2
      status=1
      continue
    fi
    "$binary" -max_total_time="$SECONDS_PER_TARGET" -seed="$SEED" \
      -timeout=20 -rss_limit_mb=3072 -malloc_limit_mb=1024 \
      -max_len=200000 -print_final_stats=1 \
      -artifact_prefix="$findings/" "$CORPUS/$target" "$SEEDS/$target" \
      > "$log" 2>&1
    rc=$?
  fi
  execs=$(grep -o 'number_of_executed_units: *[0-9]*' "$log" | tail -1 |
          grep -o '[0-9]*$')
  if [ -z "$execs" ]; then
    execs=$(grep -o 'loop: [0-9]* executions' "$log" | grep -o '[0-9]*')
  fi
  cov=$(grep -Eo '(DONE|pulse|NEW|REDUCE) +cov: [0-9]+' "$log" | tail -1 |
        grep -Eo '[0-9]+$')
  corpus_size=$(ls "$CORPUS/$target" | wc -l)
  line=$(printf '%-16s %9s executions  cov %6s  corpus %5s  ' "$target" \
         "${execs:-?}" "${cov:--}" "$corpus_size")
  if [ "$rc" -eq 0 ] && [ -z "$(ls -A "$findings")" ]; then
    summary+=("$line ok")
  else
    summary+=("$line FINDING (exit $rc; see $log, $findings)")
    grep -E "ERROR|SUMMARY|Check failed|terminate|FINDING" "$log" | head -5
    status=1
  fi
done
echo "=== fuzzing: $SECONDS_PER_TARGET s per target, seed $SEED ==="
printf '%s\n' "${summary[@]}"
exit "$status"
