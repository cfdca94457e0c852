#!/usr/bin/env bash
# The Slurm path of docs/slurm.md on a one-node Slurm cluster started here:
# munged, slurmctld and slurmd (Debian's packages: bash
# scripts/install_deps.sh --tests), all run as root from a private temporary
# directory with their own configuration, key, ports, state and logs, and
# stopped on exit, whatever happened.
#   1. examples/slurm/train.sbatch, 2 tasks (mpirun inside the allocation):
#      both ranks start, the training summary line, a final snapshot.
#   2. The same script under a real one-minute time limit (--time=1):
#      Slurm's SIGTERM makes both ranks stop at the same iteration
#      (--sigterm_effect=stop) and rank 0 snapshot before KillWait's SIGKILL;
#      the job ends TIMEOUT.
#   3. The same script again: it resumes from that snapshot and trains on.
#   4. An early SIGTERM to the batch shell alone (what `#SBATCH
#      --signal=B:TERM@N` sends, here by `scancel --batch --signal=TERM`):
#      train.sbatch passes it on to the ranks, which stop and snapshot.
#   5. examples/slurm/train_srun.sbatch: srun --mpi=pmix starts the 2 ranks
#      itself, no mpirun; SIGTERM to the tasks of the step (`scancel
#      --signal=TERM JOB.0`, what `--signal=TERM@N` and the time limit send
#      them) stops them with a snapshot.
# Job 2's limit is a real one, not `scancel --signal=TERM`: what has to work
# is Slurm's whole sequence at the limit (SIGCONT and SIGTERM to every
# process of the job, the batch shell and mpirun included, SIGKILL after
# KillWait) and mpirun's own reaction to its SIGTERM. It costs about a
# minute (Slurm checks time limits every 30 s); jobs 4 and 5 use scancel to
# send one signal where it goes, which takes seconds.
#
# Usage: bash scripts/test_slurm.sh BUILD_DIR    (from the repository root)
# Prints "ok"/"FAIL" lines and "slurm: N passed, N failed"; exits 1 when a
# check failed, 77 (CTest's skip) when it cannot run here: not root, a
# package missing, a build without MPI, or the daemons would not start.
set -uo pipefail

