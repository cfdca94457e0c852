#!/usr/bin/env bash
# Distributed training end to end under a real mpirun on this machine:
#   1. BSP equivalence on real data: Caffe's LeNet on Fashion-MNIST with
#      2 ranks x batch 32 reaches the same test accuracy (within 0.01) as one
#      process with batch 64 after the same iterations (= the same epochs);
#      only rank 0 writes snapshots; 4 ranks x batch 16 likewise; --timeline writes a valid Chrome trace
#      per rank; the transport plan and traffic are logged; with every
#      layer by PS, the update on the servers gives the snapshot of the
#      update on the workers, byte for byte, and so do dedicated server
#      ranks (--servers).
#   2. 4 ranks on partitions made by scripts/partition_data
#      (--partitioned_data, comm: ALLREDUCE as a ring over MPI messages, not
#      shared memory) train well above chance. (AUTO on one host, as in 1,
#      exchanges every layer through shared memory.)
#   3. A snapshot of the 2-rank run resumes in one process.
#   4. Faults: ranks given different solver files refuse to start naming the
#      rank; a missing partition and a wrong --num_clients are clear errors;
#      a rank killed mid-training ends the job within 10 s, the message names
#      the rank, and the last snapshot is intact.
# Usage: test_train_distributed.sh BUILD_DIR MPIEXEC   (from the repo root)
set -uo pipefail
source "$(cd "$(dirname "$0")" && pwd)/test_lib.sh"
BUILD_DIR=$(cd "$1" && pwd)
MPIEXEC=${2:-mpirun}
TRAIN="$BUILD_DIR/tools/poseidon_train"
ITERS=${ITERS:-600}
make_workdir poseidon_dist
MPI=("$MPIEXEC" --allow-run-as-root --oversubscribe --bind-to none)
export POSEIDON_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1

BUILD_DIR="$BUILD_DIR" bash examples/fashion_mnist/create_fashion_mnist.sh \
  > "$WORK/data.log" 2>&1 ||
  { tail "$WORK/data.log"; fatal "create_fashion_mnist.sh failed"; }

# A solver and net with batch $1 per rank, the given iterations and prefix.
make_solver() {
  local batch=$1 iters=$2 prefix=$3 out=$4
  sed -e "0,/batch_size: 64/s//batch_size: $batch/" \
    examples/fashion_mnist/caffe_lenet_train_test.prototxt > "$out.net"
  sed -e "s|^net: .*|net: \"$out.net\"|" \
      -e "s/^max_iter: .*/max_iter: $iters/" \
      -e "s/^test_interval: .*/test_interval: $iters/" \
      -e "s|^snapshot_prefix: .*|snapshot_prefix: \"$prefix\"|" \
      -e "s/^snapshot: .*/snapshot: $((iters / 2))/" \
      examples/fashion_mnist/caffe_lenet_solver.prototxt > "$out"
  echo "random_seed: 5" >> "$out"
}
# expect_job_error NAME PATTERN COMMAND...: a 2-rank job of COMMAND must fail
# (not time out) with PATTERN in its output.
expect_job_error() {
  local name=$1 pattern=$2 log="$WORK/job_error.log" rc
  shift 2
  timeout 120 "${MPI[@]}" -np 2 "$@" > "$log" 2>&1
  rc=$?
  if [ "$rc" -ne 0 ] && [ "$rc" -ne 124 ] && grep -q "$pattern" "$log"; then
    ok "$name (exit $rc)"
  else
    tail "$log"; fail "$name: exit $rc, /$pattern/ not in the output"
  fi
}
accuracy() { grep "Test net output #0: accuracy" "$1" | tail -1 | sed 's/.*= //'; }
# rank1_of SOLVER: the pid of rank 1 of the job training SOLVER, or "".
rank1_of() {
  local pid
  for pid in $(pgrep -f "solver=$1"); do
    tr '\0' '\n' < "/proc/$pid/environ" 2>/dev/null |
      grep -qx "OMPI_COMM_WORLD_RANK=1" && { echo "$pid"; return; }
  done
}
# wait_for_line LOG PATTERN: up to 30 s for PATTERN in LOG.
wait_for_line() {
  for _ in $(seq 1 300); do
    grep -q "$2" "$1" && return
    sleep 0.1
  done
}

