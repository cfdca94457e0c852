#!/usr/bin/env bash
# Bad input through the command-line tools: each case must exit with status 1
# (not a crash: no signal, no abort), print one "Error:" line that names the
# problem, and never damage files already written.
# Usage: test_tool_errors.sh BUILD_DIR
set -uo pipefail
source "$(cd "$(dirname "$0")" && pwd)/test_lib.sh"
BUILD_DIR=$(cd "$1" && pwd)
TRAIN="$BUILD_DIR/tools/poseidon_train"
enter_workdir poseidon_errors

# expect_error NAME PATTERN COMMAND...: runs COMMAND, wants exit 1 and
# PATTERN (an extended regex) in its stderr.
expect_error() {
  local name=$1 pattern=$2
  shift 2
  expect_status "$name" 1 "$pattern" "$@"
}

# A small valid net over random data, and a solver for it.
cat > good.prototxt <<'NET'
name: "good"
layer { name: "data" type: "DummyData" top: "data" top: "label"
  dummy_data_param { shape { dim: 4 dim: 1 dim: 8 dim: 8 } shape { dim: 4 }
    data_filler { type: "gaussian" std: 1 } data_filler { type: "constant" value: 1 } } }
layer { name: "conv" type: "Convolution" bottom: "data" top: "conv"
  convolution_param { num_output: 3 kernel_size: 3 weight_filler { type: "xavier" } } }
layer { name: "ip" type: "InnerProduct" bottom: "conv" top: "ip"
  inner_product_param { num_output: 2 weight_filler { type: "xavier" } } }
layer { name: "loss" type: "SoftmaxWithLoss" bottom: "ip" bottom: "label" top: "loss" }
NET
solver_for() {  # solver_for NET [extra solver lines]
  printf 'net: "%s"\nbase_lr: 0.01\nmax_iter: 4\nlr_policy: "fixed"\nsnapshot_prefix: "%s/snap"\n%s\n' \
    "$1" "$WORK" "${2:-}" > "solver_$(basename "$1" .prototxt).prototxt"
  echo "solver_$(basename "$1" .prototxt).prototxt"
}

# 1. Malformed prototxt: the message has file:line:column.
sed 's/layer { name: "ip"/layer { name: "ip" ]/' good.prototxt > malformed.prototxt
expect_error malformed_prototxt "malformed.prototxt:[0-9]+:[0-9]+" \
  "$TRAIN" train --solver="$(solver_for malformed.prototxt)"

# 2. Unknown layer type.
sed 's/type: "InnerProduct"/type: "InnerProdutc"/' good.prototxt > unknown_type.prototxt
expect_error unknown_layer_type "unknown type 'InnerProdutc'" \
  "$TRAIN" train --solver="$(solver_for unknown_type.prototxt)"

# 3. Unknown (misspelled) field.
sed 's/num_output: 2/num_ouput: 2/' good.prototxt > unknown_field.prototxt
expect_error unknown_field "unknown_field.prototxt:[0-9]+:[0-9]+.*num_ouput" \
  "$TRAIN" train --solver="$(solver_for unknown_field.prototxt)"

# 4. Wrong bottom name.
sed 's/bottom: "conv" top: "ip"/bottom: "cnov" top: "ip"/' good.prototxt > bad_bottom.prototxt
expect_error wrong_bottom "layer 'ip'.*unknown bottom blob 'cnov'" \
  "$TRAIN" train --solver="$(solver_for bad_bottom.prototxt)"

# 5. Shape mismatch: a kernel larger than the input.
sed 's/kernel_size: 3/kernel_size: 11/' good.prototxt > bad_shape.prototxt
expect_error shape_mismatch "layer 'conv'.*1 8 8" \
  "$TRAIN" train --solver="$(solver_for bad_shape.prototxt)"

# 6. Missing LMDB.
cat > missing_lmdb.prototxt <<'NET'
name: "missing"
layer { name: "data" type: "Data" top: "data" top: "label"
  data_param { source: "no_such_lmdb" batch_size: 4 backend: LMDB } }
layer { name: "ip" type: "InnerProduct" bottom: "data" top: "ip" inner_product_param { num_output: 2 } }
layer { name: "loss" type: "SoftmaxWithLoss" bottom: "ip" bottom: "label" top: "loss" }
NET
expect_error missing_lmdb "no_such_lmdb" \
  "$TRAIN" train --solver="$(solver_for missing_lmdb.prototxt)"