usage() { echo "usage: $0 BUILD_DIR" >&2; exit 2; }
[ $# -eq 1 ] || usage
[ -f examples/slurm/train.sbatch ] ||
  { echo "test_slurm: run this from the Poseidon repository root" >&2; exit 2; }
BUILD_DIR=$(cd "$1" 2>/dev/null && pwd) ||
  { echo "test_slurm: no build directory '$1'" >&2; exit 2; }
TRAIN="$BUILD_DIR/tools/poseidon_train"
REPO=$(pwd)

source "$REPO/src/poseidon/test/scripts/test_lib.sh"
# test_lib's checks, with this script's own closing line.
finish() {
  echo "slurm: $passed passed, $failed failed"
  [ "$failed" -eq 0 ] && exit 0
  exit 1
}
skip() { echo "test_slurm: skipped: $*"; exit 77; }

[ -x "$TRAIN" ] || { fail "no $TRAIN (build poseidon_train first)"; finish; }
[ "$(id -u)" -eq 0 ] ||
  skip "needs root (slurmd and the jobs it starts run as root here)"
for tool in munged munge slurmctld slurmd sbatch srun squeue sinfo scontrol \
            scancel mpirun pkill python3; do
  command -v "$tool" > /dev/null ||
    skip "$tool is missing (bash scripts/install_deps.sh --tests)"
done
if grep -q '^USE_MPI:BOOL=OFF' "$BUILD_DIR/CMakeCache.txt" 2>/dev/null; then
  skip "poseidon_train was built without MPI (USE_MPI=OFF)"
fi

TMP=$(mktemp -d /tmp/poseidon_slurm.XXXXXX) || exit 1
# munged insists that every directory above its socket be searchable by
# all and writable by none but root.
chmod 755 "$TMP"
mkdir -p "$TMP/munge" "$TMP/state" "$TMP/spool" "$TMP/log" "$TMP/job"
export SLURM_CONF="$TMP/slurm.conf"
# The jobs run as root; Open MPI refuses that unless told.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export POSEIDON_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 POSEIDON_LOG_ALL_RANKS=1
export POSEIDON_TRAIN="$TRAIN"

# stop_pid FILE: TERM, then KILL, the process whose pid FILE holds.
stop_pid() {
  local pid
  pid=$(cat "$1" 2>/dev/null) || return 0
  [ -n "$pid" ] || return 0
  kill -TERM "$pid" 2>/dev/null || return 0
  for _ in $(seq 1 50); do
    kill -0 "$pid" 2>/dev/null || return 0
    sleep 0.1
  done
  kill -KILL "$pid" 2>/dev/null
}

# On exit: cancel what is left of the jobs and let their steps end, stop the
# daemons this script started (by the pids they wrote), remove everything.
cleanup() {
  if [ -f "$TMP/slurmctld.pid" ]; then
    scancel --quiet --full --signal=KILL $(squeue -h -o %i 2>/dev/null) \
      2>/dev/null
    for _ in $(seq 1 30); do
      [ -z "$(squeue -h -o %i 2>/dev/null)" ] && break
      sleep 1
    done
  fi
  stop_pid "$TMP/slurmd.pid"
  stop_pid "$TMP/slurmctld.pid"
  stop_pid "$TMP/munge/munged.pid"
  if [ -n "${KEEP_SLURM_LOGS:-}" ]; then
    echo "test_slurm: logs kept in $TMP"
  else
    rm -rf "$TMP"
  fi
}
trap cleanup EXIT
trap 'exit 1' INT TERM

# daemon_log NAME: the last lines of a daemon's log, to explain a failure.
daemon_log() { tail -n 15 "$TMP/log/$1.log" 2>/dev/null | sed 's/^/    /'; }

# --- munge, with its own key and socket --------------------------------
dd if=/dev/urandom of="$TMP/munge/munge.key" bs=1024 count=1 2> /dev/null
chmod 400 "$TMP/munge/munge.key"
SOCKET="$TMP/munge/munge.socket"
munged --socket="$SOCKET" --key-file="$TMP/munge/munge.key" \
  --pid-file="$TMP/munge/munged.pid" --seed-file="$TMP/munge/munged.seed" \
  --log-file="$TMP/log/munged.log" > "$TMP/log/munged.out" 2>&1 ||
  { cat "$TMP/log/munged.out"; skip "munged would not start here"; }
munge --socket="$SOCKET" -n 2>/dev/null |
  unmunge --socket="$SOCKET" > /dev/null 2>&1 ||
  skip "munge cannot encode and decode a credential here"

# --- slurm.conf ----------------------------------------------------------
# Two free TCP ports (slurmctld's and slurmd's), away from the defaults so
# that a system Slurm is not disturbed.
read -r CTLD_PORT SLURMD_PORT < <(python3 - <<'EOF'
import socket
socks = []
for _ in range(2):
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    socks.append(s)
print(*(s.getsockname()[1] for s in socks))
EOF
)
HOST=$(hostname -s)
CPUS=$(nproc)
[ "$CPUS" -ge 2 ] || CPUS=2   # two tasks, one CPU each (config_overrides)
# KillWait: the grace between the time limit's SIGTERM and its SIGKILL;
# small, so that a failed stop does not hold the test up for long.
KILL_WAIT=10
: > "$TMP/plugstack.conf"   # no SPANK plugins from /etc/slurm
cat > "$SLURM_CONF" <<EOF
ClusterName=poseidontest
SlurmctldHost=$HOST(127.0.0.1)
SlurmctldPort=$CTLD_PORT
SlurmdPort=$SLURMD_PORT
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket=$SOCKET
CredType=cred/munge
StateSaveLocation=$TMP/state
SlurmdSpoolDir=$TMP/spool
SlurmctldPidFile=$TMP/slurmctld.pid
SlurmdPidFile=$TMP/slurmd.pid
SlurmctldLogFile=$TMP/log/slurmctld.log
SlurmdLogFile=$TMP/log/slurmd.log
PlugStackConfig=$TMP/plugstack.conf
# No cgroups in a container: processes are tracked through their parents.
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
SlurmdParameters=config_overrides
MpiDefault=none
ReturnToService=2
KillWait=$KILL_WAIT
MinJobAge=600
NodeName=$HOST NodeAddr=127.0.0.1 CPUs=$CPUS State=UNKNOWN
PartitionName=test Nodes=$HOST Default=YES MaxTime=INFINITE State=UP
EOF

# --- slurmctld and slurmd ------------------------------------------------
slurmctld -f "$SLURM_CONF" > "$TMP/log/slurmctld.out" 2>&1 ||
  { cat "$TMP/log/slurmctld.out"; daemon_log slurmctld
    skip "slurmctld would not start here"; }
slurmd -f "$SLURM_CONF" -N "$HOST" > "$TMP/log/slurmd.out" 2>&1 ||
  { cat "$TMP/log/slurmd.out"; daemon_log slurmd
    skip "slurmd would not start here"; }
state=""
for _ in $(seq 1 60); do
  state=$(sinfo -h -n "$HOST" -o %T 2>/dev/null)
  [ "$state" = idle ] && break
  sleep 1
done
if [ "$state" != idle ]; then
  daemon_log slurmctld
  daemon_log slurmd
  skip "the node did not become idle in 60 s (state '$state')"
fi
ok "one-node cluster up: $HOST, $CPUS CPUs, idle"

# --- the net ---------------------------------------------------------------
write_tiny_net "$TMP/job/net.prototxt"
# solver FILE PREFIX MAX_ITER
solver() {
  cat > "$1" <<EOF
net: "$TMP/job/net.prototxt"
base_lr: 0.01 lr_policy: "fixed" display: 100 solver_mode: CPU
max_iter: $3
snapshot_prefix: "$2"
EOF
}

# Two tasks on the one node (the example scripts ask for two nodes).
TWO_TASKS=(--nodes=1 --ntasks=2 --ntasks-per-node=2)

# run_job LOG SBATCH_ARGS...: submits, waits until the job has left the
# queue (up to 240 s), and sets JOB_STATE (COMPLETED, TIMEOUT, ...).
run_job() {
  local log=$1 id
  shift
  id=$(sbatch --parsable --chdir="$REPO" --output="$log" "$@") ||
    { JOB_STATE="not submitted"; return 1; }
  JOB_ID=$id
  wait_gone "$id" 240
}

# wait_gone ID SECONDS: until job ID has ended (at most SECONDS); sets
# JOB_STATE. It asks for the job's own state, not squeue's listing: a squeue
# that fails while slurmctld is busy prints nothing, which looked like a
# finished job.
wait_gone() {
  for _ in $(seq 1 "$2"); do
    JOB_STATE=$(scontrol show job "$1" 2>/dev/null |
      sed -n 's/.*JobState=\([A-Z_]*\).*/\1/p')
    case "$JOB_STATE" in
      PENDING|CONFIGURING|RUNNING|COMPLETING|SUSPENDED|"") sleep 1 ;;
      *) break ;;
    esac
  done
  [ -n "$JOB_STATE" ] || JOB_STATE=unknown
}

