#!/usr/bin/env bash
# The quick schedule of train_quick.sh (4000 iterations at lr 0.001, then
# 1000 at 0.0001 resumed from the snapshot), each stage run as one
# distributed job of NP ranks (default 2) through mpirun, on this machine:
#   ./examples/cifar10/train_quick_mpirun.sh [EXTRA_ARGS...]
# On several machines, name them (one rank per host here):
#   MPIRUN_ARGS="-H host1,host2" ./examples/cifar10/train_quick_mpirun.sh
# Every host needs the build and the databases at the same paths (a shared
# file system, or copies; mpirun starts the remote ranks in this folder's
# path), so give an absolute BUILD_DIR.
#
# What the ranks do (docs/distributed.md): each loads the same net and
# solver, and rank r of W reads the training records i with i mod W = r of
# the one database. batch_size: 100 is per rank, so one iteration of NP
# ranks consumes NP x 100 images and the gradients are averaged over all of
# them: 2 ranks take an effective batch of 200, and the 5000 iterations
# cover twice the epochs of the one-process run. For the one-process
# trajectory on 2 ranks, use a copy of the net with batch_size: 50. The test
# iterations are spread over the ranks and their scores combined, so the
# reported accuracy still covers the 10000 test images once. Rank 0 prints
# the log and writes the snapshots, which resume with any number of ranks.
#
# Environment:
#   BUILD_DIR    the build tree (default: build)
#   NP           number of ranks (default: 2)
#   MPIRUN       the launcher (default: mpirun)
#   MPIRUN_ARGS  extra launcher options, split on spaces: -H host1,host2;
#                --allow-run-as-root --oversubscribe as root or with more
#                ranks than cores (the tests); --bind-to none
# EXTRA_ARGS go to poseidon_train in both stages. The output of both stages
# is kept in examples/cifar10/cifar10_quick_mpirun.log.
set -euo pipefail
PROG=$(basename "$0")
source "$(dirname "${BASH_SOURCE[0]}")/stages.sh"
TRAIN="${BUILD_DIR:-build}/tools/poseidon_train"
LOG=examples/cifar10/cifar10_quick_mpirun.log
EXTRA=("$@")
NP=${NP:-2}
MPIRUN=${MPIRUN:-mpirun}
read -r -a MPI_EXTRA <<< "${MPIRUN_ARGS:-}"
launch() {
  shift
  "$MPIRUN" -np "$NP" ${MPI_EXTRA[@]+"${MPI_EXTRA[@]}"} "$@"
}

[[ "$NP" =~ ^[1-9][0-9]*$ ]] || die "NP='$NP' is not a number of ranks"
command -v "$MPIRUN" > /dev/null ||
  die "$MPIRUN not found; install Open MPI (Debian: openmpi-bin," \
      "or bash scripts/install_deps.sh) or set MPIRUN"
require_root
run_stages examples/cifar10/cifar10_quick_solver.prototxt \
           examples/cifar10/cifar10_quick_solver_lr1.prototxt
