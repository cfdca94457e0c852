#!/usr/bin/env bash
# Snapshots survive SIGKILL and resume bit-exactly (Note [Atomic writes] in
# util/io.cpp, Note [Exact resume] in solver.cpp), with poseidon_train on
# Fashion-MNIST (LeNet, Data layers reading LMDBs):
#   1. An uninterrupted run of 40 iterations (snapshots at 20 and 40).
#   2. The same run killed with SIGKILL half way through writing the
#      iteration-40 .caffemodel, and again half way through its .solverstate
#      (POSEIDON_TEST_PAUSE_WRITING holds the write there): the iteration-20
#      snapshot is intact (byte-identical to run 1's) and nothing half written
#      is left under a snapshot name.
#   3. Resuming the killed run from its iteration-20 snapshot gives the
#      iteration-40 weights of run 1 byte for byte.
#   4. The same with snapshot_format: HDF5 (killed before the
#      .caffemodel.h5 is renamed into place): the iteration-20 weights load,
#      and resuming from the .solverstate.h5 (writing binary snapshots)
#      gives run 1's iteration-40 weights byte for byte. (HDF5 files hold
#      object times, so they are compared by what they load into.)
# Usage: test_snapshot_kill.sh BUILD_DIR   (from the repository root)
set -uo pipefail
source "$(cd "$(dirname "$0")" && pwd)/test_lib.sh"
BUILD_DIR=$(cd "$1" && pwd)
TRAIN="$BUILD_DIR/tools/poseidon_train"
make_workdir poseidon_snapkill
export POSEIDON_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1

BUILD_DIR="$BUILD_DIR" bash examples/fashion_mnist/create_fashion_mnist.sh \
  > "$WORK/data.log" 2>&1 ||
  { tail "$WORK/data.log"; fatal "create_fashion_mnist.sh failed"; }

# solver PREFIX OUT [FORMAT]: 40 iterations, snapshots every 20 (in FORMAT,
# default BINARYPROTO), tests every 10.
solver() {
  sed -e "s|^max_iter: .*|max_iter: 40|" \
      -e "s|^test_interval: .*|test_interval: 10|" \
      -e "s|^test_iter: .*|test_iter: 5|" \
      -e "s|^display: .*|display: 10|" \
      -e "s|^snapshot: .*|snapshot: 20|" \
      -e "s|^snapshot_prefix: .*|snapshot_prefix: \"$1\"|" \
      examples/fashion_mnist/caffe_lenet_solver.prototxt > "$2"
  echo "random_seed: 5" >> "$2"
  echo "snapshot_format: ${3:-BINARYPROTO}" >> "$2"
}

# 1. Uninterrupted.
mkdir -p "$WORK/a"
solver "$WORK/a/lenet" "$WORK/a.prototxt"
"$TRAIN" train --solver="$WORK/a.prototxt" > "$WORK/a.log" 2>&1 \
  || { tail "$WORK/a.log"; fail "the uninterrupted run failed"; }

# kill_while_writing NAME FILE_SUFFIX: runs to iteration 40, pauses half way
# through writing the snapshot file ending in FILE_SUFFIX, SIGKILLs it, then
# checks what is on disk and resumes from iteration 20.
# FORMAT (default BINARYPROTO) is the snapshots' format.
kill_while_writing() {
  local name=$1 suffix=$2 format=${3:-BINARYPROTO} dir="$WORK/$1"
  local log="$WORK/$1.log" pid h5=""
  [ "$format" = HDF5 ] && h5=.h5
  mkdir -p "$dir"
  solver "$dir/lenet" "$WORK/$name.prototxt" "$format"
  POSEIDON_TEST_PAUSE_WRITING="_iter_40$suffix" \
    "$TRAIN" train --solver="$WORK/$name.prototxt" > "$log" 2>&1 &
  pid=$!
  for _ in $(seq 1 1200); do
    grep -q "POSEIDON_TEST_PAUSE_WRITING: paused" "$log" && break
    kill -0 "$pid" 2> /dev/null || break
    sleep 0.1
  done
  if ! grep -q "POSEIDON_TEST_PAUSE_WRITING: paused" "$log"; then
    tail "$log"; fail "$name: the run never reached the paused write"
    kill -9 "$pid" 2> /dev/null; wait "$pid" 2> /dev/null
    return
  fi
  kill -9 "$pid"
  wait "$pid" 2> /dev/null
  local tmp
  tmp=$(ls "$dir" | grep -c "_iter_40$suffix.tmp.")
  # Binary snapshots are compared by their bytes, HDF5 ones by loading.
  if [ "$tmp" -eq 1 ] && [ ! -e "$dir/lenet_iter_40$suffix" ] &&
     { [ -n "$h5" ] || cmp -s "$dir/lenet_iter_20.caffemodel" \
                              "$WORK/a/lenet_iter_20.caffemodel"; } &&
     "$TRAIN" test --model=examples/fashion_mnist/caffe_lenet_train_test.prototxt \
       --weights="$dir/lenet_iter_20.caffemodel$h5" --iterations=2 \
       > "$WORK/$name.test.log" 2>&1; then
    ok "$name: SIGKILL half way through lenet_iter_40$suffix left the" \
       "iteration-20 snapshot intact and no lenet_iter_40$suffix"
  else
    ls -l "$dir"; tail -3 "$WORK/$name.test.log" 2> /dev/null
    fail "$name: after SIGKILL the snapshots are not as expected"
  fi
  rm -f "$dir"/*.tmp.*
  # The resumed run writes binary snapshots, compared byte for byte.
  solver "$dir/lenet" "$WORK/$name.resume.prototxt"
  if "$TRAIN" train --solver="$WORK/$name.resume.prototxt" \
       --snapshot="$dir/lenet_iter_20.solverstate$h5" \
       > "$WORK/$name.resume.log" 2>&1 &&
     cmp "$dir/lenet_iter_40.caffemodel" "$WORK/a/lenet_iter_40.caffemodel"; then
    ok "$name: resumed from iteration 20, the iteration-40 weights equal the" \
       "uninterrupted run's byte for byte"
  else
    tail -5 "$WORK/$name.resume.log"
    fail "$name: the resumed run's iteration-40 weights differ"
  fi
}

kill_while_writing model .caffemodel
kill_while_writing state .solverstate
kill_while_writing hdf5 .caffemodel.h5 HDF5

finish