# show LOG: what explains a failed job.
show() {
  grep -v '^I[0-9]' "$1" 2>/dev/null | tail -n 25 | sed 's/^/    /'
}

# snapshots PREFIX: the iterations of PREFIX_iter_*.caffemodel, sorted.
snapshots() {
  ls "$1"_iter_*.caffemodel 2>/dev/null |
    sed -n 's/.*_iter_\([0-9]*\)\.caffemodel$/\1/p' | sort -n | tr '\n' ' ' |
    sed 's/ $//'
}

# Runs poseidon_train with its stderr (the log) in rank.<rank>.log in
# $RANK_LOGS, instead of the job's output: under mpirun, what the ranks
# print after the time limit's SIGTERM does not reach the job's output
# (mpirun, itself sent SIGTERM, stops reading it; docs/slurm.md), and the
# files show how each rank's stop ended.
cat > "$TMP/job/rank_log.sh" <<EOF
#!/bin/sh
rank=\${OMPI_COMM_WORLD_RANK:-\$PMIX_RANK}
exec "$TRAIN" "\$@" 2>> "\$RANK_LOGS/rank.\$rank.log"
EOF
chmod +x "$TMP/job/rank_log.sh"

# rank_count DIR TEXT: how many of the rank logs in DIR hold TEXT.
rank_count() { grep -lF -- "$2" "$1"/rank.*.log 2>/dev/null | wc -l; }

