#!/usr/bin/env bash
# Damaged or mismatched files that crashed, hung or were ignored
# (docs/reliability.md, "Databases, weights and tools"), through the tools:
# each must exit 1 (no signal, no abort) with a first "Error:" line naming
# the database, file or layer.
#   1. A copy of the Fashion-MNIST test LMDB with data.mdb cut to half:
#      compute_image_mean and poseidon_train (SIGBUS before).
#   2. compute_image_mean on records whose shape disagrees with their bytes
#      (std::bad_alloc and abort, or gigabytes allocated first, before).
#      Needs mdb_load (lmdb-utils); skipped without it.
#   3. --weights naming an empty file or the weights of another net, in
#      test and train (ignored before); a net's own weights still load.
#   4. A solver whose net file has no layers: the error names the file.
#   5. A top that cannot be allocated in the first Forward (under ulimit -v):
#      the error names the layer.
# Usage: test_damaged_files.sh SOURCE_DIR BUILD_DIR
set -uo pipefail
source "$(cd "$(dirname "$0")" && pwd)/test_lib.sh"
SOURCE_DIR=$(cd "$1" && pwd)
BUILD_DIR=$(cd "$2" && pwd)
TRAIN="$BUILD_DIR/tools/poseidon_train"
MEAN="$BUILD_DIR/tools/compute_image_mean"
TEST_LMDB="$SOURCE_DIR/data/fashion_mnist/fashion_mnist_test_lmdb"
enter_workdir poseidon_bad_inputs2
export POSEIDON_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1

[ -f "$TEST_LMDB/data.mdb" ] || fatal "no $TEST_LMDB (data/fashion_mnist)"

# lenet_for DB: examples/fashion_mnist's LeNet reading DB in both phases,
# as lenet_DB.prototxt, with a solver of 2 iterations (solver_DB.prototxt).
lenet_for() {
  local name
  name=$(basename "$1")
  sed -e "s|data/fashion_mnist/fashion_mnist_[a-z]*_lmdb|$1|" \
    "$SOURCE_DIR/examples/fashion_mnist/lenet_train_test.prototxt" \
    > "lenet_$name.prototxt"
  cat > "solver_$name.prototxt" <<EOF
net: "$WORK/lenet_$name.prototxt"
test_iter: 1 test_interval: 1000 base_lr: 0.01 lr_policy: "fixed"
max_iter: 2 snapshot_prefix: "$WORK/lenet_$name" solver_mode: CPU
EOF
}

# 1. A truncated LMDB.
mkdir cut_lmdb
cp "$TEST_LMDB/data.mdb" cut_lmdb/
truncate -s $(($(stat -c %s cut_lmdb/data.mdb) / 2)) cut_lmdb/data.mdb
expect_status "truncated LMDB, compute_image_mean" 1 \
  "^Error: LMDB '$WORK/cut_lmdb' is truncated: its data.mdb holds [0-9]+ bytes but the pages in use need [0-9]+" \
  "$MEAN" "$WORK/cut_lmdb"
lenet_for "$WORK/cut_lmdb"
expect_status "truncated LMDB, poseidon_train" 1 \
  "^Error: .*LMDB '$WORK/cut_lmdb' is truncated" \
  "$TRAIN" train --solver="solver_cut_lmdb.prototxt"

# 2. Records whose declared shape disagrees with their bytes.
# lmdb_of DIR HEX...: an LMDB in DIR holding one record (key 00000000) per
# serialized Datum given in hexadecimal.
lmdb_of() {
  local dir=$1 i=0
  shift
  {
    printf 'VERSION=3\nformat=bytevalue\ntype=btree\nHEADER=END\n'
    for value in "$@"; do
      printf ' %s\n %s\n' "$(printf '%08d' "$i" | od -An -tx1 | tr -d ' \n')" \
        "$value"
      i=$((i + 1))
    done
    printf 'DATA=END\n'
  } | mdb_load "$dir"
}
if command -v mdb_load > /dev/null; then
  mkdir huge_lmdb negative_lmdb
  # channels 1, height 20000, width 20000, data "abcd": 4 bytes for 4e8
  # pixels. Under a 2 GB ulimit -v, sizing the sum (3.2 GB) before checking
  # the bytes fails.
  lmdb_of huge_lmdb 080110a09c0118a09c01220461626364
  expect_status "record of 1x20000x20000 holding 4 bytes" 1 \
    "^Error: LMDB '$WORK/huge_lmdb' record '00000000': datum of shape 1x20000x20000 holds 4 bytes of pixels instead of 400000000" \
    bash -c 'ulimit -v 2000000 && exec "$@"' - "$MEAN" "$WORK/huge_lmdb"
  # channels 1, height -5, width 2, data "abcd".
  lmdb_of negative_lmdb 080110fbffffffffffffffff011802220461626364
  expect_status "record of a negative shape" 1 \
    "^Error: LMDB '$WORK/negative_lmdb' record '00000000': datum has no valid shape \(1x-5x2\)" \
    "$MEAN" "$WORK/negative_lmdb"
