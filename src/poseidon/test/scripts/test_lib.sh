# The shared part of the shell tests in this folder, sourced by them:
#
#   source "$(cd "$(dirname "$0")" && pwd)/test_lib.sh"
#   enter_workdir poseidon_something      # a scratch folder, removed at exit
#   check "it runs" some_tool --flag      # ... the checks ...
#   finish                                # "N passed, N failed", the status
#
# Each check prints one line, "ok   NAME" or "FAIL NAME" (followed by what
# explains the failure), and counts it. finish prints the closing
# "N passed, N failed" line and exits 1 when any check failed, else 0;
# fatal does the same at once after a failure later checks cannot outlive.
# Commands run by check and expect_status write their stdout to out.txt and
# their stderr to err.txt in the current folder, for later checks to read.

passed=0
failed=0

# ok NAME... / fail NAME...: count one passed / failed check (the words
# joined by spaces). $last_check holds the line printed.
ok() { last_check="ok   $*"; echo "$last_check"; passed=$((passed + 1)); }
fail() { last_check="FAIL $*"; echo "$last_check"; failed=$((failed + 1)); }

# make_workdir PREFIX: make /tmp/PREFIX.XXXXXX, removed at exit; $WORK names
# it. (For scripts that stay in the folder they were started in.)
make_workdir() {
  WORK=$(mktemp -d "/tmp/$1.XXXXXX") || exit 1
  trap 'rm -rf "$WORK"' EXIT
}

# enter_workdir PREFIX: make_workdir, then cd there.
enter_workdir() {
  make_workdir "$1"
  cd "$WORK" || exit 1
}

# check NAME COMMAND...: COMMAND exits 0.
check() {
  local name=$1
  shift
  if "$@" > out.txt 2> err.txt; then ok "$name"; else
    fail "$name: exit status $?"; tail -5 err.txt; fi
}

# expect_in NAME TEXT FILE: FILE holds the fixed string TEXT.
expect_in() {
  if grep -qF -- "$2" "$3"; then ok "$1"; else
    fail "$1: '$2' not in:"; cat "$3"; fi
}

# expect_status NAME STATUS PATTERN COMMAND...: COMMAND exits with STATUS and
# a line of its stderr matches PATTERN (an extended regex). The ok line
# quotes stderr's first "Error..." line, or else its first line.
expect_status() {
  local name=$1 status=$2 pattern=$3
  shift 3
  "$@" > out.txt 2> err.txt
  local rc=$?
  if [ "$rc" -ne "$status" ]; then
    fail "$name: exit status $rc, wanted $status, stderr:"; tail -20 err.txt
  elif ! grep -Eq -- "$pattern" err.txt; then
    fail "$name: stderr lacks /$pattern/:"; tail -20 err.txt
  else
    ok "$name: $(grep -m1 '^Error' err.txt || head -1 err.txt)"
  fi
}

# finish: the summary line, and exit 1 when a check failed.
finish() {
  echo "$passed passed, $failed failed"
  [ "$failed" -eq 0 ] && exit 0
  exit 1
}

# fatal NAME...: fail NAME, then finish: for a failed step (a setup, or a
# check the rest depend on) after which running on would only mislead.
fatal() {
  fail "$@"
  finish
}

# write_tiny_net FILE: a net that needs no data (DummyData of batch 8, one
# InnerProduct, SoftmaxWithLoss) and trains thousands of iterations a
# second, for the tests of training's mechanics (signals, ranks, launchers).
write_tiny_net() {
  cat > "$1" <<'EOF'
name: "tiny"
layer { name: "data" type: "DummyData" top: "data" top: "label"
  dummy_data_param { shape { dim: 8 dim: 16 } shape { dim: 8 }
    data_filler { type: "gaussian" }
    data_filler { type: "constant" value: 1 } } }
layer { name: "ip" type: "InnerProduct" bottom: "data" top: "ip"
  inner_product_param { num_output: 4 weight_filler { type: "xavier" } } }
layer { name: "loss" type: "SoftmaxWithLoss" bottom: "ip" bottom: "label"
  top: "loss" }
EOF
}
