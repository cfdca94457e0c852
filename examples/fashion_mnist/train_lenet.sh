#!/usr/bin/env bash
# Trains LeNet on Fashion-MNIST. Run from the repository root, once the
# LMDBs data/fashion_mnist/fashion_mnist_{train,test}_lmdb exist (made with
# convert_mnist_data from /usr/share/datasets/fashion-mnist). Extra arguments
# go to poseidon_train, e.g. to resume:
#   --snapshot=examples/fashion_mnist/lenet_iter_5000.solverstate
# BUILD_DIR selects the build tree (default: build).
set -euo pipefail

if [[ ! -f examples/fashion_mnist/lenet_solver.prototxt ]]; then
  echo "$0: run this from the Poseidon repository root" >&2
  exit 1
fi

exec "${BUILD_DIR:-build}/tools/poseidon_train" train \
  --solver=examples/fashion_mnist/lenet_solver.prototxt "$@"
