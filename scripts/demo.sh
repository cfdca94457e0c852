#!/usr/bin/env bash
# The demo: install what is missing, build, convert Fashion-MNIST to LMDB and
# train LeNet on it with poseidon_train (prints test accuracy as it goes),
# then draw the training curve (examples/fashion_mnist/lenet_curve.png).
set -euo pipefail
cd "$(dirname "$0")/.."
export BUILD_DIR=${BUILD_DIR:-build}
bash scripts/install_deps.sh
# matplotlib for the curve; without it (no network, say) the demo still
# trains and says why there is no curve.
bash scripts/install_python_deps.sh ||
  echo "demo: could not install the Python packages; training goes on" >&2
bash scripts/build.sh
bash examples/fashion_mnist/create_fashion_mnist.sh
bash examples/fashion_mnist/train_lenet.sh "$@"