# 1. One process, batch 64, vs two ranks, batch 32 each.
mkdir -p "$WORK/one" "$WORK/two"
make_solver 64 "$ITERS" "$WORK/one/lenet" "$WORK/one.prototxt"
make_solver 32 "$ITERS" "$WORK/two/lenet" "$WORK/two.prototxt"
"$TRAIN" train --solver="$WORK/one.prototxt" > "$WORK/one.log" 2>&1 \
  || { tail "$WORK/one.log"; fail "one process training failed"; }
timeout 600 "${MPI[@]}" -np 2 "$TRAIN" train --solver="$WORK/two.prototxt" \
  --timeline="$WORK/trace.json" > "$WORK/two.log" 2>&1 \
  || { tail -20 "$WORK/two.log"; fail "mpirun -np 2 training failed"; }
a1=$(accuracy "$WORK/one.log")
a2=$(accuracy "$WORK/two.log")
echo "accuracy after $ITERS iterations: one process (batch 64) $a1," \
     "2 ranks (batch 32 each) $a2"
if awk -v a="$a1" -v b="$a2" \
     'BEGIN { d = a - b; exit !(a > 0.75 && d < 0.01 && d > -0.01) }'; then
  ok "2 ranks match one process: $a2 vs $a1"
else
  fail "2 ranks reach $a2, one process $a1"
fi
if [ "$(grep -c 'Test net output #0' "$WORK/two.log")" -ge 1 ] &&
   grep -q "Distributed training: 2 ranks" "$WORK/two.log" &&
   grep -q "per node per iteration" "$WORK/two.log" &&
   grep -q "through shared memory: every rank is on this host" "$WORK/two.log" &&
   grep -q "predicted by the cost model" "$WORK/two.log"; then
  ok "plan, settings and traffic logged"
else
  fail "the distributed log lacks the plan/settings/traffic lines"
fi
n_snap=$(ls "$WORK/two" | grep -c "caffemodel")
[ "$n_snap" -eq 2 ] && ok "rank 0 alone wrote the 2 snapshots" \
  || fail "expected 2 caffemodels, found $n_snap"
if python3 - "$WORK" <<'PY'
import json, sys
for r in (0, 1):
    t = json.load(open("%s/trace.rank%d.json" % (sys.argv[1], r)))
    cats = {e.get("cat") for e in t["traceEvents"]}
    assert {"forward", "backward"} <= cats, cats
    assert any(c and ("push" in c or c in ("SFB", "ALLREDUCE")) for c in cats), cats
PY
then ok "timeline per rank with compute and communication events"
else fail "timeline files missing or incomplete"; fi

# 1b. Four ranks with batch 16 each: the same samples per iteration again.
make_solver 16 "$ITERS" "$WORK/four16/lenet" "$WORK/four16.prototxt"
mkdir -p "$WORK/four16"
timeout 600 "${MPI[@]}" -np 4 "$TRAIN" train --solver="$WORK/four16.prototxt" \
  > "$WORK/four16.log" 2>&1 || { tail -20 "$WORK/four16.log"; fail "np 4 failed"; }
a4=$(accuracy "$WORK/four16.log")
if awk -v a="$a1" -v b="$a4" \
     'BEGIN { d = a - b; exit !(b > 0.75 && d < 0.01 && d > -0.01) }'; then
  ok "4 ranks (batch 16 each) match one process: $a4 vs $a1"
else
  fail "4 ranks reach $a4, one process $a1"
fi

# 1c. Device workers: one process with --threads=2 of batch 32, and 2 ranks
#     with --threads=2 of batch 16: the same samples per iteration again.
mkdir -p "$WORK/thr" "$WORK/thr2"
make_solver 32 "$ITERS" "$WORK/thr/lenet" "$WORK/thr.prototxt"
make_solver 16 "$ITERS" "$WORK/thr2/lenet" "$WORK/thr2.prototxt"
"$TRAIN" train --solver="$WORK/thr.prototxt" --threads=2 > "$WORK/thr.log" 2>&1 \
  || { tail "$WORK/thr.log"; fail "--threads=2 failed"; }
timeout 600 "${MPI[@]}" -np 2 "$TRAIN" train --solver="$WORK/thr2.prototxt" \
  --threads=2 > "$WORK/thr2.log" 2>&1 || { tail "$WORK/thr2.log"; fail "np 2 --threads=2 failed"; }
at=$(accuracy "$WORK/thr.log")
at2=$(accuracy "$WORK/thr2.log")
if awk -v a="$a1" -v b="$at" -v c="$at2" 'BEGIN { d = a - b; e = a - c;
     exit !(b > 0.75 && d < 0.01 && d > -0.01 && e < 0.01 && e > -0.01) }' &&
   grep -q "Device workers: 2" "$WORK/thr.log"; then
  ok "device workers match one process: --threads=2 $at, 2 ranks x 2 threads $at2 vs $a1"
