#!/usr/bin/env bash
# --sigterm_effect (Note [SIGTERM as a solver action] in
# src/poseidon/util/signal_handler.cpp), with poseidon_train training a tiny
# DummyData net:
#   1. Alone, --sigterm_effect=stop: SIGTERM while training leaves one
#      snapshot (.caffemodel and .solverstate) at the iteration it stopped,
#      says so on stderr and in the summary line, and exits 0.
#   2. Resuming from that snapshot starts at its iteration and trains on.
#   3. --sigterm_effect=snapshot: a snapshot, training goes on (a SIGINT then
#      stops it, with a second snapshot at a later iteration).
#   4. The default (none): SIGTERM ends it at once, exit 143, one line, no
#      snapshot. A bad value is refused naming --sigterm_effect.
# With MPIEXEC (an mpirun), 2 ranks with --sigterm_effect=stop:
#   5. SIGTERM to mpirun, which passes it on to the ranks after
#      odls_base_sigkill_timeout seconds and SIGKILLs them as many seconds
#      later (5 here, as docs/slurm.md advises; the default is 1): both
#      ranks stop at the same iteration, rank 0 writes the snapshot. Once
#      sent SIGTERM, mpirun stops reading the ranks' output, so this run
#      logs little (display: 20000): a rank that fills its pipe first
#      blocks in write() until the SIGKILL.
#   6. SIGTERM to rank 1 only: both stop (one rank's request is enough), and
#      the job exits 0 with the training summary.
#   7. A rank fails: the job still ends within seconds (mpirun's SIGKILL
#      follows its SIGTERM), the survivors each saying that SIGTERM came.
# Usage: test_sigterm_stop.sh BUILD_DIR [MPIEXEC]   (from the repository root)
set -uo pipefail
source "$(cd "$(dirname "$0")" && pwd)/test_lib.sh"
BUILD_DIR=$(cd "$1" && pwd)
MPIEXEC=${2:-}
TRAIN="$BUILD_DIR/tools/poseidon_train"
make_workdir poseidon_sigterm
export POSEIDON_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1

write_tiny_net "$WORK/net.prototxt"

# solver FILE PREFIX MAX_ITER [DISPLAY]: the tiny net, no scheduled
# snapshots, a log line every DISPLAY (default 100) iterations.
solver() {
  cat > "$1" <<EOF
net: "$WORK/net.prototxt"
base_lr: 0.01 lr_policy: "fixed" max_iter: $3 display: ${4:-100}
solver_mode: CPU snapshot_prefix: "$2"
EOF
}
solver "$WORK/long.prototxt" "$WORK/a/snap" 100000000
mkdir -p "$WORK/a" "$WORK/b" "$WORK/c" "$WORK/d" "$WORK/m" "$WORK/n" "$WORK/f"

# wait_for FILE PATTERN: until FILE has a line matching PATTERN (30 s).
wait_for() {
  for _ in $(seq 1 300); do
    grep -qE "$2" "$1" 2>/dev/null && return 0
    sleep 0.1
  done
  return 1
}

# snapshots DIR: the iterations of the .caffemodel files in DIR, sorted.
snapshots() {
  ls "$1" 2>/dev/null | sed -n 's/.*_iter_\([0-9]*\)\.caffemodel$/\1/p' |
    sort -n | tr '\n' ' ' | sed 's/ $//'
}

# 1. Alone, stop.
"$TRAIN" train --solver="$WORK/long.prototxt" --sigterm_effect=stop \
  >> "$WORK/a.log" 2>&1 &
pid=$!
wait_for "$WORK/a.log" "Iteration [1-9][0-9]*" ||
  { kill -KILL "$pid"; tail "$WORK/a.log"; fatal "training did not start"; }
kill -TERM "$pid"
wait "$pid"
rc=$?
iter=$(snapshots "$WORK/a")
if [ "$rc" -eq 0 ] && [ -n "$iter" ] && [[ "$iter" != *" "* ]] &&
   [ -f "$WORK/a/snap_iter_$iter.solverstate" ] &&
   grep -q "^poseidon_train: SIGTERM received: stopping at the end of an" \
     "$WORK/a.log" &&
   grep -q "Optimization stopped early" "$WORK/a.log" &&
   grep "Training done: $iter iterations .*, stopped early;" "$WORK/a.log" |
     grep -qF "last snapshot: $WORK/a/snap_iter_$iter.solverstate"; then
  ok "alone, stop: exit 0, snapshot at iteration $iter (.caffemodel and" \
     ".solverstate), stopped early"
else
  grep -v "^I[0-9]" "$WORK/a.log" | tail -20
  fatal "alone, stop: exit $rc, snapshots at iterations '$iter'"
fi

# 2. Resume from it for 5 more iterations.
solver "$WORK/resume.prototxt" "$WORK/b/snap" $((iter + 5))
"$TRAIN" train --solver="$WORK/resume.prototxt" \
  --snapshot="$WORK/a/snap_iter_$iter.solverstate" >> "$WORK/b.log" 2>&1
