#!/usr/bin/env bash
# Octave sessions that use matcaffe end cleanly (issue 35; docs/reliability.md,
# "Start-up checks and Octave"; Note [Octave's exit error] in
# matlab/src/caffe_.cpp): each session below loads a net, runs forward, and
# ends with exit status 0 and no "error:" on stderr, whether it calls
# caffe.reset_all() first or not, ends by `exit` or at the end of its
# script, and in a fresh home whose history folder Octave 7 does not make.
# Octave's command history is then saved there as usual.
# Usage: test_matcaffe_exit.sh OCTAVE_CLI MATCAFFE_DIR
set -uo pipefail
source "$(cd "$(dirname "$0")" && pwd)/test_lib.sh"
OCTAVE=$1
MATCAFFE=$(cd "$2" && pwd)
enter_workdir poseidon_matcaffe_exit
export GLOG_minloglevel=2

cat > net.prototxt <<'EOF'
name: "exit_net"
layer { name: "data" type: "Input" top: "data"
  input_param { shape { dim: 2 dim: 3 } } }
layer { name: "ip" type: "InnerProduct" bottom: "data" top: "ip"
  inner_product_param { num_output: 4 weight_filler { type: "xavier" } } }
EOF
USE_NET="addpath('$MATCAFFE'); caffe.set_mode_cpu(); \
net = caffe.Net('$WORK/net.prototxt', 'test'); \
out = net.forward({single(ones(3, 2))}); \
assert(isequal(size(out{1}), [4 2])); disp('forward ok');"

# session NAME CODE: a fresh home (no ~/.local/share/octave), the Octave
# code given, then the checks.
session() {
  local name=$1 code=$2 home
  home=$(mktemp -d "$WORK/home.XXXXXX")
  env -u OCTAVE_HISTFILE -u XDG_DATA_HOME HOME="$home" \
    "$OCTAVE" --norc --eval "$code" > out.txt 2> err.txt
  local rc=$?
  if [ "$rc" -ne 0 ]; then
    fail "$name: exit status $rc, stderr:"; cat err.txt
  elif grep -q "error:" err.txt; then
    fail "$name: stderr holds an error:"; cat err.txt
  elif ! grep -q "forward ok" out.txt; then
    fail "$name: the net did not run, stdout:"; cat out.txt err.txt
  else
    ok "$name"
  fi
}

session "forward, reset_all, end of script" \
  "$USE_NET caffe.reset_all();"
session "forward, no reset_all, end of script" "$USE_NET"
session "forward, reset_all, exit" "$USE_NET caffe.reset_all(); exit(0);"
session "forward, no reset_all, exit" "$USE_NET exit(0);"
session "forward, clear all, reset_all" \
  "$USE_NET caffe.reset_all(); clear all;"
if ls "$WORK"/home.*/.local/share/octave/history > /dev/null 2>&1; then
  ok "Octave saved its command history"
else
  fail "no home.*/.local/share/octave/history was written"
fi

finish