else
  fail "device workers: --threads=2 $at, 2 ranks x 2 threads $at2, one process $a1"
fi

# 1d. The parameter server's shards apply the update (server_update, the
#     default): 2 ranks with every layer by PS over MPI messages end with
#     the snapshot, weights and solver history, of the same run with the
#     update on the workers, byte for byte.
for su in true false; do
  mkdir -p "$WORK/su_$su"
  make_solver 32 40 lenet "$WORK/su_$su/solver.prototxt"
  # Run from the run's folder (the .solverstate names its weights by the
  # relative prefix), with the data by absolute path.
  sed -i "s|\"data/fashion_mnist/|\"$PWD/data/fashion_mnist/|" \
    "$WORK/su_$su/solver.prototxt.net"
  (cd "$WORK/su_$su" && timeout 300 "${MPI[@]}" -np 2 "$TRAIN" train \
     --solver=solver.prototxt --comm=PS --shared_memory=false \
     --server_update=$su > train.log 2>&1) ||
    { tail -20 "$WORK/su_$su/train.log"; fail "server_update=$su training failed"; }
done
if grep -q "(updated on the servers)" "$WORK/su_true/train.log" &&
   ! grep -q "(updated on the servers)" "$WORK/su_false/train.log" &&
   cmp "$WORK/su_true/lenet_iter_40.caffemodel" \
       "$WORK/su_false/lenet_iter_40.caffemodel" &&
   cmp "$WORK/su_true/lenet_iter_40.solverstate" \
       "$WORK/su_false/lenet_iter_40.solverstate"; then
  ok "update on the servers: snapshot identical to the workers' update"
else
  fail "update on the servers: the snapshots differ or the plan does not say"
fi

# 1d'. With clip_gradients the shards agree on the norm of the whole
#      gradient and still update (Note [Clipping on the servers]),
#      colocated (2 ranks) and on a dedicated server (3 ranks,
#      --servers=1): each run matches the workers clipping within rounding.
for run in true false dedicated; do
  mkdir -p "$WORK/clip_$run"
  make_solver 32 40 lenet "$WORK/clip_$run/solver.prototxt"
  echo "clip_gradients: 0.5" >> "$WORK/clip_$run/solver.prototxt"
  sed -i "s|\"data/fashion_mnist/|\"$PWD/data/fashion_mnist/|" \
    "$WORK/clip_$run/solver.prototxt.net"
  case $run in
    dedicated) args=(-np 3 "$TRAIN" train --servers=1) ;;
    *) args=(-np 2 "$TRAIN" train --server_update=$run) ;;
  esac
  (cd "$WORK/clip_$run" && timeout 300 "${MPI[@]}" "${args[@]}" \
     --solver=solver.prototxt --comm=PS --shared_memory=false \
     > train.log 2>&1) ||
    { tail -20 "$WORK/clip_$run/train.log"; fail "clip_gradients ($run) training failed"; }
done
ct=$(accuracy "$WORK/clip_true/train.log")
cf=$(accuracy "$WORK/clip_false/train.log")
cd_=$(accuracy "$WORK/clip_dedicated/train.log")
if grep -q "(updated on the servers)" "$WORK/clip_true/train.log" &&
   grep -q "(updated on the servers)" "$WORK/clip_dedicated/train.log" &&
   grep -q "Gradient clipping: scaling down" "$WORK/clip_true/train.log" &&
   grep -q "Gradient clipping: scaling down" "$WORK/clip_false/train.log" &&
   awk -v a="$ct" -v b="$cf" -v c="$cd_" 'BEGIN { d = a - b; e = c - b;
     exit !(a > 0.5 && d <= 0.002 && d >= -0.002 && e <= 0.002 && e >= -0.002) }'; then
  ok "clip_gradients on the servers: accuracy $ct, on a dedicated server $cd_, the workers clipping $cf"
else
  fail "clip_gradients on the servers: accuracy $ct and $cd_ (dedicated) against $cf, or the log lacks the plan or the clipping"
fi

# 1e. Dedicated parameter servers (--servers=1: the last of 3 ranks serves,
#     ranks 0 and 1 train) end with the snapshot of the colocated run of
#     1d, byte for byte; the log names the server rank. --servers that
#     leaves no worker is refused.
mkdir -p "$WORK/dedicated"
make_solver 32 40 lenet "$WORK/dedicated/solver.prototxt"
sed -i "s|\"data/fashion_mnist/|\"$PWD/data/fashion_mnist/|" \
  "$WORK/dedicated/solver.prototxt.net"
