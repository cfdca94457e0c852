#!/usr/bin/env bash
# multihost_netns: distributed runs across real network links. Three network
# namespaces stand for three hosts (scripts/netns_cluster), each behind a
# rate-capped veth link; mpirun starts one rank per namespace through the rsh
# agent scripts/netns_rsh, so ranks talk TCP over the links, never through
# shared memory. Checks that each run passes and that its bytes crossed every
# capped link (tc -s qdisc counters, both directions).
#
# Usage: test_multihost.sh BUILD_DIR [MPIRUN]
# Environment: MULTIHOST_RATE (tc rate of each link, default 200mbit; empty:
#   no cap, and the interface counters stand in for the tc ones),
#   MULTIHOST_HOSTS (default 4; the self-test and LeNet runs use up to 3 of
#   them, the dedicated-server run 4), MULTIHOST_TIMEOUT (seconds per mpirun,
#   default 120). Exit status 77 (skip) when not root, when network
#   namespaces are not permitted, or when mpirun/tc are missing.
#
# To add a run: a function that calls run_in_cluster NP COMMAND... (it
# prints the output, returns mpirun's status) and checks what it needs,
# then a line `check_run NAME function` at the bottom.
set -uo pipefail

SKIP=77
HERE=$(cd "$(dirname "$0")" && pwd)
source "$HERE/test_lib.sh"
SOURCE_DIR=$(cd "$HERE/../../../.." && pwd)
CLUSTER=$SOURCE_DIR/scripts/netns_cluster
RSH=$SOURCE_DIR/scripts/netns_rsh
[ $# -ge 1 ] || { echo "usage: $0 BUILD_DIR [MPIRUN]" >&2; exit 2; }
BUILD_DIR=$(cd "$1" && pwd) || exit 2
MPIRUN=${2:-mpirun}
HOSTS=${MULTIHOST_HOSTS:-4}
RATE=${MULTIHOST_RATE-200mbit}
MPI_TIMEOUT=${MULTIHOST_TIMEOUT:-120}
SUBNET=10.77.0.0/24
MIN_LINK_BYTES=100000  # a run must move at least this much each way per link

skip() { echo "SKIP multihost_netns: $*"; exit $SKIP; }

# ---- can this machine make namespaces? ----------------------------------------
[ "$(id -u)" -eq 0 ] || skip "needs root (network namespaces, veth, tc)"
for tool in ip tc timeout; do
  command -v $tool > /dev/null || skip "'$tool' not found"
done
command -v "$MPIRUN" > /dev/null || skip "'$MPIRUN' not found"
"$MPIRUN" --version 2>&1 | grep -Eq "Open MPI|OpenRTE" ||
  skip "'$MPIRUN' is not Open MPI's (the rsh agent is Open MPI's plm_rsh)"

# The prefix names this run's namespaces: "mh<pid>x" (hosts mh<pid>x0, ...,
# hub mh<pid>xhub). Namespaces of an earlier run whose process is gone (it was
# killed before its trap ran) are removed first.
PREFIX="mh$$x"
for stale in $(ip netns list 2> /dev/null | awk '{print $1}' |
               sed -nE 's/^mh([0-9]+)x(hub|[0-9]+)$/\1/p' | sort -u); do
  if [ "$stale" = "$$" ] || ! kill -0 "$stale" 2> /dev/null; then
    echo "removing namespaces left by an earlier run (mh${stale}x)"
    "$CLUSTER" down --prefix "mh${stale}x"
  fi
done

probe=${PREFIX}probe
if ! err=$(ip netns add "$probe" 2>&1); then
  skip "'ip netns add' is not permitted here: $err"
fi
ip netns delete "$probe"

WORK=$(mktemp -d /tmp/poseidon_multihost.XXXXXX)
cleanup() {
  "$CLUSTER" down --prefix "$PREFIX" ||
    echo "WARNING: could not remove namespaces of prefix $PREFIX"
  rm -rf "$WORK"
}
trap cleanup EXIT
trap 'echo "interrupted"; exit 130' INT TERM HUP

# ---- the cluster ----------------------------------------------------------------
if ! "$CLUSTER" up "$HOSTS" ${RATE:+--rate "$RATE"} --prefix "$PREFIX" \
    > "$WORK/hosts.txt" 2> "$WORK/up.err"; then
  cat "$WORK/up.err"
  if grep -q "not permitted" "$WORK/up.err"; then
    skip "network namespaces are not permitted"
  fi
  fatal "multihost_netns: netns_cluster up failed"
fi
mapfile -t HOST_ADDRS < "$WORK/hosts.txt"
# The self-test and the LeNet run use up to three hosts (one rank each).
SPREAD=$(( ${#HOST_ADDRS[@]} < 3 ? ${#HOST_ADDRS[@]} : 3 ))
echo "cluster: ${#HOST_ADDRS[@]} hosts ${HOST_ADDRS[*]}, links capped at" \
  "${RATE:-no rate}, prefix $PREFIX"

# ---- running in the cluster -------------------------------------------------------
# run_in_cluster NP COMMAND...: runs COMMAND as NP ranks, spread evenly over
# the hosts (the first RUN_HOSTS of them when that is set; one per host when
# NP <= hosts), from the hub namespace through
# the rsh agent. TCP only, over the cluster subnet; no binding (every "host"
# shares this machine's cores). Prints the mpirun line and the output;
# returns mpirun's status (124 when it ran past MULTIHOST_TIMEOUT).
# RUN_SLOTS="2 2 1 1" instead places that many ranks on the first hosts in
# turn, filling each before the next (ranks 0-1 on host 1, ...).
run_in_cluster() {
  local np=$1 nhosts=${RUN_HOSTS:-${#HOST_ADDRS[@]}} slots hostlist="" i
  local map=node n
  shift
  slots=$(( (np + nhosts - 1) / nhosts ))
  if [ -n "${RUN_SLOTS:-}" ]; then
    map=slot i=0
    for n in $RUN_SLOTS; do
      hostlist+="${hostlist:+,}${HOST_ADDRS[$i]}:$n"
      i=$((i + 1))
    done
  else
    for ((i = 0; i < nhosts && i * slots < np; i++)); do
      hostlist+="${hostlist:+,}${HOST_ADDRS[$i]}:$slots"
    done
  fi
  local cmd=("$MPIRUN" --allow-run-as-root
    --mca plm_rsh_agent "$RSH" --mca plm_rsh_no_tree_spawn 1
    --mca btl "tcp,self" --mca btl_tcp_if_include "$SUBNET"
    --mca oob_tcp_if_include "$SUBNET"
    --bind-to none --map-by "$map" -x PATH)
  [ -n "${LD_LIBRARY_PATH:-}" ] && cmd+=(-x LD_LIBRARY_PATH)
  cmd+=(-H "$hostlist" -np "$np" "$@")
  echo "+ ${cmd[*]}"
  NETNS_CLUSTER_PREFIX=$PREFIX timeout -k 10 "$MPI_TIMEOUT" \
    "$CLUSTER" exec --prefix "$PREFIX" "${cmd[@]}" < /dev/null 2>&1
}

# link_counters: "sent received" bytes of each host's link, one line per
# host, from the rate-capping root qdiscs at both ends of its veth pair
# (tc -s qdisc), or from the interface counters when MULTIHOST_RATE is empty.
link_counters() {
  if [ -n "$RATE" ]; then
    "$CLUSTER" stats --prefix "$PREFIX" | awk 'NR > 1 {print $3, $4}'
  else
    "$CLUSTER" stats --prefix "$PREFIX" | awk 'NR > 1 {print $5, $6}'
  fi
}

SUMMARY=()

# check_run NAME FUNCTION [HOSTS]: runs FUNCTION (which returns non-zero on
# failure) and then checks that every host (or the first HOSTS) sent and
# received at least MIN_LINK_BYTES through its capped link meanwhile.
check_run() {
  local name=$1 fn=$2 used=${3:-${#HOST_ADDRS[@]}} before after t0 t1 status i
  before=$(link_counters)
  t0=$(date +%s.%N)
  echo "==== $name"
  "$fn"
  status=$?
  t1=$(date +%s.%N)
  after=$(link_counters)
  local secs
  secs=$(awk -v a="$t0" -v b="$t1" 'BEGIN {printf "%.1f", b - a}')
  local links_ok=1
  echo "bytes through the ${RATE:-uncapped} links during $name:"
  printf '  %-12s %14s %14s\n' host sent received
  i=0
  while read -r b_sent b_recv && read -r a_sent a_recv <&3; do
    local sent=$((a_sent - b_sent)) recv=$((a_recv - b_recv))
    printf '  %-12s %14d %14d\n' "${HOST_ADDRS[$i]}" "$sent" "$recv"
    if [ $i -lt "$used" ] &&
       { [ "$sent" -lt $MIN_LINK_BYTES ] || [ "$recv" -lt $MIN_LINK_BYTES ]; }; then
      links_ok=0
    fi
    i=$((i + 1))
  done < <(echo "$before") 3< <(echo "$after")
  if [ $status -ne 0 ]; then
    fail "$name (status $status, ${secs}s)"
  elif [ $links_ok -ne 1 ]; then
    fail "$name: a link carried under $MIN_LINK_BYTES bytes one way" \
         "(did the ranks talk over the network?)"
  else
    ok "$name (${secs}s)"
  fi
  SUMMARY+=("$last_check")
}

# ---- the runs ---------------------------------------------------------------------
# The MPI communicator's self-test, one rank per host.
mpi_selftest() {
  local exe=$BUILD_DIR/test/mpi_selftest out
  [ -x "$exe" ] || { echo "$exe not built"; return 1; }
  out=$(run_in_cluster "$SPREAD" "$exe" --hosts=several)
  local status=$?
  echo "$out"
  [ $status -eq 0 ] || return $status
  echo "$out" | grep -Eq "[1-9][0-9]* passed, 0 failed" ||
    { echo "no 'N passed, 0 failed' line"; return 1; }
}

# poseidon_train: LeNet on Fashion-MNIST, one rank per host, 100
# iterations of batch 32 per rank, wait-free with the cost model's choice
# per layer (SFB for ip1); it must finish and report a test accuracy.
train_lenet() {
  local exe=$BUILD_DIR/tools/poseidon_train out
  [ -x "$exe" ] || { echo "$exe not built"; return 1; }
  (cd "$SOURCE_DIR" && BUILD_DIR="$BUILD_DIR" \
     bash examples/fashion_mnist/create_fashion_mnist.sh > /dev/null) ||
    { echo "could not convert Fashion-MNIST"; return 1; }
  local data=$SOURCE_DIR/data/fashion_mnist
  sed -e "0,/batch_size: 64/s//batch_size: 32/" \
      -e "s|data/fashion_mnist|$data|" \
    "$SOURCE_DIR/examples/fashion_mnist/caffe_lenet_train_test.prototxt" \
    > "$WORK/lenet.prototxt"
  sed -e "s|^net: .*|net: \"$WORK/lenet.prototxt\"|" \
      -e "s/^max_iter: .*/max_iter: 100/" -e "s/^test_interval: .*/test_interval: 100/" \
      -e "s/^test_iter: .*/test_iter: 30/" -e "s/^snapshot: .*/snapshot: 0/" \
      -e "s|^snapshot_prefix: .*|snapshot_prefix: \"$WORK/lenet\"|" \
    "$SOURCE_DIR/examples/fashion_mnist/caffe_lenet_solver.prototxt" \
    > "$WORK/solver.prototxt"
  out=$(run_in_cluster "$SPREAD" -x POSEIDON_NUM_THREADS=1 \
        "$exe" train --solver="$WORK/solver.prototxt")
  local status=$?
  echo "$out" | grep -E "Distributed training|SFB|accuracy|Traffic|Error" | tail -12
  [ $status -eq 0 ] || return $status
  echo "$out" | grep -q "Optimization Done" || { echo "no 'Optimization Done'"; return 1; }
  echo "$out" | grep -q "Test net output #0: accuracy" || { echo "no accuracy"; return 1; }
  [ -f "$WORK/lenet_iter_100.caffemodel" ] || { echo "no final snapshot"; return 1; }
}

# The host level (Note [Host level] in distributed/host_level.hpp): 2 hosts x 2
# ranks, LeNet with batch 16 per rank and the parameter server (which
# updates, on and off the host level), with the host level on and off. Each trains to the weights of one process with
# batch 64 (the same 64 samples per iteration): every parameter within
# 1e-4 (1 + |w|) after 20 iterations, the float-rounding drift of sums
# added in another order. The bytes through the hosts' links per
# iteration, (bytes of 25 iterations - bytes of 5) / 20 so that start-up
# traffic cancels, must be about half with the host level on: per host S
# instead of 2 S for S bytes of gradient (a PS over 2 hosts with each rank
# owning half the slices, vs 2 ranks per host each pushing and pulling).
host_level_bytes=()
host_level_solver() {  # ITERS HOST_LEVEL PREFIX BATCH OUT
  sed -e "s|^net: .*|net: \"$WORK/lenet$4.prototxt\"|" \
      -e "s/^max_iter: .*/max_iter: $1/" -e "s/^test_interval: .*/test_interval: 1000/" \
      -e "s/^test_iter: .*/test_iter: 1/" -e "s/^snapshot: .*/snapshot: 0/" \
      -e "s/^display: .*/display: 5/" \
      -e "s|^snapshot_prefix: .*|snapshot_prefix: \"$3\"|" \
    "$SOURCE_DIR/examples/fashion_mnist/caffe_lenet_solver.prototxt" > "$5"
  printf 'random_seed: 5\ndistributed { comm: PS host_level: %s }\n' "$2" >> "$5"
}
host_level_run() {  # ITERS HOST_LEVEL: one 2 x 2 run, bytes into host_level_bytes
  local before after out status
  host_level_solver "$1" "$2" "$WORK/hl_$2_$1" 16 "$WORK/hl_$2_$1.prototxt"
  before=$(link_counters | awk '{s += $1} END {print s}')
  out=$(RUN_HOSTS=2 run_in_cluster 4 -x POSEIDON_NUM_THREADS=1 \
        "$BUILD_DIR/tools/poseidon_train" train --solver="$WORK/hl_$2_$1.prototxt")
  status=$?
  after=$(link_counters | awk '{s += $1} END {print s}')
  echo "$out" | grep -E "host level|Error|Optimization Done" | head -4
  [ $status -eq 0 ] || { echo "$out" | tail -20; return $status; }
  # With the host level the shards between hosts update (Note [Shards at
  # the host level]).
  if [ "$2" = true ] &&
     ! echo "$out" | grep -q "host level: 2 hosts x 2 ranks.*(updated on the servers)"; then
    echo "the host level's shards do not update"; return 1
  fi
  host_level_bytes+=($((after - before)))
}
train_host_level() {
  [ ${#HOST_ADDRS[@]} -ge 2 ] || { echo "needs 2 hosts"; return 1; }
  for batch in 16 64; do
    sed -e "0,/batch_size: 64/s//batch_size: $batch/" \
        -e "s|data/fashion_mnist|$SOURCE_DIR/data/fashion_mnist|" \
      "$SOURCE_DIR/examples/fashion_mnist/caffe_lenet_train_test.prototxt" \
      > "$WORK/lenet$batch.prototxt"
  done
  host_level_bytes=()
  local on off
  for level in true false; do
    host_level_run 5 $level || return 1
    host_level_run 25 $level || return 1
  done
  on=$(( (host_level_bytes[1] - host_level_bytes[0]) / 20 ))
  off=$(( (host_level_bytes[3] - host_level_bytes[2]) / 20 ))
  echo "bytes sent through the hosts' links per iteration: host level on $on, off $off"
  awk -v a="$on" -v b="$off" 'BEGIN { r = a / b; printf "ratio %.3f\n", r;
    exit !(r > 0.42 && r < 0.58) }' ||
    { echo "the host level should halve the bytes between hosts"; return 1; }
  # One process with the whole batch, 25 iterations.
  host_level_solver 25 false "$WORK/alone" 64 "$WORK/alone.prototxt"
  "$BUILD_DIR/tools/poseidon_train" train --solver="$WORK/alone.prototxt" \
    > "$WORK/alone.log" 2>&1 || { tail -5 "$WORK/alone.log"; return 1; }
  protoc --proto_path="$SOURCE_DIR/src/poseidon/proto" \
    --python_out="$WORK" caffe.proto || return 1
  PYTHONPATH=$WORK python3 - "$WORK/alone_iter_25.caffemodel" \
      "$WORK/hl_true_25_iter_25.caffemodel" "$WORK/hl_false_25_iter_25.caffemodel" <<'PY'
import sys
import caffe_pb2
def weights(path):
    net = caffe_pb2.NetParameter()
    net.ParseFromString(open(path, "rb").read())
    return {(l.name, i): list(b.data) for l in net.layer for i, b in enumerate(l.blobs)}
alone = weights(sys.argv[1])
assert alone, "no weights in " + sys.argv[1]
for path in sys.argv[2:]:
    other = weights(path)
    assert other.keys() == alone.keys(), (path, other.keys())
    worst = max(abs(a - b) / (1 + abs(a)) for k in alone
                for a, b in zip(alone[k], other[k]))
    print("%s: worst relative difference from one process %.2e" % (path, worst))
    assert worst <= 1e-4, path
PY
}

# Dedicated parameter servers (docs/distributed.md, "Dedicated servers"),
# 2 worker hosts x 2 server hosts: `--comm=PS --servers=2` with one rank
# per host puts workers 0 and 1 on hosts 1 and 2 and the servers (ranks 2
# and 3, one shard each) on hosts 3 and 4, so every push and pull crosses
# a link. LeNet, batch 32 per worker, 30 iterations with Adam (history on
# the servers), blocks of 256 KiB so that ip1's weights spread over both
# shards: the .caffemodel and .solverstate must equal byte for byte
# those of the colocated run of 2 ranks on hosts 1 and 2 (the shards sum
# in worker order either way). check_run then sees every one of the four
# links carry bytes both ways.
dedicated_run() {  # NAME NP [FLAGS...]: LeNet in $WORK/NAME, NP ranks
  local name=$1 np=$2 dir=$WORK/$1 out status
  shift 2
  mkdir -p "$dir"
  sed -e "0,/batch_size: 64/s//batch_size: 32/" \
      -e "s|data/fashion_mnist|$SOURCE_DIR/data/fashion_mnist|" \
    "$SOURCE_DIR/examples/fashion_mnist/caffe_lenet_train_test.prototxt" \
    > "$dir/lenet.prototxt"
  sed -e "s|^net: .*|net: \"lenet.prototxt\"|" \
      -e "s/^max_iter: .*/max_iter: 30/" -e "s/^test_interval: .*/test_interval: 1000/" \
      -e "s/^test_iter: .*/test_iter: 1/" -e "s/^snapshot: .*/snapshot: 0/" \
      -e "s/^display: .*/display: 10/" -e "s/^base_lr: .*/base_lr: 0.001/" \
      -e "s|^snapshot_prefix: .*|snapshot_prefix: \"lenet\"|" \
    "$SOURCE_DIR/examples/fashion_mnist/caffe_lenet_solver.prototxt" \
    > "$dir/solver.prototxt"
  printf 'type: "Adam"\nmomentum2: 0.999\nrandom_seed: 7\n%s\n' \
    "distributed { comm: PS block_size: 262144 }" >> "$dir/solver.prototxt"
  out=$(run_in_cluster "$np" -wdir "$dir" -x POSEIDON_NUM_THREADS=1 \
        "$BUILD_DIR/tools/poseidon_train" train --solver=solver.prototxt "$@")
  status=$?
  echo "$out" > "$dir/train.log"
  echo "$out" | grep -E "dedicated|updated on the servers|Error" | head -4
  [ $status -eq 0 ] || { echo "$out" | tail -20; return $status; }
  [ -f "$dir/lenet_iter_30.caffemodel" ] ||
    { echo "$name: no lenet_iter_30.caffemodel"; return 1; }
}
# same_snapshots A B WHAT_A WHAT_B: the runs in $WORK/A and $WORK/B left the
# same snapshot, byte for byte.
same_snapshots() {
  local f
  for f in lenet_iter_30.caffemodel lenet_iter_30.solverstate; do
    cmp "$WORK/$1/$f" "$WORK/$2/$f" ||
      { echo "$f: $3 differ from $4"; return 1; }
  done
  echo "$3: snapshot identical to $4"
}

train_dedicated_servers() {
  [ ${#HOST_ADDRS[@]} -ge 4 ] || { echo "needs 4 hosts"; return 1; }
  dedicated_run dedicated 4 --servers=2 || return 1
  grep -q "Ranks 2 to 3 of 4 are dedicated parameter servers" \
    "$WORK/dedicated/train.log" ||
    { echo "the log does not name ranks 2 and 3 as servers"; return 1; }
  dedicated_run colocated 2 || return 1
  same_snapshots dedicated colocated "2 workers + 2 server hosts" \
    "2 colocated ranks" || return 1
  # The host level with dedicated servers (Note [Host level with dedicated
  # servers]): 2 worker hosts of 2 ranks and the 2 server hosts against 2
  # hosts of 2 colocated ranks, both summing within a host first.
  RUN_SLOTS="2 2 1 1" dedicated_run hl_dedicated 6 --servers=2 || return 1
  grep -q "each host's first rank pushes and pulls" \
    "$WORK/hl_dedicated/train.log" ||
    { echo "the host level did not go through the hosts' first ranks"
      return 1; }
  RUN_SLOTS="2 2" dedicated_run hl_colocated 4 || return 1
  same_snapshots hl_dedicated hl_colocated "2 x 2 workers + 2 server hosts" \
    "2 x 2 colocated ranks"
}

# SSP and ASYNC at the host level (Note [Stale serving at the host level]):
# the hosts are the shards' workers, with colocated shards (2 hosts of 2)
# and with the 2 server hosts; the log must say both, and the run must
# leave its snapshot with a finite training loss displayed last.
train_stale_host_level() {
  local name last
  [ ${#HOST_ADDRS[@]} -ge 4 ] || { echo "needs 4 hosts"; return 1; }
  RUN_SLOTS="2 2" dedicated_run hl_ssp 4 --consistency=SSP --staleness=2 ||
    return 1
  RUN_SLOTS="2 2 1 1" dedicated_run hl_async 6 --servers=2 \
    --consistency=ASYNC || return 1
  for name in hl_ssp hl_async; do
    grep -q "host level: 2 hosts x 2 ranks" "$WORK/$name/train.log" ||
      { echo "$name: no host level in the plan"; return 1; }
    last=$(grep -E "Iteration [0-9]+.*loss = " "$WORK/$name/train.log" |
           tail -1)
    [ -n "$last" ] && ! echo "$last" | grep -q -i -E "nan|inf" ||
      { echo "$name: no finite loss displayed: $last"; return 1; }
  done
  grep -q "consistency SSP(2)" "$WORK/hl_ssp/train.log" &&
    grep -q "consistency ASYNC" "$WORK/hl_async/train.log" ||
    { echo "the logs do not name the consistency models"; return 1; }
  echo "SSP(2) on 2 x 2 colocated, ASYNC on 2 x 2 + 2 server hosts: trained"
}

check_run "mpi_selftest, $SPREAD ranks on $SPREAD hosts" mpi_selftest "$SPREAD"
check_run "poseidon_train LeNet, $SPREAD ranks on $SPREAD hosts" \
  train_lenet "$SPREAD"
check_run "host level, 2 hosts x 2 ranks, on and off" train_host_level 2
check_run "dedicated servers, 2 worker hosts x 2 server hosts" \
  train_dedicated_servers 4
check_run "SSP and ASYNC at the host level" train_stale_host_level 4

# ---- summary ------------------------------------------------------------------------
echo "==== multihost_netns summary (links capped at ${RATE:-no rate})"
printf '%s\n' "${SUMMARY[@]}"
finish
