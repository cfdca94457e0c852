#!/usr/bin/env bash
# The database tools on both backends, as Caffe users call them: the
# convert_* tools with --backend=lmdb|leveldb (convert_cifar_data also with
# Caffe's positional DB_TYPE), compute_image_mean and partition_data reading
# either, poseidon_train with a TRAIN and a TEST Data layer over one LevelDB
# (which BVLC Caffe cannot open twice), and the errors (exit 1, one "Error:"
# line naming the problem).
# Usage: test_convert_backends.sh SOURCE_DIR BUILD_DIR
set -uo pipefail
source "$(cd "$(dirname "$0")" && pwd)/test_lib.sh"
ROOT=$(cd "$1" && pwd)
export POSEIDON_BUILD_DIR=$(cd "$2" && pwd)
TOOLS="$POSEIDON_BUILD_DIR/tools"
enter_workdir poseidon_backends
# expect_error NAME PATTERN COMMAND...: exit status 1 and PATTERN (an
# extended regex) on an "Error..." line of stderr.
expect_error() {
  local name=$1 pattern=$2
  shift 2
  expect_status "$name" 1 "^Error.*$pattern" "$@"
}

# 12 examples of 4x4 pixels in MNIST's idx format, and 3 CIFAR-10 batches'
# worth of records (2 per training batch, 1 test).
python3 - <<'PY'
import struct
n = 12
with open("images.idx", "wb") as f:
    f.write(struct.pack(">iiii", 2051, n, 4, 4) +
            bytes((7 * i + j) % 256 for i in range(n) for j in range(16)))
with open("labels.idx", "wb") as f:
    f.write(struct.pack(">ii", 2049, n) + bytes(i % 10 for i in range(n)))
import os
os.mkdir("cifar")
def record(label, seed):
    return bytes([label]) + bytes((seed + i) % 256 for i in range(3072))
for b in range(1, 6):
    with open("cifar/data_batch_%d.bin" % b, "wb") as f:
        f.write(record(b, b) + record(0, 100 + b))
with open("cifar/test_batch.bin", "wb") as f:
    f.write(record(9, 7))
PY

# --- convert_mnist_data -------------------------------------------------------
check "convert_mnist_data --backend=leveldb" \
  "$TOOLS/convert_mnist_data" --backend=leveldb images.idx labels.idx mnist_leveldb
check "convert_mnist_data (default lmdb)" \
  "$TOOLS/convert_mnist_data" images.idx labels.idx mnist_lmdb
[ -f mnist_leveldb/CURRENT ] && [ ! -e mnist_leveldb/data.mdb ] &&
  [ -f mnist_lmdb/data.mdb ] && ok "each backend's files" ||
  fail "files: $(ls mnist_leveldb mnist_lmdb | tr '\n' ' ')"

# --- compute_image_mean reads either, told or not ----------------------------
mean_of() {  # mean_of DB [FLAGS]: the printed channel mean
  "$TOOLS/compute_image_mean" "${@:2}" "$1" "$1.binaryproto" 2> err.txt |
    sed -n 's/^mean_value channel \[0\]: //p'
}
lmdb_mean=$(mean_of mnist_lmdb)
leveldb_mean=$(mean_of mnist_leveldb)
told_mean=$(mean_of mnist_leveldb --backend=leveldb)
wrong_mean=$(mean_of mnist_leveldb --backend=lmdb)
if [ -n "$lmdb_mean" ] && [ "$lmdb_mean" = "$leveldb_mean" ] &&
   [ "$told_mean" = "$lmdb_mean" ] && [ "$wrong_mean" = "$lmdb_mean" ]; then
  ok "compute_image_mean: $lmdb_mean from both backends, told or not"
else
  fail "compute_image_mean: lmdb '$lmdb_mean' leveldb '$leveldb_mean'" \
       "told '$told_mean' wrongly told '$wrong_mean'"
fi
grep -q "backend LMDB was asked for.*holds a LEVELDB database" err.txt &&
  ok "compute_image_mean --backend=lmdb on a LevelDB warns" ||
  { fail "no warning for the wrong --backend:"; tail -3 err.txt; }
cmp -s mnist_lmdb.binaryproto mnist_leveldb.binaryproto &&
  ok "the same mean file from both" || fail "mean files differ"

# --- convert_cifar_data: Caffe's positional DB_TYPE, or --backend --------------
check "convert_cifar_data IN OUT leveldb (Caffe's form)" \
  "$TOOLS/convert_cifar_data" cifar cifar_out leveldb
check "convert_cifar_data --backend=lmdb IN OUT" \
  "$TOOLS/convert_cifar_data" --backend=lmdb cifar cifar_out
[ -f cifar_out/cifar10_train_leveldb/CURRENT ] &&
  [ -f cifar_out/cifar10_test_leveldb/CURRENT ] &&
  [ -f cifar_out/cifar10_train_lmdb/data.mdb ] && ok "cifar10_{train,test}_<backend>" ||
  fail "cifar databases: $(ls cifar_out | tr '\n' ' ')"
a=$(mean_of cifar_out/cifar10_train_leveldb)
b=$(mean_of cifar_out/cifar10_train_lmdb)
[ -n "$a" ] && [ "$a" = "$b" ] && ok "CIFAR means agree ($a)" ||
  fail "CIFAR means: leveldb '$a' lmdb '$b'"