(cd "$WORK/dedicated" && timeout 300 "${MPI[@]}" -np 3 "$TRAIN" train \
   --solver=solver.prototxt --comm=PS --shared_memory=false --servers=1 \
   > train.log 2>&1) ||
  { tail -20 "$WORK/dedicated/train.log"; fail "dedicated servers: training failed"; }
if grep -q "Ranks 2 to 2 of 3 are dedicated parameter servers" \
     "$WORK/dedicated/train.log" &&
   cmp "$WORK/dedicated/lenet_iter_40.caffemodel" \
       "$WORK/su_true/lenet_iter_40.caffemodel" &&
   cmp "$WORK/dedicated/lenet_iter_40.solverstate" \
       "$WORK/su_true/lenet_iter_40.solverstate"; then
  ok "dedicated servers: snapshot identical to the colocated shards'"
else
  fail "dedicated servers: the snapshots differ or the log does not say"
fi
expect_job_error "--servers leaving no worker is refused" "leave no worker" \
  "$TRAIN" train --solver="$WORK/dedicated/solver.prototxt" --servers=2

# 1f. Stale-synchronous and asynchronous serving (--consistency): 2
#     workers train LeNet 40 iterations over MPI with a snapshot at 20 (a
#     barrier in the middle of the Step) and end with the snapshot at 40;
#     the plan says so. Each with colocated shards (2 ranks) and with a
#     dedicated server (3 ranks, --servers=1).
for cons in "SSP 2 0" "ASYNC 0 0" "SSP 2 1" "ASYNC 0 1"; do
  set -- $cons
  dir="$WORK/cons_$1_$3"
  mkdir -p "$dir"
  make_solver 32 40 lenet "$dir/solver.prototxt"
  sed -i "s|\"data/fashion_mnist/|\"$PWD/data/fashion_mnist/|" \
    "$dir/solver.prototxt.net"
  (cd "$dir" && timeout 300 "${MPI[@]}" -np $((2 + $3)) "$TRAIN" train \
     --solver=solver.prototxt --consistency=$1 --staleness=$2 --servers=$3 \
     > train.log 2>&1) ||
    { tail -20 "$dir/train.log"; fail "consistency $1, $3 servers: training failed"; }
  want="consistency $1"; [ "$1" = SSP ] && want="consistency SSP($2)"
  if grep -q "$want" "$dir/train.log" &&
     grep -q "(updated on the servers)" "$dir/train.log" &&
     { [ "$3" = 0 ] ||
       grep -q "Ranks 2 to 2 of 3 are dedicated parameter servers" \
         "$dir/train.log"; } &&
     [ -f "$dir/lenet_iter_20.caffemodel" ] &&
     [ -f "$dir/lenet_iter_40.solverstate" ]; then
    ok "consistency $1, $3 dedicated servers: trained with snapshots at 20 and 40"
  else
    fail "consistency $1, $3 dedicated servers: the log or the snapshots are missing"
  fi
done

# 2. Four ranks on partitioned data, every layer over the ring allreduce.
for db in train test; do
  cp -r "data/fashion_mnist/fashion_mnist_${db}_lmdb" "$WORK/$db"
  POSEIDON_BUILD_DIR="$BUILD_DIR" bash scripts/partition_data --parts=4 \
    "$WORK/$db" > "$WORK/partition.log" 2>&1 || tail "$WORK/partition.log"
done
sed -e "s|data/fashion_mnist/fashion_mnist_train_lmdb|$WORK/train|" \
    -e "s|data/fashion_mnist/fashion_mnist_test_lmdb|$WORK/test|" \
    "$WORK/two.prototxt.net" > "$WORK/four.prototxt.net"
sed -e "s|^net: .*|net: \"$WORK/four.prototxt.net\"|" \
    -e "s/^max_iter: .*/max_iter: 200/" -e "s/^test_interval: .*/test_interval: 200/" \
    -e "s/^snapshot: .*/snapshot: 0/" -e "s/^test_iter: .*/test_iter: 20/" \
    "$WORK/two.prototxt" > "$WORK/four.prototxt"