rc=$?
if [ "$rc" -eq 0 ] && [ "$(snapshots "$WORK/b")" = "$((iter + 5))" ] &&
   grep -q "Training done: 5 iterations" "$WORK/b.log"; then
  ok "resumed from iteration $iter: 5 more iterations, snapshot at" \
     "$((iter + 5))"
else
  grep -v "^I[0-9]" "$WORK/b.log" | tail -20
  fail "resume from iteration $iter: exit $rc, snapshots '$(snapshots "$WORK/b")'"
fi

# 3. snapshot, then SIGINT.
solver "$WORK/snap.prototxt" "$WORK/c/snap" 100000000
"$TRAIN" train --solver="$WORK/snap.prototxt" --sigterm_effect=snapshot \
  >> "$WORK/c.log" 2>&1 &
pid=$!
wait_for "$WORK/c.log" "Iteration [1-9][0-9]*" ||
  { kill -KILL "$pid"; tail "$WORK/c.log"; fatal "training did not start"; }
kill -TERM "$pid"
# The snapshot is complete once its .solverstate (written last) is there.
for _ in $(seq 1 300); do
  ls "$WORK"/c/*.solverstate > /dev/null 2>&1 && break
  sleep 0.1
done
first=$(snapshots "$WORK/c")
sleep 0.5
alive=no
kill -0 "$pid" 2>/dev/null && alive=yes
kill -INT "$pid"
wait "$pid"
rc=$?
all=$(snapshots "$WORK/c")
if [ "$alive" = yes ] && [ "$rc" -eq 0 ] && [ -n "$first" ] &&
   [ "$(echo "$all" | wc -w)" -eq 2 ] && [ "${all%% *}" = "$first" ] &&
   [ "${all##* }" -gt "$first" ] &&
   grep -q "SIGTERM received: snapshotting" "$WORK/c.log"; then
  ok "alone, snapshot: snapshot at $first, trained on, SIGINT stop at" \
     "${all##* }"
else
  grep -v "^I[0-9]" "$WORK/c.log" | tail -20
  fail "alone, snapshot: alive after SIGTERM: $alive, exit $rc," \
       "snapshots '$all'"
fi

# 4. The default, and a bad value.
solver "$WORK/none.prototxt" "$WORK/d/snap" 100000000
"$TRAIN" train --solver="$WORK/none.prototxt" >> "$WORK/d.log" 2>&1 &
pid=$!
wait_for "$WORK/d.log" "Iteration [1-9][0-9]*" ||
  { kill -KILL "$pid"; tail "$WORK/d.log"; fatal "training did not start"; }
kill -TERM "$pid"
wait "$pid"
rc=$?
if [ "$rc" -eq 143 ] && [ -z "$(snapshots "$WORK/d")" ] &&
   [ "$(grep -c '^poseidon_train: stopped by SIGTERM$' "$WORK/d.log")" -eq 1 ] &&
   ! grep -q "SIGTERM received" "$WORK/d.log"; then
  ok "default (none): SIGTERM ends it at once, exit 143, no snapshot"
else
  grep -v "^I[0-9]" "$WORK/d.log" | tail -20
  fail "default: exit $rc, snapshots '$(snapshots "$WORK/d")'"
fi
"$TRAIN" train --solver="$WORK/none.prototxt" --sigterm_effect=halt \
  >> "$WORK/bad.log" 2>&1
rc=$?
if [ "$rc" -eq 1 ] &&
   grep -q "^Error: invalid value 'halt' for --sigterm_effect (expected" \
     "$WORK/bad.log"; then
  ok "--sigterm_effect=halt refused: $(grep -m1 '^Error' "$WORK/bad.log")"
else
  tail -5 "$WORK/bad.log"
  fail "--sigterm_effect=halt: exit $rc"
fi

if [ -z "$MPIEXEC" ]; then
  echo "(no MPIEXEC given: the mpirun cases are skipped)"
  finish
fi
MPIRUN=("$MPIEXEC" --allow-run-as-root --oversubscribe --bind-to none -np 2)
export POSEIDON_LOG_ALL_RANKS=1

# A wrapper that notes each rank's pid in $WORK/pid.<rank>, so that one rank
# can be signalled, and makes rank 1 fail when FAIL_RANK1 is set.
cat > "$WORK/rank.sh" <<SH
#!/bin/sh
rank=\${OMPI_COMM_WORLD_RANK:-0}
echo \$\$ > "$WORK/pid.\$rank.tmp" && mv "$WORK/pid.\$rank.tmp" "$WORK/pid.\$rank"
if [ -n "\${FAIL_RANK1:-}" ] && [ "\$rank" = 1 ]; then
  sleep 2
  exec "$TRAIN" "\$@" --weights="$WORK/missing.caffemodel"
fi
exec "$TRAIN" "\$@"
SH
chmod +x "$WORK/rank.sh"

# stopped_ranks LOG: how many ranks logged "Optimization stopped early."
stopped_ranks() { grep -c "Optimization stopped early" "$1"; }

# 5. SIGTERM to mpirun.
solver "$WORK/m.prototxt" "$WORK/m/snap" 100000000 20000
"${MPIRUN[@]}" --mca odls_base_sigkill_timeout 5 \
  "$WORK/rank.sh" train --solver="$WORK/m.prototxt" \
  --sigterm_effect=stop >> "$WORK/m.log" 2>&1 &
pid=$!
wait_for "$WORK/m.log" "Iteration [1-9][0-9]*" ||
  { kill -KILL "$pid"; tail "$WORK/m.log"; fatal "mpirun job did not start"; }
kill -TERM "$pid"
wait "$pid"
rc=$?
iter=$(snapshots "$WORK/m")
# mpirun signals the ranks one after the other: the second may have
# stopped already (the first's request is enough) when its SIGTERM comes.
# mpirun forwards the ranks' stderr into one file, where their lines can
# interleave mid-line ("poseidon_train: poseidon_train: rank 1 ..."):
# counted as occurrences, not as lines that begin with one.
said=$(grep -o "rank [01] of 2: SIGTERM received: stopping" "$WORK/m.log" |
  wc -l)
if [ -n "$iter" ] && [[ "$iter" != *" "* ]] &&
   [ -f "$WORK/m/snap_iter_$iter.solverstate" ] &&
   [ "$(stopped_ranks "$WORK/m.log")" -eq 2 ] && [ "$said" -ge 1 ]; then
  ok "mpirun -np 2, SIGTERM to mpirun: both ranks stopped, snapshot at" \
     "iteration $iter (mpirun exit $rc)"
else
  grep -v "^I[0-9]" "$WORK/m.log" | tail -30
  fail "mpirun, SIGTERM to mpirun: exit $rc, snapshots '$iter'," \
       "$(stopped_ranks "$WORK/m.log") ranks stopped, $said said SIGTERM"
fi

# 6. SIGTERM to rank 1 only.
rm -f "$WORK"/pid.*
solver "$WORK/n.prototxt" "$WORK/n/snap" 100000000
"${MPIRUN[@]}" "$WORK/rank.sh" train --solver="$WORK/n.prototxt" \
  --sigterm_effect=stop >> "$WORK/n.log" 2>&1 &
pid=$!
if wait_for "$WORK/n.log" "Iteration [1-9][0-9]*" && [ -f "$WORK/pid.1" ]; then
  kill -TERM "$(cat "$WORK/pid.1")"
else
  kill -KILL "$pid"
fi
wait "$pid"
rc=$?
iter=$(snapshots "$WORK/n")
if [ "$rc" -eq 0 ] && [ -n "$iter" ] && [[ "$iter" != *" "* ]] &&
   [ "$(stopped_ranks "$WORK/n.log")" -eq 2 ] &&
   grep -q "rank 1 of 2: SIGTERM received" "$WORK/n.log" &&
   ! grep -q "rank 0 of 2: SIGTERM received" "$WORK/n.log" &&
   grep -q "Training done: $iter iterations .*, stopped early" "$WORK/n.log"
then
  ok "mpirun -np 2, SIGTERM to rank 1 only: both stopped at iteration" \
     "$iter, exit 0"
else
  grep -v "^I[0-9]" "$WORK/n.log" | tail -30
  fail "mpirun, SIGTERM to rank 1: exit $rc, snapshots '$iter'," \
       "$(stopped_ranks "$WORK/n.log") ranks stopped"
fi

# 7. A failing rank with --sigterm_effect=stop: the job still ends promptly.
solver "$WORK/f.prototxt" "$WORK/f/snap" 100000000
start=$(date +%s)
FAIL_RANK1=1 timeout 120 "${MPIRUN[@]}" "$WORK/rank.sh" train \
  --solver="$WORK/f.prototxt" --sigterm_effect=stop >> "$WORK/f.log" 2>&1
rc=$?
took=$(( $(date +%s) - start ))
if [ "$rc" -ne 0 ] && [ "$rc" -ne 124 ] && [ "$took" -le 60 ] &&
   grep -q "Error: rank 1 of 2: .*missing.caffemodel" "$WORK/f.log" &&
   grep -q "rank 0 of 2: SIGTERM received" "$WORK/f.log"; then
  ok "mpirun -np 2, rank 1 fails under --sigterm_effect=stop: the job" \
     "ended in ${took}s (exit $rc), rank 0 said SIGTERM came"
else
  grep -v "^I[0-9]" "$WORK/f.log" | tail -30
  fail "rank failure under --sigterm_effect=stop: exit $rc after ${took}s"
fi

finish