else
  echo "skip bad record shapes: lmdb-utils (mdb_load) not installed"
fi

# 3. --weights that fill nothing. A tiny net of another kind trained for one
# iteration gives the weights of another net.
write_tiny_net tiny.prototxt
cat > solver_tiny.prototxt <<EOF
net: "$WORK/tiny.prototxt" base_lr: 0.01 lr_policy: "fixed" max_iter: 1
snapshot_prefix: "$WORK/tiny" solver_mode: CPU
EOF
"$TRAIN" train --solver=solver_tiny.prototxt > /dev/null 2>&1 &&
  [ -f tiny_iter_1.caffemodel ] || fatal "the tiny net did not train"
: > empty.caffemodel
lenet_for "$TEST_LMDB"
LENET="$WORK/lenet_fashion_mnist_test_lmdb.prototxt"
expect_status "test --weights=empty file" 1 \
  "^Error: weights file 'empty.caffemodel' is empty \(0 bytes\)" \
  "$TRAIN" test --model="$LENET" --weights=empty.caffemodel --iterations=1
expect_status "test --weights=another net's" 1 \
  "^Error: weights file 'tiny_iter_1.caffemodel' matches no layer of net 'LeNet'" \
  "$TRAIN" test --model="$LENET" --weights=tiny_iter_1.caffemodel \
  --iterations=1
expect_status "train --weights=empty file" 1 \
  "^Error: weights file 'empty.caffemodel' is empty" \
  "$TRAIN" train --solver=solver_fashion_mnist_test_lmdb.prototxt \
  --weights=empty.caffemodel
expect_status "train --weights=another net's" 1 \
  "^Error: weights file 'tiny_iter_1.caffemodel' matches no layer" \
  "$TRAIN" train --solver=solver_fashion_mnist_test_lmdb.prototxt \
  --weights=tiny_iter_1.caffemodel
# The net's own weights: copied, with the closing line.
check "train LeNet 2 iterations" \
  "$TRAIN" train --solver=solver_fashion_mnist_test_lmdb.prototxt
check "test --weights=its own" "$TRAIN" test --model="$LENET" \
  --weights=lenet_fashion_mnist_test_lmdb_iter_2.caffemodel --iterations=1
expect_in "copied 4 of 4 layers" \
  "Copied 4 of 4 layers from lenet_fashion_mnist_test_lmdb_iter_2.caffemodel" \
  err.txt

# 4. A solver whose net file is empty.
: > empty_net.prototxt
cat > solver_empty.prototxt <<EOF
net: "$WORK/empty_net.prototxt" base_lr: 0.01 lr_policy: "fixed"
max_iter: 1 snapshot_prefix: "$WORK/empty" solver_mode: CPU
EOF
expect_status "solver with an empty net file" 1 \
  "^Error: $WORK/empty_net.prototxt: the file defines no layers" \
  "$TRAIN" train --solver=solver_empty.prototxt

# 5. A top too large for the address space, allocated in the first Forward:
# 8 x 16 tiled to 8 x 160,000,000 floats (5.1 GB) under a 3 GB ulimit -v.
cp tiny.prototxt wide.prototxt
cat >> wide.prototxt <<'EOF'
layer { name: "wide" type: "Tile" bottom: "data" top: "wide"
  tile_param { axis: 1 tiles: 10000000 } }
layer { name: "sink" type: "Silence" bottom: "wide" }
EOF
sed "s|tiny.prototxt|wide.prototxt|; s|/tiny\"|/wide\"|" solver_tiny.prototxt \
  > solver_wide.prototxt
# Out of host memory, or refused by the guard where the machine has less
# than 5.1 GB: either way the error starts with the layer.
expect_status "a top out of memory in Forward" 1 \
  "^Error: layer 'wide' \(Tile; bottoms data[a-z0-9_]*: 8 16 \(128\); tops wide: 8 160000000 \(1280000000\)\): " \
  bash -c 'ulimit -v 3000000 && exec "$@"' - \
  "$TRAIN" train --solver=solver_wide.prototxt

finish