if ls -d "$WORK"/train_3 > /dev/null 2>&1; then
  timeout 600 "${MPI[@]}" -np 4 "$TRAIN" train --solver="$WORK/four.prototxt" \
    --partitioned_data --comm=ALLREDUCE --shared_memory=false \
    > "$WORK/four.log" 2>&1
  a4=$(accuracy "$WORK/four.log")
  if [ -n "$a4" ] && awk -v a="$a4" 'BEGIN { exit !(a > 0.6) }' &&
     ! grep -q "shared memory" "$WORK/four.log"; then
    ok "4 ranks on partitions, ring allreduce over MPI: accuracy $a4 after 200 iterations"
  else
    tail -20 "$WORK/four.log"; fail "4 ranks on partitions: accuracy '$a4'"
  fi
else
  fail "scripts/partition_data made no partitions (see its usage)"
fi

# 3. The 2-rank snapshot resumes in one process.
sed -e "s/^max_iter: .*/max_iter: $((ITERS + 20))/" "$WORK/two.prototxt" \
  > "$WORK/resume.prototxt"
if "$TRAIN" train --solver="$WORK/resume.prototxt" \
     --snapshot="$WORK/two/lenet_iter_$ITERS.solverstate" \
     --timeline="$WORK/alone.json" \
     > "$WORK/resume.log" 2>&1 && grep -q "Optimization Done" "$WORK/resume.log" &&
   python3 -c "import json,sys; t=json.load(open(sys.argv[1]));
assert {'forward','backward'} <= {e.get('cat') for e in t['traceEvents']}" \
     "$WORK/alone.json"
then ok "a 2-rank snapshot resumes with 1 rank (with a one-process timeline)"
else tail "$WORK/resume.log"; fail "resume of the 2-rank snapshot failed"; fi

# 4a. Different solver files on different ranks.
sed -e "s/^momentum: .*/momentum: 0.8/" "$WORK/two.prototxt" > "$WORK/other.prototxt"
cat > "$WORK/pick.sh" <<SH
#!/bin/sh
if [ "\$OMPI_COMM_WORLD_RANK" = 1 ]; then s=$WORK/other.prototxt; else s=$WORK/two.prototxt; fi
exec "$TRAIN" train --solver=\$s
SH
chmod +x "$WORK/pick.sh"
expect_job_error "mismatched solver files refused" \
  "rank 1 was started with different solver settings" "$WORK/pick.sh"

# 4b. A missing partition; a wrong rank count.
expect_job_error "missing partition named" \
  "needs partition '.*fashion_mnist_train_lmdb_[01]'" \
  "$TRAIN" train --solver="$WORK/two.prototxt" --partitioned_data
expect_job_error "wrong rank count named" \
  "num_clients=3 but mpirun started 2 ranks" \
  "$TRAIN" train --solver="$WORK/two.prototxt" --num_clients=3

# 4c. Kill rank 1 after the first snapshot; the job must end within 10 s.
mkdir -p "$WORK/kill"
make_solver 32 100000 "$WORK/kill/lenet" "$WORK/kill.prototxt"
sed -i -e "s/^snapshot: .*/snapshot: 20/" -e "s/^test_interval: .*/test_interval: 100000/" \
  "$WORK/kill.prototxt"
"${MPI[@]}" -np 2 "$TRAIN" train --solver="$WORK/kill.prototxt" \
  > "$WORK/kill.log" 2>&1 &
job=$!
for _ in $(seq 1 600); do
  ls "$WORK/kill"/*_iter_40.solverstate > /dev/null 2>&1 && break
  sleep 0.1
done
victim=$(rank1_of "$WORK/kill.prototxt")
if [ -z "$victim" ]; then
  fail "could not find rank 1 to kill"; kill "$job" 2> /dev/null
else
  start=$(date +%s.%N)
  kill -9 "$victim"
  for _ in $(seq 1 150); do kill -0 "$job" 2> /dev/null || break; sleep 0.1; done
  if kill -0 "$job" 2> /dev/null; then
    fail "the job still runs 15 s after rank 1 was killed"; kill -9 "$job"
  else
    wait "$job"; rc=$?
    took=$(awk -v a="$(date +%s.%N)" -v b="$start" 'BEGIN { printf "%.1f", a - b }')
    last=$(ls -t "$WORK/kill"/*.caffemodel | head -1)
    if awk -v t="$took" 'BEGIN { exit !(t < 10) }' && [ "$rc" -ne 0 ] &&
       grep -Eq "rank 1|process rank 1" "$WORK/kill.log" &&
       "$TRAIN" test --model="$WORK/kill.prototxt.net" --weights="$last" \
         --iterations=1 > "$WORK/kill_test.log" 2>&1; then
      ok "killed rank 1: job ended in ${took}s (exit $rc), $(basename "$last") intact"
    else
      tail "$WORK/kill.log"; fail "killed rank: took ${took}s, exit $rc"
    fi
  fi
fi

# 4d. A diverging loss ends the job with the NaN named; a rank that stops
#     answering (SIGSTOP) is named by its peers after --comm_timeout.
sed -e "s/^base_lr: .*/base_lr: 1e9/" "$WORK/two.prototxt" > "$WORK/nan.prototxt"
expect_job_error "diverging loss ends the job" "the loss is \(nan\|inf\|-nan\)" \
  "$TRAIN" train --solver="$WORK/nan.prototxt"
