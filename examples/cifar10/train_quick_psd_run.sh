#!/usr/bin/env bash
# The quick schedule of train_quick.sh, each stage launched by Poseidon's
# cluster launcher scripts/psd_run from a cluster description in the seeds'
# config.json format (worker_nodes, server_nodes, master_node, username,
# pem_file, virtualenv; docs/distributed.md): one rank per entry of
# worker_nodes. The default, examples/cifar10/config.json, runs 2 ranks on
# this machine (localhost twice); for a cluster, list its hosts instead (with
# username and pem_file for ssh), keep the repository, the build and the
# databases at the same path on every host, and give an absolute BUILD_DIR.
#   ./examples/cifar10/train_quick_psd_run.sh [EXTRA_ARGS...]
# As under mpirun (train_quick_mpirun.sh), batch_size is per rank: 2 ranks
# train with an effective batch of 200.
#
# Environment:
#   BUILD_DIR        the build tree (default: build)
#   PSD_CONFIG       the cluster description (default: config.json beside
#                    this script)
#   PSD_OUTPUT       psd_run's output folder (-o); each stage's run leaves
#                    every rank's log in PSD_OUTPUT/poseidon_log_<timestamp>/
#                    (default: examples/cifar10)
#   PSD_MPIRUN_ARGS  extra mpirun options, read by psd_run (as root:
#                    "--allow-run-as-root --oversubscribe")
# EXTRA_ARGS go to poseidon_train in both stages. What psd_run shows (rank
# 0's log) is kept in examples/cifar10/cifar10_quick_psd_run.log; psd_run
# itself appends its own lines to poseidon_run.log in the current folder.
set -euo pipefail
PROG=$(basename "$0")
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
source "$HERE/stages.sh"
TRAIN="${BUILD_DIR:-build}/tools/poseidon_train"
LOG=examples/cifar10/cifar10_quick_psd_run.log
EXTRA=("$@")
PSD_RUN="$HERE/../../scripts/psd_run"
CONFIG=${PSD_CONFIG:-$HERE/config.json}
OUTPUT=${PSD_OUTPUT:-examples/cifar10}
launch() {
  shift
  "$PSD_RUN" -c "$CONFIG" -o "$OUTPUT" "$@"
}

[ -x "$PSD_RUN" ] || die "$PSD_RUN not found"
[ -f "$CONFIG" ] || die "cluster config '$CONFIG' not found (set PSD_CONFIG)"
require_root
run_stages examples/cifar10/cifar10_quick_solver.prototxt \
           examples/cifar10/cifar10_quick_solver_lr1.prototxt