expect_error "cifar: --backend and DB_TYPE disagree" \
  "--backend=leveldb and DB_TYPE 'lmdb' disagree" \
  "$TOOLS/convert_cifar_data" --backend=leveldb cifar cifar_out2 lmdb

# --- convert_imageset (built with OpenCV) ------------------------------------
if [ -x "$TOOLS/convert_imageset" ]; then
  python3 - <<'PY'
for i in range(3):
    with open("img%d.pgm" % i, "wb") as f:
        f.write(b"P5 5 3 255\n" + bytes(40 * i + p for p in range(15)))
with open("list.txt", "w") as f:
    f.write("".join("img%d.pgm %d\n" % (i, i) for i in range(3)))
PY
  check "convert_imageset --backend=leveldb" \
    "$TOOLS/convert_imageset" --gray --backend=leveldb ./ list.txt images_leveldb
  check "convert_imageset --backend=lmdb" \
    "$TOOLS/convert_imageset" --gray --backend=lmdb ./ list.txt images_lmdb
  a=$(mean_of images_leveldb)
  b=$(mean_of images_lmdb)
  [ -f images_leveldb/CURRENT ] && [ -n "$a" ] && [ "$a" = "$b" ] &&
    ok "convert_imageset: the same images in both ($a)" ||
    fail "convert_imageset: leveldb '$a' lmdb '$b'"
fi

# --- partition_data: parts of the source's backend, or of --backend -----------
check "partition_data on a LevelDB" \
  "$ROOT/scripts/partition_data" --parts=3 mnist_leveldb
grep -qF "mnist_leveldb_2: 4 records" out.txt && [ -f mnist_leveldb_0/CURRENT ] &&
  ok "LevelDB parts of a LevelDB" || { fail "parts:"; cat out.txt; }
check "partition_data --backend=lmdb on a LevelDB" \
  "$TOOLS/partition_data" --parts=2 --backend=lmdb mnist_leveldb_0
[ -f mnist_leveldb_0_1/data.mdb ] && ok "LMDB parts when asked" ||
  fail "no LMDB part: $(ls -d mnist_leveldb_0_* | tr '\n' ' ')"

# --- poseidon_train: TRAIN and TEST nets over one LevelDB, backend unset
#     in one and set in the other ---------------------------------------------
cat > net.prototxt <<NET
name: "two_readers"
layer { name: "mnist" type: "Data" top: "data" top: "label" include { phase: TRAIN }
  transform_param { scale: 0.00390625 }
  data_param { source: "$WORK/mnist_leveldb" batch_size: 4 backend: LEVELDB } }
layer { name: "mnist" type: "Data" top: "data" top: "label" include { phase: TEST }
  transform_param { scale: 0.00390625 }
  data_param { source: "$WORK/mnist_leveldb" batch_size: 3 } }
layer { name: "ip" type: "InnerProduct" bottom: "data" top: "ip"
  inner_product_param { num_output: 10 weight_filler { type: "xavier" } } }
layer { name: "loss" type: "SoftmaxWithLoss" bottom: "ip" bottom: "label" top: "loss" }
NET
printf 'net: "%s"\ntest_iter: 2\ntest_interval: 3\nbase_lr: 0.01\nlr_policy: "fixed"\nmax_iter: 6\nsnapshot_prefix: "%s/snap"\n' \
  "$WORK/net.prototxt" "$WORK" > solver.prototxt
check "poseidon_train: a TRAIN and a TEST net over one LevelDB" \
  "$TOOLS/poseidon_train" train --solver=solver.prototxt
grep -q "Test net output #0: loss" err.txt &&
  ok "the test net ran" || { fail "no test output:"; tail -3 err.txt; }

# --- errors ------------------------------------------------------------------
expect_error "unknown --backend" "unknown database backend 'rocksdb'.*lmdb or leveldb" \
  "$TOOLS/convert_mnist_data" --backend=rocksdb images.idx labels.idx x_db
[ ! -e x_db ] && ok "nothing written for an unknown backend" || fail "x_db exists"
expect_error "existing LevelDB is not overwritten" "mnist_leveldb.*already exists" \
  "$TOOLS/convert_mnist_data" --backend=leveldb images.idx labels.idx mnist_leveldb
sed "s|$WORK/mnist_leveldb\" batch_size: 4|$WORK/no_such_leveldb\" batch_size: 4|" \
  net.prototxt > missing.prototxt
sed "s|net.prototxt|missing.prototxt|" solver.prototxt > missing_solver.prototxt
expect_error "missing LevelDB in a net" \
  "layer 'mnist'.*cannot open LevelDB '$WORK/no_such_leveldb'" \
  "$TOOLS/poseidon_train" train --solver=missing_solver.prototxt
mkdir not_a_db && echo hi > not_a_db/README
expect_error "compute_image_mean on a directory of neither" \
  "cannot open LMDB '.*not_a_db'" "$TOOLS/compute_image_mean" not_a_db
expect_error "compute_image_mean --backend=leveldb on neither" \
  "cannot open LevelDB 'not_a_db': it holds no LevelDB database" \
  "$TOOLS/compute_image_mean" --backend=leveldb not_a_db
[ "$(ls not_a_db)" = README ] && ok "nothing written into it" ||
  fail "not_a_db now holds: $(ls not_a_db | tr '\n' ' ')"

finish
