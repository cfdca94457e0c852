#!/usr/bin/env bash
# Trains Caffe's CIFAR-10 "full" net in three stages, as Caffe's
# examples/cifar10/train_full.sh does: 60000 iterations at lr 0.001
# (cifar10_full_solver.prototxt), 5000 at 0.0001 resumed from the 60000
# snapshot (cifar10_full_solver_lr1.prototxt), 5000 at 0.00001 resumed from
# the 65000 snapshot (cifar10_full_solver_lr2.prototxt). See
# docs/cifar10.md for the accuracy it is known to reach and for how long it
# takes.
#
# Run from the repository root once examples/cifar10/create_cifar10.sh has
# made the databases:
#   ./examples/cifar10/train_full.sh [EXTRA_ARGS...]
# EXTRA_ARGS go to poseidon_train in every stage (e.g. --gpu=0 in a CUDA
# build). BUILD_DIR selects the build tree (default: build). Snapshots:
# examples/cifar10/cifar10_full_iter_<N>.{caffemodel,solverstate} every
# 10000 iterations in stage 1, then at 65000 and 70000; the output of every
# stage is kept in examples/cifar10/cifar10_full_train.log.
set -euo pipefail
PROG=$(basename "$0")
source "$(dirname "${BASH_SOURCE[0]}")/stages.sh"
TRAIN="${BUILD_DIR:-build}/tools/poseidon_train"
LOG=examples/cifar10/cifar10_full_train.log
EXTRA=("$@")
launch() { shift; "$@"; }

require_root
run_stages examples/cifar10/cifar10_full_solver.prototxt \
           examples/cifar10/cifar10_full_solver_lr1.prototxt \
           examples/cifar10/cifar10_full_solver_lr2.prototxt
