#!/usr/bin/env bash
# The demo: install what is missing, build, convert Fashion-MNIST to LMDB and
# train LeNet on it with poseidon_train (prints test accuracy as it goes).
set -euo pipefail
cd "$(dirname "$0")/.."
export BUILD_DIR=${BUILD_DIR:-build}
bash scripts/install_deps.sh
bash scripts/build.sh
bash examples/fashion_mnist/create_fashion_mnist.sh
bash examples/fashion_mnist/train_lenet.sh "$@"
