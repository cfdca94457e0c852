#!/usr/bin/env bash
# End to end on real data: converts Fashion-MNIST (Debian's
# dataset-fashion-mnist) to LMDB, trains BVLC Caffe's LeNet prototxt
# unchanged for a short run, and checks that
#   - the test accuracy is clearly better than chance (> 0.80; chance is 0.10),
#   - the log ends with the summary line (final scores, snapshot),
#   - `poseidon_train test` on the snapshot reproduces that accuracy,
#   - the legacy V1 LeNet prototxt trains too,
#   - `poseidon_train time` reports per-layer and total times.
# Usage: test_train_fashion_mnist.sh BUILD_DIR   (run from the repo root)
# Each step builds on the one before, so the first failed check ends the run
# (fatal).
set -euo pipefail
source "$(cd "$(dirname "$0")" && pwd)/test_lib.sh"
BUILD_DIR=$(cd "$1" && pwd)
TRAIN="$BUILD_DIR/tools/poseidon_train"
ITERS=${ITERS:-1000}
make_workdir poseidon_fmnist

BUILD_DIR="$BUILD_DIR" bash examples/fashion_mnist/create_fashion_mnist.sh

# Caffe's LeNet prototxt as it is, with a short schedule.
sed -e "s/^max_iter: .*/max_iter: $ITERS/" \
    -e "s/^test_interval: .*/test_interval: $ITERS/" \
    -e "s|^snapshot_prefix: .*|snapshot_prefix: \"$WORK/lenet\"|" \
    -e "s/^snapshot: .*/snapshot: 0/" \
    examples/fashion_mnist/caffe_lenet_solver.prototxt > "$WORK/solver.prototxt"
"$TRAIN" train --solver="$WORK/solver.prototxt" > "$WORK/train.log" 2>&1 \
  || { tail -20 "$WORK/train.log"; fatal "training exited non-zero"; }
grep -q "images/s" "$WORK/train.log" || fatal "no throughput in the log"
grep -q "ETA" "$WORK/train.log" || fatal "no ETA in the log"
ok "LeNet trained $ITERS iterations, throughput and ETA logged"
accuracy=$(grep "Test net output #0: accuracy" "$WORK/train.log" | tail -1 \
           | sed 's/.*accuracy = //')
echo "test accuracy after $ITERS iterations: $accuracy"
# The run ends with one summary line holding the same final scores.
summary=$(grep "Training done: $ITERS iterations in " "$WORK/train.log") \
  || fatal "no summary line ending the log"
echo "$summary" | grep -q "test: accuracy = $accuracy, loss = " \
  || fatal "summary lacks the final accuracy $accuracy: $summary"
echo "$summary" | grep -q "images/s); " || fatal "no throughput in: $summary"
echo "$summary" | grep -q "last snapshot: $WORK/lenet_iter_$ITERS.solverstate" \
  || fatal "summary lacks the last snapshot: $summary"
ok "summary line: final scores, throughput, last snapshot"
awk -v a="$accuracy" 'BEGIN { exit !(a > 0.80) }' \
  || fatal "accuracy $accuracy is not above 0.80"
ok "test accuracy $accuracy is above 0.80"

# Scoring the snapshot gives the same accuracy over the whole test set.
"$TRAIN" test --model=examples/fashion_mnist/caffe_lenet_train_test.prototxt \
  --weights="$WORK/lenet_iter_$ITERS.caffemodel" --iterations=100 \
  > "$WORK/test.log" 2>&1 || { tail "$WORK/test.log"; fatal "test failed"; }
scored=$(grep -E "\] accuracy = " "$WORK/test.log" | tail -1 | sed 's/.*accuracy = //')
echo "poseidon_train test accuracy: $scored"
awk -v a="$accuracy" -v b="$scored" 'BEGIN { d = a - b; exit !(d < 1e-4 && d > -1e-4) }' \
  || fatal "test accuracy $scored differs from training's $accuracy"
ok "poseidon_train test on the snapshot reproduces it: $scored"

# The V1 format trains.
sed -e "s|^net: .*|net: \"examples/fashion_mnist/lenet_v1_train_test.prototxt\"|" \
    -e "s/^max_iter: .*/max_iter: 20/" -e "s/^test_iter: .*/test_iter: 2/" \
    "$WORK/solver.prototxt" > "$WORK/v1_solver.prototxt"
"$TRAIN" train --solver="$WORK/v1_solver.prototxt" > "$WORK/v1.log" 2>&1 \
  || { tail "$WORK/v1.log"; fatal "V1 net did not train"; }
grep -q "deprecated V1 net format" "$WORK/v1.log" || fatal "V1 upgrade not logged"
ok "the V1 LeNet trains, its upgrade logged"

# time prints per-layer and total figures.
"$TRAIN" time --model=examples/fashion_mnist/caffe_lenet_train_test.prototxt \
  --iterations=3 > "$WORK/time.log" 2>&1 || fatal "time failed"
grep -q "conv1	forward:" "$WORK/time.log" || fatal "no per-layer forward time"
grep -q "Average Forward-Backward:" "$WORK/time.log" || fatal "no total time"
ok "time reports per-layer and total times"
finish
