#!/usr/bin/env bash
# The solver's start-up checks through poseidon_train (issue 35;
# docs/reliability.md, "Start-up checks and Octave"; Note [Start-up checks]
# in solver.cpp). A snapshot folder that is missing, is a file, or is
# read-only ends the run with status 1 and an "Error: snapshot folder
# '<folder>' ..." line naming snapshot_prefix, before "Iteration 1" is
# logged, also with snapshot: 0 (where only snapshot_after_train writes);
# a valid run removes the temporary file a killed run left and keeps a live
# process's.
# Usage: test_startup_checks.sh BUILD_DIR
set -uo pipefail
source "$(cd "$(dirname "$0")" && pwd)/test_lib.sh"
BUILD_DIR=$(cd "$1" && pwd)
TRAIN="$BUILD_DIR/tools/poseidon_train"
enter_workdir poseidon_startup_checks
export POSEIDON_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1
write_tiny_net net.prototxt

# solver_for PREFIX SNAPSHOT: solver.prototxt training the tiny net for 30
# iterations, logging each, snapshots every SNAPSHOT to PREFIX.
solver_for() {
  cat > solver.prototxt <<EOF
net: "$WORK/net.prototxt"
base_lr: 0.01 lr_policy: "fixed" max_iter: 30 display: 1
snapshot: $2 snapshot_prefix: "$1" solver_mode: CPU random_seed: 1
EOF
}

# refused NAME FOLDER [RUNNER...]: poseidon_train (run through RUNNER, e.g.
# setpriv) exits 1 with the error naming FOLDER, before iteration 1, for
# snapshot: 0 and snapshot: 20.
refused() {
  local name=$1 folder=$2
  shift 2
  for snapshot in 0 20; do
    solver_for "$folder/snap" "$snapshot"
    expect_status "$name, snapshot: $snapshot" 1 \
      "^Error: snapshot folder '$folder' .*snapshot_prefix" \
      "$@" "$TRAIN" train --solver=solver.prototxt
    if grep -q "Iteration 1 " err.txt; then
      fail "$name, snapshot: $snapshot: trained before the error:"
      grep -m1 "Iteration 1 " err.txt
    fi
  done
}

refused "missing folder" "$WORK/missing"
echo x > file
refused "folder that is a file" "$WORK/file"

mkdir ro
chmod 0555 ro
if [ "$(id -u)" -ne 0 ]; then
  refused "read-only folder" "$WORK/ro"
elif command -v setpriv > /dev/null; then
  # Root writes into a 0555 folder (as would its snapshots): run as nobody.
  chmod 0755 "$WORK"
  chmod 0644 net.prototxt
  refused "read-only folder (as nobody)" "$WORK/ro" \
    setpriv --reuid=65534 --regid=65534 --clear-groups
else
  echo "skip read-only folder: root, and no setpriv to run as nobody"
fi
chmod 0755 ro

# Temporary files: one of a process that is gone, one of a live one (this
# shell), one of another prefix.
mkdir snaps
sh -c 'exit 0' &
dead=$!
wait "$dead"
touch "snaps/snap_iter_10.caffemodel.tmp.$dead" \
  "snaps/snap_iter_10.solverstate.tmp.$$" \
  "snaps/other_iter_10.caffemodel.tmp.$dead"
solver_for "$WORK/snaps/snap" 0
check "valid run with stale temporary files" \
  "$TRAIN" train --solver=solver.prototxt
expect_in "the removal is logged" \
  "Removed $WORK/snaps/snap_iter_10.caffemodel.tmp.$dead" err.txt
if [ -e "snaps/snap_iter_10.caffemodel.tmp.$dead" ]; then
  fail "the temporary file of dead pid $dead stayed"
else ok "the temporary file of dead pid $dead is removed"; fi
if [ -e "snaps/snap_iter_10.solverstate.tmp.$$" ] &&
  [ -e "snaps/other_iter_10.caffemodel.tmp.$dead" ]; then
  ok "a live process's and another prefix's temporary files stay"
else fail "a live process's or another prefix's temporary file was removed"; fi
if [ -f snaps/snap_iter_30.caffemodel ] && [ -f snaps/snap_iter_30.solverstate ]
then ok "the run's snapshot is written"
else fail "no snaps/snap_iter_30.{caffemodel,solverstate}"; ls snaps; fi

finish
