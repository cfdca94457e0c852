#!/usr/bin/env bash
# scripts/psd_run: the mpirun line it builds from a cluster config.json
# (--dry-run), its config errors (exit 2 naming the file and the key), its
# ending of an mpirun that stays after a rank failed (--abort-grace, with a
# stand-in mpirun), and, when Open MPI is installed, a real 2-rank run on
# localhost whose per-rank output lands in the -o folder.
# Usage: test_psd_run.sh SOURCE_DIR
set -uo pipefail
source "$(cd "$(dirname "$0")" && pwd)/test_lib.sh"
PSD_RUN="$(cd "$1" && pwd)/scripts/psd_run"
enter_workdir poseidon_psd_run

# expect_error NAME PATTERN ARGS...: psd_run ARGS exits 2 with PATTERN (an
# extended regex) in its stderr.
expect_error() {
  local name=$1 pattern=$2
  shift 2
  expect_status "$name" 2 "$pattern" "$PSD_RUN" "$@"
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
if "$PSD_RUN" -c three.json -o logs --dry-run \
    "poseidon_train train --solver=solver.prototxt" > dry.txt 2> err.txt; then
  ok "dry run exits 0"
else
  fail "dry run exit status $?"; cat err.txt
fi
[ "$(wc -l < dry.txt)" -eq 1 ] && ok "dry run prints one line" ||
  fail "dry run printed $(wc -l < dry.txt) lines"
[ ! -s err.txt ] && ok "no warnings for a consistent config" ||
  { fail "unexpected stderr:"; cat err.txt; }
[ ! -e logs ] && ok "dry run creates nothing" || fail "dry run made logs/"
expect_in "starts with mpirun" "mpirun " dry.txt
expect_in "one rank per worker" " -np 3 " dry.txt
expect_in "hosts in worker order" " -H 10.0.0.11,10.0.0.12,10.0.0.13 " dry.txt
expect_in "log folder" " --output-filename $WORK/logs " dry.txt
expect_in "ssh with pem and user" \
  "--mca plm_rsh_agent 'ssh -i /keys/cluster.pem -l ubuntu'" dry.txt
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

# No virtualenv, no ssh options: the command is run directly.
echo '{"worker_nodes": ["a", "b"]}' > plain.json
"$PSD_RUN" -c plain.json --dry-run poseidon_train train --solver=s.prototxt \
  > plain.txt 2> err.txt
expect_in "plain: -np 2 -H a,b" " -np 2 -H a,b " plain.txt
expect_in "plain: command words at the end" \
  " poseidon_train train --solver=s.prototxt" plain.txt
if grep -qE "plm_rsh_agent|activate|output-filename" plain.txt; then
  fail "plain config got ssh/virtualenv/log options:"; cat plain.txt
else ok "plain: no ssh, virtualenv or log options"; fi

# Poseidon's settings travel to the ranks; other variables do not.
POSEIDON_WAIT_NOTES=all POSEIDON_NUM_THREADS=2 PSD_UNRELATED=1 \
  "$PSD_RUN" -c plain.json --dry-run true > env.txt 2> err.txt
expect_in "POSEIDON_NUM_THREADS exported" " -x POSEIDON_NUM_THREADS " env.txt
expect_in "POSEIDON_WAIT_NOTES exported" " -x POSEIDON_WAIT_NOTES " env.txt
if grep -q "PSD_UNRELATED" env.txt; then
  fail "an unrelated variable was exported:"; cat env.txt
else ok "only POSEIDON_* variables exported"; fi

# server_nodes other than the workers: a warning, not an error.
echo '{"worker_nodes": ["a", "b"], "server_nodes": ["c", "d"]}' > servers.json
if "$PSD_RUN" -c servers.json --dry-run true > out.txt 2> err.txt; then
  expect_in "differing server_nodes warn about colocation" "colocated" err.txt
else fail "differing server_nodes exit status $?"; fi

# Extra mpirun options from the flag and the environment.
PSD_MPIRUN_ARGS="--bind-to none" "$PSD_RUN" -c plain.json --dry-run \
  --mpirun-args=--oversubscribe true > extra.txt 2> err.txt
expect_in "extra mpirun args" " --bind-to none --oversubscribe true" extra.txt

# ---- usage and errors ------------------------------------------------------
"$PSD_RUN" -h > help.txt 2>&1 &&
  expect_in "-h prints usage" "usage:" help.txt || fail "-h exit status $?"
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
echo '{"worker_nodes": ["a", "b"], "master_node": "b"}' > master.json
expect_error "master not the first worker" \
  "master_node 'b' is not the first worker node 'a'; rank 0" \
  -c master.json --dry-run true
echo '{"worker_nodes": ["a"], "username": 7}' > user.json
expect_error "username not a string" "'username' must be a non-empty string" \
  -c user.json --dry-run true
echo '{"worker_nodes": ["a", "b", "a"]}' > split.json
expect_error "repeated host not adjacent" "host 'a' appears" \
  -c split.json --dry-run true
# Found by scripts/fuzz/fuzz_psd_run.py (docs/reliability.md): bytes that are
# not UTF-8, JSON nested too deeply for Python's parser, and host names that
# mpirun's -H list would split or read as an option.
printf '{"worker_nodes": ["h\xff"]}' > latin1.json
expect_error "config not UTF-8" "latin1.json' is not UTF-8 text .*byte 20 is 0xff" \
  -c latin1.json --dry-run true
python3 -c 'print("[" * 100000)' > deep.json
expect_error "JSON nested too deeply" "deep.json' nests JSON arrays" \
  -c deep.json --dry-run true
echo '{"worker_nodes": ["a,b", "c"]}' > comma.json
expect_error "host name with a comma" "'worker_nodes' entry \"a,b\" is not a host name" \
  -c comma.json --dry-run true
echo '{"worker_nodes": ["-np"]}' > dash.json
expect_error "host name like an option" "entry \"-np\" is not a host name" \
  -c dash.json --dry-run true

# ---- an mpirun that stays after a rank failed (--abort-grace) -------------
# mpirun waits for the daemons of every host after a rank aborts, and one
# behind a cut link never answers (docs/reliability.md, "Link faults"):
# psd_run ends it --abort-grace seconds after the failure. A stand-in mpirun
# on PATH prints what Open MPI prints and then hangs, or exits by itself.
mkdir -p fakebin
cat > fakebin/mpirun <<'SH'
#!/bin/sh
echo "Error: rank 1 of 2: rank 1: Recv from rank 0 tag 3: timed out" >&2
echo "MPI_ABORT was invoked on rank 1 in communicator MPI_COMM_WORLD" >&2
[ -n "${FAKE_MPIRUN_EXIT:-}" ] && exit "$FAKE_MPIRUN_EXIT"
exec sleep 300
SH
chmod +x fakebin/mpirun
echo '{"worker_nodes": ["h0", "h1"]}' > fake.json
start=$(date +%s)
PATH="$WORK/fakebin:$PATH" timeout 60 "$PSD_RUN" --abort-grace 1 -c fake.json \
  true > grace.txt 2> graceerr.txt
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
PATH="$WORK/fakebin:$PATH" FAKE_MPIRUN_EXIT=3 timeout 60 "$PSD_RUN" \
  --abort-grace 1 -c fake.json true > /dev/null 2> graceerr.txt
rc=$?
[ $rc -eq 3 ] && ok "an mpirun that ends by itself keeps its status (3)" ||
  { fail "mpirun's own status: $rc, wanted 3"; cat graceerr.txt; }

# ---- a real run on localhost ------------------------------------------------
if command -v mpirun > /dev/null; then
  echo '{"worker_nodes": ["localhost", "localhost"],
         "master_node": "localhost"}' > local.json
  if timeout 120 "$PSD_RUN" -c local.json -o runlogs \
      --mpirun-args "--oversubscribe --allow-run-as-root" \
      "echo psd-rank-output" > run.txt 2> runerr.txt; then
    ok "real mpirun on localhost exits 0"
  else
    fail "real mpirun exit status $?"; cat runerr.txt
  fi
  for rank in 0 1; do
    out="runlogs/1/rank.$rank/stdout"
    if [ -f "$out" ] && grep -q psd-rank-output "$out"; then
      ok "rank $rank output in $out"
    else
      fail "rank $rank output missing:"; find runlogs 2>/dev/null
    fi
  done
else
  echo "skip real run: mpirun not installed"
fi

finish