# 1. Two tasks, mpirun inside the allocation, 30 iterations.
solver "$TMP/job/short.prototxt" "$TMP/job/short" 30
run_job "$TMP/job/1.log" "${TWO_TASKS[@]}" --time=5 \
  --export=ALL,SOLVER="$TMP/job/short.prototxt" examples/slurm/train.sbatch
if [ "$JOB_STATE" = COMPLETED ] &&
   grep -q "Training done: 30 iterations" "$TMP/job/1.log" &&
   grep -q "Distributed training: 2 ranks" "$TMP/job/1.log" &&
   [ "$(grep -c "Solving tiny" "$TMP/job/1.log")" -eq 2 ] &&
   [ "$(snapshots "$TMP/job/short")" = 30 ]; then
  ok "2 tasks (train.sbatch, mpirun): both ranks, 30 iterations," \
     "$(grep -o 'Training done: [^;]*' "$TMP/job/1.log")"
else
  show "$TMP/job/1.log"
  fail "2-task job: state $JOB_STATE, snapshots '$(snapshots "$TMP/job/short")'"
fi

# 2. A real time limit of one minute on a run that would not end by itself.
solver "$TMP/job/long.prototxt" "$TMP/job/long" 100000000
start=$(date +%s)
mkdir -p "$TMP/job/ranks2"
export2="ALL,SOLVER=$TMP/job/long.prototxt,RANK_LOGS=$TMP/job/ranks2"
export2+=",POSEIDON_TRAIN=$TMP/job/rank_log.sh"
run_job "$TMP/job/2.log" "${TWO_TASKS[@]}" --time=1 --export="$export2" \
  examples/slurm/train.sbatch
took=$(( $(date +%s) - start ))
iter=$(snapshots "$TMP/job/long")
stopped=$(rank_count "$TMP/job/ranks2" "Optimization stopped early")
if [ "$JOB_STATE" = TIMEOUT ] && [ -n "$iter" ] && [[ "$iter" != *" "* ]] &&
   [ -f "$TMP/job/long_iter_$iter.solverstate" ] && [ "$stopped" -eq 2 ] &&
   grep -q "DUE TO TIME LIMIT" "$TMP/job/2.log" &&
   [ "$(rank_count "$TMP/job/ranks2" "SIGTERM received: stopping")" -eq 2 ] &&
   [ "$(rank_count "$TMP/job/ranks2" \
        "Training done: $iter iterations")" -eq 1 ]; then
  ok "time limit (--time=1, ${took}s): both ranks stopped, snapshot at" \
     "iteration $iter, job TIMEOUT"
else
  show "$TMP/job/2.log"
  for log in "$TMP"/job/ranks2/rank.*.log; do show "$log"; done
  fail "time limit: state $JOB_STATE after ${took}s, snapshots '$iter'," \
       "$stopped ranks stopped early"
  iter=""
fi

# 3. Resume: the same script finds the snapshot; 20 more iterations.
if [ -n "$iter" ]; then
  solver "$TMP/job/resume.prototxt" "$TMP/job/long" $((iter + 20))
  run_job "$TMP/job/3.log" "${TWO_TASKS[@]}" --time=5 \
    --export=ALL,SOLVER="$TMP/job/resume.prototxt" examples/slurm/train.sbatch
  if [ "$JOB_STATE" = COMPLETED ] &&
     grep -q "resuming from $TMP/job/long_iter_$iter.solverstate" \
       "$TMP/job/3.log" &&
     grep -q "Training done: 20 iterations" "$TMP/job/3.log" &&
     [ -f "$TMP/job/long_iter_$((iter + 20)).solverstate" ]; then
    ok "resumed from iteration $iter in the next job: 20 more iterations"
  else
    show "$TMP/job/3.log"
    fail "resume: state $JOB_STATE, snapshots '$(snapshots "$TMP/job/long")'"
  fi
