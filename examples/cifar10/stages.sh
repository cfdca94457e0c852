# shellcheck shell=bash
# Sourced by the train_*.sh scripts of this folder: runs a training schedule
# of solver stages, each stage after the first resuming (--snapshot) from the
# .solverstate the stage before wrote at its max_iter, as Caffe's
# train_quick.sh and train_full.sh do. Not a script of its own.
#
# The sourcing script sets, before calling run_stages:
#   PROG    its name, for messages
#   TRAIN   the poseidon_train binary
#   LOG     the file that gets the whole output (also shown on the terminal)
#   EXTRA   an array of extra poseidon_train arguments, given to every stage
# and defines launch NAME COMMAND...: runs COMMAND (poseidon_train and its
# arguments) for the stage NAME (the solver's file name without
# .prototxt), directly or under mpirun / psd_run.

die() { echo "$PROG: error: $*" >&2; exit 1; }

# Must be run from the repository root: the solvers and nets name their
# files relative to it (examples/cifar10/...), as in Caffe.
require_root() {
  [ -f examples/cifar10/cifar10_quick_train_test.prototxt ] ||
    die "run this from the Poseidon repository root" \
        "(e.g. ./examples/cifar10/$PROG); the solvers name their files" \
        "relative to it"
  [ -x "$TRAIN" ] ||
    die "$TRAIN not found; build Poseidon first or set BUILD_DIR"
}

# solver_field SOLVER FIELD: the value of a top-level "FIELD: value" line of
# a solver prototxt, quotes and comments removed (empty when absent).
solver_field() {
  sed -n "s/^[[:space:]]*$2:[[:space:]]*\\([^#]*\\).*/\\1/p" "$1" | tail -1 |
    sed -e 's/[[:space:]]*$//' -e 's/^"\(.*\)"$/\1/'
}

# final_state SOLVER: the solver state file a run of SOLVER leaves at its
# max_iter (<snapshot_prefix>_iter_<max_iter>.solverstate[.h5]).
final_state() {
  local prefix iter suffix=.solverstate
  prefix=$(solver_field "$1" snapshot_prefix)
  iter=$(solver_field "$1" max_iter)
  [ -n "$prefix" ] && [ -n "$iter" ] ||
    die "'$1' lacks snapshot_prefix or max_iter, so the next stage cannot" \
        "find its snapshot"
  [ "$(solver_field "$1" snapshot_format)" = HDF5 ] && suffix=.solverstate.h5
  echo "${prefix}_iter_${iter}${suffix}"
}

# run_stages SOLVER...: trains with each solver in turn.
run_stages() {
  local solver state="" name status
  for solver in "$@"; do
    [ -f "$solver" ] || die "solver '$solver' not found"
  done
  : > "$LOG" || die "cannot write the log '$LOG'"
  for solver in "$@"; do
    name=$(basename "$solver" .prototxt)
    local args=(train --solver="$solver")
    if [ -n "$state" ]; then
      [ -f "$state" ] ||
        die "the previous stage did not leave $state to resume from"
      args+=(--snapshot="$state")
    fi
    echo "$PROG: stage $name${state:+, resuming from $state}" | tee -a "$LOG"
    set +e
    launch "$name" "$TRAIN" "${args[@]}" ${EXTRA[@]+"${EXTRA[@]}"} 2>&1 |
      tee -a "$LOG"
    status=${PIPESTATUS[0]}
    set -e
    [ "$status" -eq 0 ] ||
      die "stage $name failed (exit status $status); the log is $LOG"
    state=$(final_state "$solver")
  done
  local weights=${state%.solverstate*}.caffemodel
  [ "${state%.h5}" = "$state" ] || weights+=.h5
  echo "$PROG: done; final weights $weights, log $LOG" | tee -a "$LOG"
}