mkdir -p "$WORK/stall"
make_solver 32 100000 "$WORK/stall/lenet" "$WORK/stall.prototxt"
sed -i -e "s/^snapshot: .*/snapshot: 0/" -e "s/^test_interval: .*/test_interval: 100000/" \
  "$WORK/stall.prototxt"
"${MPI[@]}" -np 2 "$TRAIN" train --solver="$WORK/stall.prototxt" \
  --comm_timeout=3 > "$WORK/stall.log" 2>&1 &
job=$!
wait_for_line "$WORK/stall.log" "Iteration 20 "
stopped=$(rank1_of "$WORK/stall.prototxt")
if [ -n "$stopped" ]; then
  kill -STOP "$stopped"
  for _ in $(seq 1 200); do kill -0 "$job" 2> /dev/null || break; sleep 0.1; done
  if kill -0 "$job" 2> /dev/null; then
    kill -CONT "$stopped"; kill -9 "$job" "$stopped" 2> /dev/null
    fail "a stopped rank hung the job for 20 s"
  else
    wait "$job"; rc=$?
    if [ "$rc" -ne 0 ] && grep -q "rank 1" "$WORK/stall.log" &&
       grep -qi "timed out\|timeout\|gave up" "$WORK/stall.log"; then
      ok "a stopped rank is named after --comm_timeout (exit $rc)"
    else
      tail "$WORK/stall.log"; fail "stalled rank: exit $rc"
    fi
  fi
else
  kill "$job"; fail "could not find rank 1 for the stall test"
fi

# 5. Signals reaching one rank act on all: SIGHUP to rank 1 snapshots on
#    both (rank 0 writes), SIGINT to rank 1 stops both cleanly. Under BSP,
#    and under ASYNC, where the ranks agree on when to act instead of
#    acting a fixed number of iterations later.
signal_test() {  # name, extra flags...
  local name=$1 dir="$WORK/sig_$1" job rank1 rc
  shift
  mkdir -p "$dir"
  make_solver 32 100000 "$dir/lenet" "$dir/solver.prototxt"
  sed -i -e "s/^snapshot: .*/snapshot: 0/" -e "s/^test_interval: .*/test_interval: 100000/" \
    -e "s/^display: .*/display: 10/" "$dir/solver.prototxt"
  "${MPI[@]}" -np 2 "$TRAIN" train --solver="$dir/solver.prototxt" "$@" \
    > "$dir/train.log" 2>&1 &
  job=$!
  wait_for_line "$dir/train.log" "Iteration 20 "
  rank1=$(rank1_of "$dir/solver.prototxt")
  if [ -z "$rank1" ]; then
    kill "$job"; fail "$name: could not find rank 1 for the signal test"
    return
  fi
  kill -HUP "$rank1"
  for _ in $(seq 1 100); do
    ls "$dir"/*.caffemodel > /dev/null 2>&1 && break; sleep 0.1
  done
  kill -INT "$rank1"
  for _ in $(seq 1 150); do kill -0 "$job" 2> /dev/null || break; sleep 0.1; done
  if kill -0 "$job" 2> /dev/null; then
    kill -9 "$job"; fail "$name: SIGINT to rank 1 did not stop the job"
    return
  fi
  wait "$job"; rc=$?
  if [ "$rc" -eq 0 ] && ls "$dir"/*.caffemodel > /dev/null 2>&1 &&
     grep -q "Optimization stopped early" "$dir/train.log"; then
    ok "$name: SIGHUP to rank 1 snapshotted, SIGINT to rank 1 stopped every rank"
  else
    tail "$dir/train.log"; fail "$name signals: exit $rc, snapshots: $(ls "$dir")"
  fi
}
signal_test BSP
signal_test ASYNC --consistency=ASYNC

finish
