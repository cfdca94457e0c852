#!/usr/bin/env bash
# The demo: install what building the library and training need, build the
# library and the tools (not the tests: scripts/run_tests.sh builds those),
# convert Fashion-MNIST to LMDB and train LeNet on it with poseidon_train
# (prints test accuracy as it goes), then draw the training curve
# (examples/fashion_mnist/lenet_curve.png). Extra arguments go to
# poseidon_train.
set -euo pipefail
cd "$(dirname "$0")/.."
export BUILD_DIR=${BUILD_DIR:-build}
start=$(date +%s)
bash scripts/install_deps.sh
# matplotlib for the curve; without it (no network, say) the demo still
# trains and says why there is no curve.
bash scripts/install_python_deps.sh --demo ||
  echo "demo: could not install matplotlib; training goes on" >&2
bash scripts/build.sh -DBUILD_TESTS=OFF
built=$(date +%s)
bash examples/fashion_mnist/create_fashion_mnist.sh
bash examples/fashion_mnist/train_lenet.sh "$@"
end=$(date +%s)
echo "demo: $((end - start)) s in all ($((built - start)) s installing and" \
     "building, $((end - built)) s converting and training)"