# 7. Missing solver file.
expect_error missing_solver "no_such_solver.prototxt" \
  "$TRAIN" train --solver=no_such_solver.prototxt

# 8. Corrupt and truncated weights. First write a good snapshot.
"$TRAIN" train --solver="$(solver_for good.prototxt)" > /dev/null 2>&1
if [ ! -s snap_iter_4.caffemodel ]; then
  fail "setup: no snapshot written"
else
  head -c 50 snap_iter_4.caffemodel > truncated.caffemodel
  expect_error truncated_caffemodel "truncated.caffemodel.*(truncated|corrupt)" \
    "$TRAIN" test --model=good.prototxt --weights=truncated.caffemodel --iterations=1
  head -c 200 /dev/urandom > garbage.caffemodel
  expect_error corrupt_caffemodel "garbage.caffemodel" \
    "$TRAIN" test --model=good.prototxt --weights=garbage.caffemodel --iterations=1
  expect_error missing_caffemodel "nothing.caffemodel" \
    "$TRAIN" test --model=good.prototxt --weights=nothing.caffemodel --iterations=1
fi

# 9. NaN loss: a learning rate that grows a millionfold per iteration
# diverges after a few snapshots; the last snapshot must stay intact, finite
# and loadable, and no temporary file may be left.
solver=$(solver_for good.prototxt "snapshot: 1")
sed -i 's/lr_policy: "fixed"/lr_policy: "exp"\ngamma: 1e6/; s/max_iter: 4/max_iter: 50/' "$solver"
rm -f snap_iter_*
expect_error nan_loss "(nan|NaN|non-finite|diverge)" "$TRAIN" train --solver="$solver"
last=$(ls -v snap_iter_*.caffemodel 2>/dev/null | tail -1)
# (The solver refuses to snapshot non-finite weights, so loading is the check;
# the loss itself may already be huge.)
if [ -n "$last" ] && "$TRAIN" test --model=good.prototxt --weights="$last" \
     --iterations=1 > /dev/null 2>&1; then
  ok "nan_snapshot_intact: $last loads"
else
  fail "nan_snapshot_intact: last snapshot '$last' missing or unusable"
fi
if ls ./*.tmp.* > /dev/null 2>&1; then
  fail "nan_no_temporary_files: $(ls ./*.tmp.*)"
fi

# 10. Flags: both --snapshot and --weights; unknown action.
expect_error snapshot_and_weights "either --snapshot" \
  "$TRAIN" train --solver="$(solver_for good.prototxt)" --snapshot=a --weights=b
expect_error unknown_action "unknown action" "$TRAIN" frobnicate
expect_error bad_host_level "--host_level must be true or false" \
  "$TRAIN" train --solver="$(solver_for good.prototxt)" --host_level=maybe
expect_error bad_network_gbits "--network_gbits must be positive" \
  "$TRAIN" train --solver="$(solver_for good.prototxt)" --network_gbits=-1

# 11. GPUs: a bad --gpu, and --gpu where no GPU can be used (a CPU-only
#     build, or a CUDA build on a machine without one); device_query always
#     answers.
expect_error gpu_list_malformed "--gpu=0,x" \
  "$TRAIN" train --solver="$(solver_for good.prototxt)" --gpu=0,x
if "$TRAIN" device_query > out.txt 2> err.txt && grep -q "No GPU" err.txt; then
  ok "device_query: $(grep -m1 'No GPU' err.txt | sed 's/.*\] //')"
  expect_error gpu_without_gpu "--gpu=0.*(built without CUDA|no GPU is available)" \
    "$TRAIN" train --solver="$(solver_for good.prototxt)" --gpu=0
  # A solver stating solver_mode: GPU (as the model zoo's do) trains on the
  # CPU here, with a warning; --gpu above insists and fails.
  sed 's/^max_iter: 4$/max_iter: 2\nsolver_mode: GPU/' \
    "$(solver_for good.prototxt)" > solver_gpu.prototxt
  if "$TRAIN" train --solver=solver_gpu.prototxt > out.txt 2> err.txt &&
     grep -q "solver_mode: GPU.*training on the CPU" err.txt; then
    ok "solver_mode_gpu_without_gpu: trained on the CPU with a warning"
  else
    fail "solver_mode_gpu_without_gpu:"; tail -5 err.txt
  fi
elif grep -q "Device id" err.txt; then
  ok "device_query: $(grep -m1 'Name:' err.txt | sed 's/.*\] //')"
else
  fail "device_query:"; tail -5 err.txt
fi

finish
