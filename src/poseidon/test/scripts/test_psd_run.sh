#!/usr/bin/env bash
# scripts/psd_run: the mpirun line it builds from a cluster config.json
# (--dry-run), the original Poseidon's two example configs verbatim, every
# option spelling of the original, master_node (rank 0) placement, the ssh
# username default, its config errors (exit 2 naming the file and the key),
# its logs (poseidon_run.log and poseidon_log_<timestamp>/ with one file per
# rank, from a stand-in mpirun printing Open MPI's tagged output), its ending
# of an mpirun that stays after a rank failed (--abort-grace), and, when
# Open MPI is installed, real 2-rank runs on localhost: a shell command, and
# poseidon_train on a tiny net when BUILD_DIR holds it.
# Usage: test_psd_run.sh SOURCE_DIR [BUILD_DIR]
set -uo pipefail
source "$(cd "$(dirname "$0")" && pwd)/test_lib.sh"
PSD_RUN="$(cd "$1" && pwd)/scripts/psd_run"
TRAIN=""
[ $# -ge 2 ] && [ -x "$2/tools/poseidon_train" ] &&
  TRAIN="$(cd "$2" && pwd)/tools/poseidon_train"
enter_workdir poseidon_psd_run
# The tests choose their own rsh agent and mpirun options.
unset PSD_MPIRUN_ARGS OMPI_MCA_plm_rsh_agent OMPI_MCA_orte_rsh_agent

# expect_error NAME PATTERN ARGS...: psd_run ARGS exits 2 with PATTERN (an
# extended regex) in its stderr.
expect_error() {
  local name=$1 pattern=$2
  shift 2
  expect_status "$name" 2 "$pattern" "$PSD_RUN" "$@"
}

# dry NAME FILE ARGS...: psd_run --dry-run ARGS exits 0 and prints one line,
# kept in FILE (its stderr in FILE.err).
dry() {
  local name=$1 file=$2
  shift 2
  if "$PSD_RUN" --dry-run "$@" > "$file" 2> "$file.err"; then
    if [ "$(wc -l < "$file")" -eq 1 ]; then ok "$name: one line"; else
      fail "$name: $(wc -l < "$file") lines on stdout:"; cat "$file"; fi
  else
    fail "$name: exit status $?, stderr:"; cat "$file.err"
  fi
}

# word_after FILE WORD: the word after the first WORD of the shell line in
# FILE (empty when WORD is not there).
word_after() {
  python3 - "$1" "$2" <<'PY'
import shlex, sys
words = shlex.split(open(sys.argv[1]).read())
print(words[words.index(sys.argv[2]) + 1] if sys.argv[2] in words else "")
PY
}

# expect_hosts NAME FILE HOSTS: the -H list of the line in FILE is HOSTS.
expect_hosts() {
  local got
  got=$(word_after "$2" -H)
  [ "$got" = "$3" ] && ok "$1: -H $3" ||
    { fail "$1: -H is '$got', wanted '$3', line:"; cat "$2"; }
}

# expect_agent NAME FILE AGENT: the line in FILE has exactly one
# plm_rsh_agent, AGENT (empty AGENT: none at all).
expect_agent() {
  local n got
  n=$(grep -o "plm_rsh_agent" "$2" | wc -l)
  got=$(word_after "$2" plm_rsh_agent)
  if [ -z "$3" ] && [ "$n" -eq 0 ]; then ok "$1: no ssh options"
  elif [ -n "$3" ] && [ "$n" -eq 1 ] && [ "$got" = "$3" ]; then
    ok "$1: rsh agent '$3'"
  else
    fail "$1: $n plm_rsh_agent options, agent '$got', wanted '${3:-none}':"
    cat "$2"
  fi
}

# expect_no_stderr NAME FILE: FILE (a stderr) is empty.
expect_no_stderr() {
  [ ! -s "$2" ] && ok "$1: nothing on stderr" ||
    { fail "$1: unexpected stderr:"; cat "$2"; }
}

# ---- the dry-run line for 3 nodes with user, pem and virtualenv ------------
cat > three.json <<'JSON'
{
  "virtualenv": "/opt/poseidon venv",
  "username": "ubuntu",
  "pem_file": "/keys/cluster.pem",
  "master_node": "10.0.0.11",
  "worker_nodes": ["10.0.0.11", "10.0.0.12", "10.0.0.13"],
  "server_nodes": ["10.0.0.11", "10.0.0.12", "10.0.0.13"]
}
JSON
dry "dry run" dry.txt -c three.json -o logs \
  "poseidon_train train --solver=solver.prototxt"
expect_no_stderr "consistent config" dry.txt.err
if [ ! -e logs ] && [ ! -e poseidon_run.log ] &&
   [ -z "$(ls -d poseidon_log_* 2> /dev/null)" ]; then
  ok "dry run creates nothing"
else fail "dry run wrote files:"; ls; fi
expect_in "starts with mpirun" "mpirun " dry.txt
expect_in "one rank per worker" " -np 3 " dry.txt
expect_hosts "hosts in worker order" dry.txt 10.0.0.11,10.0.0.12,10.0.0.13
expect_in "output tagged by rank, every rank's full log" \
  " --tag-output -x POSEIDON_LOG_ALL_RANKS=1 " dry.txt
expect_agent "pem and user" dry.txt "ssh -i /keys/cluster.pem -l ubuntu"
expect_in "PATH exported" " -x PATH " dry.txt
# The printed line is valid shell; its last words activate the virtualenv
# (a path with a space, quoted) and exec the command.
python3 - dry.txt <<'PY' && ok "virtualenv activated, command run" ||
import shlex, sys
words = shlex.split(open(sys.argv[1]).read())
assert words[-3:-1] == ["bash", "-c"], words
assert words[-1] == ("source '/opt/poseidon venv/bin/activate' && exec "
                     "poseidon_train train --solver=solver.prototxt"), words
PY
  { fail "dry-run line does not activate the virtualenv:"; cat dry.txt; }

# No virtualenv, no username: the command is run directly, ssh as ubuntu
# (the original's default) to the other machines.
echo '{"worker_nodes": ["a", "b"]}' > plain.json
dry "plain" plain.txt -c plain.json poseidon_train train --solver=s.prototxt
expect_in "plain: -np 2 -H a,b" " -np 2 -H a,b " plain.txt
expect_in "plain: command words at the end" \
  " poseidon_train train --solver=s.prototxt" plain.txt
expect_agent "plain: default username" plain.txt "ssh -l ubuntu"
if grep -qE "activate|output-filename" plain.txt; then
  fail "plain config got virtualenv/log options:"; cat plain.txt
else ok "plain: no virtualenv or log-file options"; fi

# Poseidon's settings travel to the ranks; other variables do not.
POSEIDON_WAIT_NOTES=all POSEIDON_NUM_THREADS=2 PSD_UNRELATED=1 \
  "$PSD_RUN" -c plain.json --dry-run true > env.txt 2> err.txt
expect_in "POSEIDON_NUM_THREADS exported" " -x POSEIDON_NUM_THREADS " env.txt
expect_in "POSEIDON_WAIT_NOTES exported" " -x POSEIDON_WAIT_NOTES " env.txt
if grep -q "PSD_UNRELATED" env.txt; then
  fail "an unrelated variable was exported:"; cat env.txt
else ok "only POSEIDON_* variables exported"; fi

# server_nodes other than the workers: one dedicated server rank on each,
# after the workers, and POSEIDON_SERVERS tells the ranks how many; the
# same hosts in another order are the colocated default. A server host that
# is also a worker's, not next to it in the rank order, cannot be placed by
# -H and is refused.
echo '{"worker_nodes": ["a", "b"], "server_nodes": ["c", "d"]}' > servers.json
if "$PSD_RUN" -c servers.json --dry-run true > out.txt 2> err.txt; then
  expect_in "differing server_nodes: a note saying what happens" \
    "server_nodes [\"c\", \"d\"] differ from worker_nodes [\"a\", \"b\"]:\
 2 dedicated parameter-server ranks (ranks 2 to 3) run there" err.txt
else fail "differing server_nodes exit status $?"; cat err.txt; fi
expect_in "dedicated servers: four ranks" "mpirun -np 4 " out.txt
expect_hosts "dedicated servers: after the workers" out.txt a,b,c,d
expect_in "dedicated servers: the ranks are told" "-x POSEIDON_SERVERS=2 " \
  out.txt
echo '{"worker_nodes": ["a", "b"], "server_nodes": ["b", "a"]}' > same.json
"$PSD_RUN" -c same.json --dry-run true > same.txt 2> same.err
expect_hosts "server_nodes on the workers' hosts: colocated" same.txt a,b
if grep -q "POSEIDON_SERVERS" same.txt; then
  fail "colocated servers exported POSEIDON_SERVERS:"; cat same.txt
else ok "colocated servers: no POSEIDON_SERVERS"; fi
echo '{"worker_nodes": ["a", "b"], "server_nodes": ["a"]}' > split.json
if "$PSD_RUN" -c split.json --dry-run true > split.txt 2> split.err; then
  fail "a server host apart from its worker rank was accepted:"; cat split.txt
else
  expect_in "a server host apart from its worker rank is refused" \
    "host 'a' appears in worker_nodes followed by server_nodes more than once" \
    split.err
fi

# Extra mpirun options from the flag and the environment.
PSD_MPIRUN_ARGS="--bind-to none" "$PSD_RUN" -c plain.json --dry-run \
  --mpirun-args=--oversubscribe true > extra.txt 2> err.txt
expect_in "extra mpirun args" " --bind-to none --oversubscribe true" extra.txt

# ---- the original Poseidon's example configs, verbatim ---------------------
# From the original's `psd_run -h` and its single-node setup, blank lines
# included.
cat > seeds.json <<'JSON'
{
"virtualenv": "/home/ubuntu/sandbox",
"username": "ubuntu",
"pem_file": "/path/to/pem-file.pem",
"master_node": "localhost",
"worker_nodes": [
"192.168.1.11",
"192.168.1.15"

],
"server_nodes": [
"192.168.1.70",
"192.168.1.80"

]
}
JSON
cat > single.json <<'JSON'
{
"pem_file": "cluster-key.pem",
"worker_nodes": [
"127.0.0.1"

],
"server_nodes": [
"127.0.0.1"

]
}
JSON
dry "seeds' example" seeds_dry.txt -c seeds.json \
  "python cifar10_train.py --max_steps 1000"
# Two workers, then a dedicated server rank on each of the two server_nodes.
expect_in "seeds' example: four ranks" "mpirun -np 4 " seeds_dry.txt
# master_node localhost is the launching host, not a worker: rank 0 runs on
# the first worker.
expect_hosts "seeds' example: rank 0 on the first worker" seeds_dry.txt \
  192.168.1.11,192.168.1.15,192.168.1.70,192.168.1.80
expect_agent "seeds' example: pem and user" seeds_dry.txt \
  "ssh -i /path/to/pem-file.pem -l ubuntu"
python3 - seeds_dry.txt <<'PY' && ok "seeds' example: virtualenv activated" ||
import shlex, sys
words = shlex.split(open(sys.argv[1]).read())
assert words[-1] == ("source /home/ubuntu/sandbox/bin/activate && exec "
                     "python cifar10_train.py --max_steps 1000"), words
PY
  { fail "seeds' example: no virtualenv:"; cat seeds_dry.txt; }
# Its only stderr line: the note on the dedicated servers.
if [ "$(wc -l < seeds_dry.txt.err)" -eq 1 ] &&
   grep -q "^psd_run: config 'seeds.json': server_nodes" \
     seeds_dry.txt.err; then
  ok "seeds' example: one note, about server_nodes"
else fail "seeds' example: stderr:"; cat seeds_dry.txt.err; fi
dry "seeds' single node" single_dry.txt -c single.json \
  "poseidon_train train --solver=s.prototxt"
expect_in "single node: one rank on 127.0.0.1" "mpirun -np 1 -H 127.0.0.1 " \
  single_dry.txt
expect_agent "single node: this machine needs no ssh" single_dry.txt ""
expect_no_stderr "single node" single_dry.txt.err

# ---- every option spelling of the original ---------------------------------
for spelling in "--cluster_config seeds.json" "--cluster-config seeds.json" \
    "--cluster_config=seeds.json" "--cluster-config=seeds.json" \
    "-cseeds.json"; do
  # shellcheck disable=SC2086  # the spelling is one or two words
  "$PSD_RUN" $spelling --dry-run "python cifar10_train.py --max_steps 1000" \
    > spelled.txt 2> /dev/null
  cmp -s spelled.txt seeds_dry.txt && ok "option spelling $spelling" ||
    { fail "option spelling $spelling gives another line:"; cat spelled.txt; }
done
for spelling in "-h" "--help"; do
  if "$PSD_RUN" $spelling > help.txt 2>&1; then
    if grep -qF -- "-c,--cluster_config CLUSTER_CONFIG" help.txt &&
       grep -qF -- "-o,--out OUTPUT_FOLDER" help.txt &&
       grep -qF '"master_node": "localhost"' help.txt &&
       grep -qF '"server_nodes": ["192.168.1.70", "192.168.1.80"]' help.txt
    then ok "$spelling: usage with the example config"
    else fail "$spelling: usage lacks the options or the example:"
      cat help.txt; fi
  else fail "$spelling exit status $?"; fi
done

# ---- master_node: rank 0 ---------------------------------------------------
# A worker: it gets rank 0, the others follow in config order (a host's
# repeated entries move together), and one stderr line says the order.
echo '{"worker_nodes": ["a", "b", "c"], "master_node": "b"}' > master.json
dry "master_node a worker" master.txt -c master.json true
expect_hosts "master_node a worker" master.txt b,a,c
expect_in "master_node a worker: the order on stderr" \
  "master_node 'b' is worker_nodes[1] 'b', so it gets rank 0: ranks 0..2 run\
 on b, a, c in this order" master.txt.err
echo '{"worker_nodes": ["a", "a", "b", "b"], "master_node": "b"}' \
  > master2.json
dry "master_node a repeated worker" master2.txt -c master2.json true
expect_hosts "master_node a repeated worker" master2.txt b,b,a,a
# localhost when a worker is this machine under another name: that worker.
echo '{"worker_nodes": ["a", "127.0.0.1"], "master_node": "localhost"}' \
  > master3.json
dry "master_node localhost, worker 127.0.0.1" master3.txt -c master3.json true
expect_hosts "master_node localhost, worker 127.0.0.1" master3.txt \
  127.0.0.1,a
# localhost when no worker is this machine: the launching host; rank 0 on
# worker_nodes[0], nothing to warn about.
echo '{"worker_nodes": ["a", "b"], "master_node": "localhost"}' > master4.json
dry "master_node localhost, not a worker" master4.txt -c master4.json true
expect_hosts "master_node localhost, not a worker" master4.txt a,b
expect_no_stderr "master_node localhost, not a worker" master4.txt.err
# Another host: accepted, with a warning saying where rank 0 runs.
echo '{"worker_nodes": ["a", "b"], "master_node": "elsewhere"}' > master5.json
dry "master_node another host" master5.txt -c master5.json true
expect_hosts "master_node another host" master5.txt a,b
expect_in "master_node another host: a warning" \
  "master_node 'elsewhere' is neither a worker nor this machine" \
  master5.txt.err
expect_in "master_node another host: where rank 0 runs" \
  "rank 0, which runs on worker_nodes[0] 'a'" master5.txt.err

# ---- the ssh user -----------------------------------------------------------
# Remote workers get the default ubuntu (above); a config's username wins;
# workers that are all this machine get no ssh options at all.
echo '{"worker_nodes": ["a"], "username": "alice", "pem_file": "k.pem"}' \
  > user.json
dry "username" user.txt -c user.json true
expect_agent "username" user.txt "ssh -i k.pem -l alice"
printf '{"worker_nodes": ["localhost", "127.0.0.1", "%s"]}' "$(hostname)" \
  > localonly.json
dry "this machine only" localonly.txt -c localonly.json true
expect_agent "this machine only" localonly.txt ""
# An rsh agent of the caller (scripts/fault_matrix.py, netns_rsh) wins:
# mpirun refuses an MCA parameter given twice.
dry "caller's agent in --mpirun-args" agent1.txt -c plain.json \
  --mpirun-args="--mca plm_rsh_agent /bin/my_rsh" true
expect_agent "caller's agent in --mpirun-args" agent1.txt /bin/my_rsh
PSD_MPIRUN_ARGS="--mca plm_rsh_agent /bin/my_rsh" \
  "$PSD_RUN" -c user.json --dry-run true > agent2.txt 2> /dev/null
expect_agent "caller's agent in PSD_MPIRUN_ARGS" agent2.txt /bin/my_rsh
OMPI_MCA_plm_rsh_agent=/bin/my_rsh \
  "$PSD_RUN" -c plain.json --dry-run true > agent3.txt 2> /dev/null
expect_agent "agent in the environment, no username" agent3.txt ""

# ---- usage and errors ------------------------------------------------------
expect_status "config missing" 2 "required: -c" "$PSD_RUN" true
expect_error "missing config file" "cannot read config '.*nope.json'" \
  -c nope.json --dry-run true
echo '{"worker_nodes": ["a",' > bad.json
expect_error "bad JSON" "config '.*bad.json' is not valid JSON" \
  -c bad.json --dry-run true
echo '{"server_nodes": ["a"]}' > noworkers.json
expect_error "missing worker_nodes" \
  "noworkers.json': missing required key 'worker_nodes'" \
  -c noworkers.json --dry-run true
echo '{"worker_nodes": "a"}' > strworkers.json
expect_error "worker_nodes not a list" \
  "'worker_nodes' must be a non-empty list" \
  -c strworkers.json --dry-run true
echo '{"worker_nodes": ["a"], "server_nodes": [1]}' > strservers.json
expect_error "server_nodes not host names" \
  "strservers.json': 'server_nodes' must be a non-empty list" \
  -c strservers.json --dry-run true
echo '{"worker_nodes": ["a"], "master_node": "a,b"}' > badmaster.json
expect_error "master_node not a host name" \
  "badmaster.json': 'master_node' entry \"a,b\" is not a host name" \
  -c badmaster.json --dry-run true
echo '{"worker_nodes": ["a"], "username": 7}' > baduser.json
expect_error "username not a string" \
  "baduser.json': 'username' must be a non-empty string" \
  -c baduser.json --dry-run true
echo '{"worker_nodes": ["a", "b", "a"]}' > split.json
expect_error "repeated host not adjacent" "split.json': host 'a' appears" \
  -c split.json --dry-run true
# Found by scripts/fuzz/fuzz_psd_run.py (docs/reliability.md): bytes that are
# not UTF-8, JSON nested too deeply for Python's parser, and host names that
# mpirun's -H list would split or read as an option.
printf '{"worker_nodes": ["h\xff"]}' > latin1.json
expect_error "config not UTF-8" \
  "latin1.json' is not UTF-8 text .*byte 20 is 0xff" \
  -c latin1.json --dry-run true
python3 -c 'print("[" * 100000)' > deep.json
expect_error "JSON nested too deeply" "deep.json' nests JSON arrays" \
  -c deep.json --dry-run true
echo '{"worker_nodes": ["a,b", "c"]}' > comma.json
expect_error "host name with a comma" \
  "'worker_nodes' entry \"a,b\" is not a host name" \
  -c comma.json --dry-run true
echo '{"worker_nodes": ["-np"]}' > dash.json
expect_error "host name like an option" "entry \"-np\" is not a host name" \
  -c dash.json --dry-run true

# ---- logs, from a stand-in mpirun -------------------------------------------
# It prints what Open MPI's mpirun --tag-output prints for 2 ranks: each
# piece of a rank's output after "[job,rank]<stream>:", a line left
# unfinished by rank 0 and ended later, glog INFO lines of each rank (with
# and without the year of glog 0.6), a warning, and a line of mpirun's own.
mkdir -p fakebin tagbin
cat > tagbin/mpirun <<'SH'
#!/bin/sh
echo "$*" > "$FAKE_ARGS"
printf '[1,0]<stdout>:hello from 0\n[1,1]<stdout>:hello from 1\n'
printf '[1,0]<stdout>:half a [1,1]<stdout>:whole 1\n[1,0]<stdout>:line 0\n'
printf '[1,0]<stderr>:I0101 12:00:00.000001  11 x.cpp:1] info of 0\n' >&2
printf '[1,1]<stderr>:I0101 12:00:00.000002  12 x.cpp:1] info of 1\n' >&2
printf '[1,1]<stderr>:I20260101 12:00:00.000003  12 x.cpp:1] info of 1\n' >&2
printf '[1,1]<stderr>:W0101 12:00:00.000004  12 x.cpp:2] warn of 1\n' >&2
echo "mpirun: a message of its own" >&2
exit "${FAKE_MPIRUN_EXIT:-0}"
SH
chmod +x tagbin/mpirun
echo '{"worker_nodes": ["h0", "h1"]}' > tag.json
# log_folder DIR: the one poseidon_log_* folder under DIR (fails otherwise).
log_folder() {
  local found
  found=$(ls -d "$1"/poseidon_log_* 2> /dev/null)
  [ "$(echo "$found" | grep -c .)" -eq 1 ] && echo "$found"
}
mkdir -p logrun && cd logrun || fatal "cd logrun"
PATH="$WORK/tagbin:$PATH" FAKE_ARGS=args.txt "$PSD_RUN" -c ../tag.json \
  true > term.out 2> term.err
rc=$?
[ $rc -eq 0 ] && ok "logs: psd_run exits with mpirun's 0" ||
  { fail "logs: exit status $rc"; cat term.err; }
if folder=$(log_folder .); then
  ok "logs: one poseidon_log_<timestamp> folder in the current directory"
  [[ $folder =~ /poseidon_log_[0-9]{8}_[0-9]{6}$ ]] &&
    ok "logs: folder named by the start time: $folder" ||
    fail "logs: folder name $folder"
  files=$(cd "$folder" && ls | tr '\n' ' ')
  [ "$files" = "rank0.h0.log rank1.h1.log " ] &&
    ok "logs: one file per rank, named by rank and host" ||
    fail "logs: files '$files', wanted rank0.h0.log rank1.h1.log"
  # Its stdout lines and its stderr lines, each in order (the two streams
  # come through two pipes, so their interleaving is not fixed).
  printf '%s\n' "hello from 0" "half a line 0" -- \
    "I0101 12:00:00.000001  11 x.cpp:1] info of 0" > want0.txt
  printf '%s\n' "hello from 1" "whole 1" -- \
    "I0101 12:00:00.000002  12 x.cpp:1] info of 1" \
    "I20260101 12:00:00.000003  12 x.cpp:1] info of 1" \
    "W0101 12:00:00.000004  12 x.cpp:2] warn of 1" > want1.txt
  for rank in 0 1; do
    log="$folder/rank$rank.h$rank.log"
    { grep -v "^[IW][0-9]" "$log"; echo --; grep "^[IW][0-9]" "$log"; } \
      > got$rank.txt
    cmp -s "want$rank.txt" "got$rank.txt" &&
      ok "logs: rank $rank's file holds its output, untagged, in order" ||
      { fail "logs: rank $rank's file differs from what it printed" \
          "(stdout lines, --, stderr lines):"
        diff "want$rank.txt" "got$rank.txt"; }
  done
else
  fail "logs: not one poseidon_log_* folder:"; ls -la
fi
expect_in "logs: the terminal gets the ranks' stdout untagged" \
  "hello from 1" term.out
expect_in "logs: and their stderr" "warn of 1" term.err
expect_in "logs: rank 0's INFO on the terminal" "info of 0" term.err
if grep -q "info of 1" term.err || grep -q "\]<std" term.out term.err; then
  fail "logs: the terminal got rank 1's INFO line or a tag:"
  cat term.out term.err
else ok "logs: rank 1's INFO only in its file, no tags on the terminal"; fi
if [ -f poseidon_run.log ]; then
  ok "logs: poseidon_run.log in the current directory"
  expect_in "run log: the config read" \
    "psd_run: config '../tag.json': worker_nodes [\"h0\", \"h1\"]" \
    poseidon_run.log
  expect_in "run log: rank placement" \
    "psd_run: 2 ranks; rank 0 (master) on h0; ranks in order: h0, h1" \
    poseidon_run.log
  expect_in "run log: the mpirun command" \
    "psd_run: mpirun -np 2 -H h0,h1 --map-by slot --tag-output" \
    poseidon_run.log
  expect_in "run log: start" "==== psd_run started " poseidon_run.log
  expect_in "run log: the end and exit status" \
    "exit status 0; logs of every rank in $WORK/logrun/poseidon_log_" \
    poseidon_run.log
  expect_in "run log: mpirun's own lines" "mpirun: a message of its own" \
    poseidon_run.log
  if grep -q "hello from" poseidon_run.log; then
    fail "run log holds the ranks' output:"; cat poseidon_run.log
  else ok "run log: the ranks' output is in their files only"; fi
else fail "logs: no poseidon_run.log:"; ls -la; fi
expect_in "logs: the folder's path printed at the end" \
  "logs of every rank in $WORK/logrun/poseidon_log_" <(tail -1 term.err)
# The mpirun that ran is the one --dry-run prints.
"$PSD_RUN" -c ../tag.json --dry-run true > dry_tag.txt 2> /dev/null
[ "mpirun $(cat args.txt)" = "$(python3 -c '
import shlex, sys; print(" ".join(shlex.split(open(sys.argv[1]).read())))
' dry_tag.txt)" ] && ok "logs: mpirun ran the --dry-run line" ||
  { fail "logs: mpirun got: $(cat args.txt)"; cat dry_tag.txt; }
# A second run appends to poseidon_run.log; mpirun's status is psd_run's.
sleep 1
PATH="$WORK/tagbin:$PATH" FAKE_ARGS=args.txt FAKE_MPIRUN_EXIT=3 \
  "$PSD_RUN" -c ../tag.json true > /dev/null 2>&1
rc=$?
[ $rc -eq 3 ] && ok "logs: mpirun's status 3 is psd_run's" ||
  fail "logs: status $rc, wanted mpirun's 3"
n=$(grep -c "^==== psd_run started" poseidon_run.log)
[ "$n" -eq 2 ] && ok "run log: appended, one header per run" ||
  { fail "run log: $n run headers after 2 runs:"; cat poseidon_run.log; }
expect_in "run log: the failed run's status" "exit status 3" poseidon_run.log
n=$(ls -d poseidon_log_* | wc -l)
[ "$n" -eq 2 ] && ok "logs: a folder per run" || fail "logs: $n folders"
cd "$WORK" || fatal "cd $WORK"
# -o in each spelling: the log folder goes under it; poseidon_run.log stays
# in the current directory.
for spelling in "out1 -o out1" "out2 --out out2" "out3 --out=out3" \
    "out4 -oout4"; do
  dir=${spelling%% *}
  spelling=${spelling#* }
  rm -f poseidon_run.log
  # shellcheck disable=SC2086
  PATH="$WORK/tagbin:$PATH" FAKE_ARGS=/dev/null "$PSD_RUN" -c tag.json \
    $spelling true > /dev/null 2>&1
  if folder=$(log_folder "$dir") && [ -f "$folder/rank1.h1.log" ] &&
     [ -f poseidon_run.log ]; then
    ok "option spelling $spelling: logs under $dir/"
  else
    fail "option spelling $spelling: no $dir/poseidon_log_*/rank1.h1.log" \
      "or no ./poseidon_run.log:"; find . -name "*.log" -newer tag.json
  fi
done

# ---- an mpirun that stays after a rank failed (--abort-grace) -------------
# mpirun waits for the daemons of every host after a rank aborts, and one
# behind a cut link never answers (docs/reliability.md, "Link faults"):
# psd_run ends it --abort-grace seconds after the failure. A stand-in mpirun
# on PATH prints what Open MPI prints and then hangs, or exits by itself.
cat > fakebin/mpirun <<'SH'
#!/bin/sh
echo "Error: rank 1 of 2: rank 1: Recv from rank 0 tag 3: timed out" >&2
echo "MPI_ABORT was invoked on rank 1 in communicator MPI_COMM_WORLD" >&2
[ -n "${FAKE_MPIRUN_EXIT:-}" ] && exit "$FAKE_MPIRUN_EXIT"
exec sleep 300
SH
chmod +x fakebin/mpirun
echo '{"worker_nodes": ["h0", "h1"]}' > fake.json
mkdir -p grace && cd grace || fatal "cd grace"
start=$(date +%s)
PATH="$WORK/fakebin:$PATH" timeout 60 "$PSD_RUN" --abort-grace 1 \
  -c ../fake.json true > grace.txt 2> graceerr.txt
rc=$?
took=$(( $(date +%s) - start ))
if [ $rc -eq 1 ] && [ $took -lt 15 ]; then
  ok "a hanging mpirun is ended after --abort-grace (status 1, ${took} s)"
else
  fail "hanging mpirun: status $rc after ${took} s (wanted 1, under 15 s)"
  cat graceerr.txt
fi
expect_in "says why it ended mpirun" \
  "psd_run: mpirun is still running 1 s after a rank failed (Error: rank 1" \
  graceerr.txt
expect_in "passes mpirun's stderr through" \
  "MPI_ABORT was invoked on rank 1" graceerr.txt
expect_in "run log: the failure" "psd_run: a rank failed: Error: rank 1 of 2" \
  poseidon_run.log
expect_in "run log: the ending" "psd_run: mpirun is still running 1 s" \
  poseidon_run.log
PATH="$WORK/fakebin:$PATH" FAKE_MPIRUN_EXIT=3 timeout 60 "$PSD_RUN" \
  --abort-grace 1 -c ../fake.json true > /dev/null 2> graceerr.txt
rc=$?
[ $rc -eq 3 ] && ok "an mpirun that ends by itself keeps its status (3)" ||
  { fail "mpirun's own status: $rc, wanted 3"; cat graceerr.txt; }
cd "$WORK" || fatal "cd $WORK"

# ---- real runs on localhost ------------------------------------------------
if ! command -v mpirun > /dev/null; then
  echo "skip real runs: mpirun not installed"
  finish
fi
export PSD_MPIRUN_ARGS="--oversubscribe --allow-run-as-root --bind-to none"
echo '{"worker_nodes": ["localhost", "localhost"],
       "master_node": "localhost"}' > local.json
mkdir -p real && cd real || fatal "cd real"
if timeout 120 "$PSD_RUN" -c ../local.json \
    "sh -c 'echo psd-rank-output-\$OMPI_COMM_WORLD_RANK'" \
    > run.txt 2> runerr.txt; then
  ok "real mpirun on localhost exits 0"
else
  fail "real mpirun exit status $?"; cat runerr.txt
fi
if folder=$(log_folder .); then
  for rank in 0 1; do
    log="$folder/rank$rank.localhost.log"
    if [ "$(cat "$log" 2> /dev/null)" = "psd-rank-output-$rank" ]; then
      ok "real run: rank $rank's output in its log"
    else
      fail "real run: $log holds '$(cat "$log" 2> /dev/null)'," \
        "wanted psd-rank-output-$rank"; ls "$folder"
    fi
  done
else fail "real run: not one poseidon_log_* folder:"; ls -la; fi
expect_in "real run: poseidon_run.log, exit status" "exit status 0" \
  poseidon_run.log
expect_in "real run: the terminal got rank 1's output" \
  "psd-rank-output-1" run.txt
cd "$WORK" || fatal "cd $WORK"

# poseidon_train on a tiny net, 2 ranks: every rank's full INFO log in its
# file, rank 1's INFO kept off the terminal.
if [ -z "$TRAIN" ]; then
  echo "skip poseidon_train run: no BUILD_DIR/tools/poseidon_train"
  finish
fi
write_tiny_net net.prototxt
cat > solver.prototxt <<EOF
net: "$WORK/net.prototxt"
base_lr: 0.01 lr_policy: "fixed" max_iter: 4 display: 1
solver_mode: CPU snapshot_prefix: "$WORK/snap" snapshot_after_train: false
EOF
mkdir -p train && cd train || fatal "cd train"
POSEIDON_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 timeout 120 "$PSD_RUN" \
  -c ../local.json -o logs "$TRAIN train --solver=$WORK/solver.prototxt" \
  > train.out 2> train.err
rc=$?
[ $rc -eq 0 ] && ok "poseidon_train, 2 ranks: exit 0" ||
  { fail "poseidon_train, 2 ranks: exit status $rc"; tail -20 train.err; }
if folder=$(log_folder logs); then
  for rank in 0 1; do
    log="$folder/rank$rank.localhost.log"
    n=$(grep -c "^I.*\] Iteration 4, loss = " "$log" 2> /dev/null)
    [ "${n:-0}" -eq 1 ] &&
      ok "poseidon_train: rank $rank's full INFO log in its file" ||
      { fail "poseidon_train: $log lacks rank $rank's INFO line" \
          "'Iteration 4, loss = ':"; tail -5 "$log"; }
  done
else fail "poseidon_train: not one logs/poseidon_log_* folder:"; ls -R; fi
n=$(grep -c "\] Iteration 4, loss = " train.err)
[ "$n" -eq 1 ] && ok "poseidon_train: the terminal shows rank 0's INFO only" ||
  { fail "poseidon_train: the terminal has $n 'Iteration 4, loss' lines," \
      "wanted rank 0's one"; tail -20 train.err; }
expect_in "poseidon_train: run log" "exit status 0" poseidon_run.log
cd "$WORK" || fatal "cd $WORK"

# server_nodes of their own: 2 workers and 1 dedicated server rank (all on
# this machine), every layer by the parameter server; the server's rank
# has its log file, rank 0 names it.
echo '{"worker_nodes": ["localhost", "localhost"],
       "server_nodes": ["localhost"]}' > dedicated.json
mkdir -p servers && cd servers || fatal "cd servers"
POSEIDON_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 timeout 120 "$PSD_RUN" \
  -c ../dedicated.json -o logs \
  "$TRAIN train --solver=$WORK/solver.prototxt --comm=PS" \
  > train.out 2> train.err
rc=$?
[ $rc -eq 0 ] && ok "poseidon_train, 2 workers + 1 server: exit 0" ||
  { fail "poseidon_train, 2 workers + 1 server: exit status $rc"
    tail -20 train.err; }
if folder=$(log_folder logs); then
  if [ -f "$folder/rank2.localhost.log" ] &&
     grep -q "Ranks 2 to 2 of 3 are dedicated parameter servers" \
       "$folder/rank0.localhost.log" &&
     grep -q "(updated on the servers)" "$folder/rank0.localhost.log"; then
    ok "dedicated server: its own rank and log, named by rank 0"
  else fail "dedicated server: no rank 2 log or rank 0 does not name it:"
    ls "$folder"; tail -5 "$folder/rank0.localhost.log"; fi
else fail "dedicated server: not one logs/poseidon_log_* folder:"; ls -R; fi
expect_in "dedicated server: psd_run says so" \
  "the last 1 are parameter servers" poseidon_run.log
cd "$WORK" || fatal "cd $WORK"

finish
