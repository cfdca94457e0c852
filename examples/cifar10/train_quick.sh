#!/usr/bin/env bash
# Trains Caffe's CIFAR-10 "quick" net in two stages, as Caffe's
# examples/cifar10/train_quick.sh does: 4000 iterations at lr 0.001
# (cifar10_quick_solver.prototxt), then 1000 at lr 0.0001 resumed from the
# 4000-iteration snapshot (cifar10_quick_solver_lr1.prototxt). Caffe's
# tutorial reports ~75% test accuracy at the end (docs/cifar10.md).
#
# Run from the repository root once examples/cifar10/create_cifar10.sh has
# made the databases:
#   ./examples/cifar10/train_quick.sh [EXTRA_ARGS...]
# EXTRA_ARGS go to poseidon_train in both stages (e.g. --gpu=0 in a CUDA
# build, --threads=2). BUILD_DIR selects the build tree (default: build).
# Snapshots: examples/cifar10/cifar10_quick_iter_{4000,5000}.{caffemodel,
# solverstate}; the output of both stages is kept in
# examples/cifar10/cifar10_quick_train.log.
set -euo pipefail
PROG=$(basename "$0")
source "$(dirname "${BASH_SOURCE[0]}")/stages.sh"
TRAIN="${BUILD_DIR:-build}/tools/poseidon_train"
LOG=examples/cifar10/cifar10_quick_train.log
EXTRA=("$@")
launch() { shift; "$@"; }

require_root
run_stages examples/cifar10/cifar10_quick_solver.prototxt \
           examples/cifar10/cifar10_quick_solver_lr1.prototxt