else
  fail "resume: no snapshot from the time-limited job to resume from"
fi

# wait_training LOG: until rank 0 has logged a few hundred iterations (60 s).
wait_training() {
  for _ in $(seq 1 120); do
    grep -qE "Iteration [1-9][0-9]*" "$1" 2>/dev/null && return 0
    sleep 0.5
  done
  return 1
}

# 4. An early signal to the batch shell only, as `#SBATCH
# --signal=B:TERM@120` sends it: train.sbatch's trap passes it on to the
# ranks, which stop; mpirun, not signalled, exits 0.
solver "$TMP/job/early.prototxt" "$TMP/job/early" 100000000
id=$(sbatch --parsable --chdir="$REPO" --output="$TMP/job/4.log" \
       "${TWO_TASKS[@]}" --time=5 \
       --export=ALL,SOLVER="$TMP/job/early.prototxt" \
       examples/slurm/train.sbatch)
# A job that has only just started may not take a signal yet (a CI run
# once lost it: scancel's signal never reached the trap and the job ran into
# its time limit), so the signal is sent again until the trap has answered.
trained=no
wait_training "$TMP/job/4.log" && trained=yes
trapped=no
for _ in $(seq 1 15); do
  scancel --batch --signal=TERM "$id" 2>>"$TMP/job/4.scancel"
  sleep 2
  if grep -q "train.sbatch: SIGTERM" "$TMP/job/4.log"; then
    trapped=yes
    break
  fi
done
wait_gone "$id" 120
iter=$(snapshots "$TMP/job/early")
if [ "$trapped" = yes ] && [ "$JOB_STATE" = COMPLETED ] && [ -n "$iter" ] &&
   [[ "$iter" != *" "* ]] &&
   [ "$(grep -c "Optimization stopped early" "$TMP/job/4.log")" -eq 2 ] &&
   grep -q "train.sbatch: mpirun exited with status 0" "$TMP/job/4.log" &&
   grep -q "Training done: $iter iterations .*stopped early" \
     "$TMP/job/4.log"; then
  ok "SIGTERM to the batch shell only (--signal=B:TERM@...): passed on," \
     "both ranks stopped, snapshot at iteration $iter, job COMPLETED"
else
  show "$TMP/job/4.log"
  show "$TMP/job/4.scancel"
  fail "early signal to the batch shell: state $JOB_STATE, snapshots" \
       "'$iter', iterations logged before the signal: $trained, trap" \
       "answered: $trapped"
fi

# 5. srun --mpi=pmix direct launch; SIGTERM through scancel.
if srun --mpi=list 2>&1 | grep -q pmix; then
  solver "$TMP/job/srun.prototxt" "$TMP/job/srun" 100000000
  id=$(sbatch --parsable --chdir="$REPO" --output="$TMP/job/5.log" \
         "${TWO_TASKS[@]}" --time=5 \
         --export=ALL,SOLVER="$TMP/job/srun.prototxt" \
         examples/slurm/train_srun.sbatch)
  wait_training "$TMP/job/5.log"
  # The tasks of step 0, not the batch shell: what `#SBATCH
  # --signal=TERM@120` sends; the time limit sends it to them too.
  scancel --signal=TERM "$id.0"
  wait_gone "$id" 120
  iter=$(snapshots "$TMP/job/srun")
  if [ "$JOB_STATE" = COMPLETED ] && [ -n "$iter" ] &&
     [[ "$iter" != *" "* ]] &&
     [ "$(grep -c "Optimization stopped early" "$TMP/job/5.log")" -eq 2 ] &&
     grep -q "rank 1 of 2: SIGTERM received" "$TMP/job/5.log" &&
     grep -q "Training done: $iter iterations .*stopped early" \
       "$TMP/job/5.log"; then
    ok "srun --mpi=pmix (train_srun.sbatch), SIGTERM to the step: both" \
       "ranks stopped, snapshot at iteration $iter"
  else
    show "$TMP/job/5.log"
    fail "srun --mpi=pmix: state $JOB_STATE, snapshots '$iter'"
  fi
else
  echo "(srun has no pmix plugin here: the srun --mpi=pmix job is skipped)"
fi

finish
