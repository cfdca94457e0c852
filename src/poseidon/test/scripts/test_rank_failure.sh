#!/usr/bin/env bash
# When one rank fails, mpirun ends the others with SIGTERM: each of them
# prints one line saying so, not glog's signal stack trace
# (InstallTerminationMessage, util/signal_handler.hpp).
#   1. 3 ranks; rank 1 fails after start-up (--weights names a missing
#      file): the job exits non-zero, rank 1's error is printed, and ranks 0
#      and 2 print exactly one "stopped by SIGTERM" line each.
#   2. poseidon_train alone, sent SIGTERM while training: exit status 143
#      and one line.
# Usage: test_rank_failure.sh BUILD_DIR MPIEXEC   (from the repo root)
set -uo pipefail
source "$(cd "$(dirname "$0")" && pwd)/test_lib.sh"
BUILD_DIR=$(cd "$1" && pwd)
MPIEXEC=${2:-mpirun}
TRAIN="$BUILD_DIR/tools/poseidon_train"
make_workdir poseidon_rankfail
export POSEIDON_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1

write_tiny_net "$WORK/net.prototxt"
cat > "$WORK/solver.prototxt" <<EOF
net: "$WORK/net.prototxt"
base_lr: 0.01 lr_policy: "fixed" max_iter: 100000000 display: 0
solver_mode: CPU snapshot_prefix: "$WORK/snap"
EOF

# Stack traces glog's failure handler would print for a signal.
trace_lines() {
  grep -cE '\*\*\* (SIGTERM|Aborted|SIGSEGV)|^ *@ +0x|stack trace' "$1"
}

# 1. Rank 1 fails once the others are training.
cat > "$WORK/pick.sh" <<SH
#!/bin/sh
if [ "\$OMPI_COMM_WORLD_RANK" = 1 ]; then
  sleep 1
  exec "$TRAIN" train --solver="$WORK/solver.prototxt" \
    --weights="$WORK/missing.caffemodel"
fi
exec "$TRAIN" train --solver="$WORK/solver.prototxt"
SH
chmod +x "$WORK/pick.sh"
timeout 120 "$MPIEXEC" --allow-run-as-root --oversubscribe --bind-to none \
  -np 3 "$WORK/pick.sh" > "$WORK/job.log" 2>&1
rc=$?
# Counted as occurrences: mpirun forwards the ranks' stderr into one file,
# where two ranks' lines can interleave mid-line.
lines0=$(grep -o "rank 0 of 3: stopped by SIGTERM" "$WORK/job.log" | wc -l)
lines2=$(grep -o "rank 2 of 3: stopped by SIGTERM" "$WORK/job.log" | wc -l)
traces=$(trace_lines "$WORK/job.log")
if [ "$rc" -ne 0 ] && [ "$rc" -ne 124 ] &&
   grep -q "Error: rank 1 of 3: .*missing.caffemodel" "$WORK/job.log" &&
   [ "$lines0" -eq 1 ] && [ "$lines2" -eq 1 ] && [ "$traces" -eq 0 ]; then
  ok "rank 1 failed: its error printed, ranks 0 and 2 one line each (exit $rc)"
  # What the two were waiting for, if anything (Note [Wait notes]).
  grep "rank [02] of 3: stopped by SIGTERM" "$WORK/job.log" |
    sed 's/.*(a failing rank prints its error above)/     /'
else
  cat "$WORK/job.log" | grep -v "^I[0-9]" | tail -40
  fail "rank failure: exit $rc, rank 0 lines $lines0, rank 2 lines $lines2," \
       "stack trace lines $traces"
fi

# 2. SIGTERM to a lone poseidon_train.
"$TRAIN" train --solver="$WORK/solver.prototxt" > "$WORK/alone.log" 2>&1 &
pid=$!
for _ in $(seq 1 300); do
  grep -q "Solving tiny" "$WORK/alone.log" && break
  sleep 0.1
done
sleep 0.5
kill -TERM "$pid"
wait "$pid"
rc=$?
if [ "$rc" -eq 143 ] &&
   [ "$(grep -c '^poseidon_train: stopped by SIGTERM$' "$WORK/alone.log")" -eq 1 ] &&
   [ "$(trace_lines "$WORK/alone.log")" -eq 0 ]; then
  ok "a lone poseidon_train ends on SIGTERM with one line (exit 143)"
else
  tail -20 "$WORK/alone.log"
  fail "lone poseidon_train on SIGTERM: exit $rc"
fi

finish
