#!/usr/bin/env bash
# Trains LeNet on Fashion-MNIST. Run from the repository root, once the
# LMDBs data/fashion_mnist/fashion_mnist_{train,test}_lmdb exist (made with
# convert_mnist_data from /usr/share/datasets/fashion-mnist). Extra arguments
# go to poseidon_train, e.g. to resume:
#   --snapshot=examples/fashion_mnist/lenet_iter_5000.solverstate
# BUILD_DIR selects the build tree (default: build).
#
# The log is kept in examples/fashion_mnist/lenet_train.log; from it
# tools/extra/plot_training_log.py draws the training loss and test accuracy
# into examples/fashion_mnist/lenet_curve.png (needs matplotlib: without it
# the plot is skipped with a message; training is not affected).
set -euo pipefail

if [[ ! -f examples/fashion_mnist/lenet_solver.prototxt ]]; then
  echo "$0: run this from the Poseidon repository root" >&2
  exit 1
fi

LOG=examples/fashion_mnist/lenet_train.log
CURVE=examples/fashion_mnist/lenet_curve.png
set +e
"${BUILD_DIR:-build}/tools/poseidon_train" train \
  --solver=examples/fashion_mnist/lenet_solver.prototxt "$@" 2>&1 | tee "$LOG"
status=${PIPESTATUS[0]}
set -e
if [ "$status" -ne 0 ]; then
  exit "$status"
fi

PYTHON=${PYTHON:-python3}
if ! "$PYTHON" -c "import matplotlib" >/dev/null 2>&1; then
  echo "train_lenet: matplotlib is not installed, so no training curve" \
       "(bash scripts/install_python_deps.sh adds it; then run:" \
       "$PYTHON tools/extra/plot_training_log.py 8 $CURVE $LOG)" >&2
elif "$PYTHON" tools/extra/plot_training_log.py 8 "$CURVE" "$LOG"; then
  echo "train_lenet: training curve written to $CURVE"
else
  echo "train_lenet: could not draw the training curve (see above);" \
       "the log is $LOG" >&2
fi
