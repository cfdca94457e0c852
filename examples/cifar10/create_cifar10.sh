#!/usr/bin/env bash
# Converts the CIFAR-10 binary batches (fetched by data/cifar10/get_cifar10.sh)
# into the databases and mean image the example nets read, as Caffe's
# examples/cifar10/create_cifar10.sh does:
#   examples/cifar10/cifar10_train_lmdb   the 5 training batches (50000 images)
#   examples/cifar10/cifar10_test_lmdb    test_batch.bin (10000 images)
#   examples/cifar10/mean.binaryproto     the mean training image (3x32x32)
# with build/tools/convert_cifar_data and build/tools/compute_image_mean.
# Runs from anywhere. Databases already there are replaced, but only once the
# new ones are complete: a failed run leaves the old ones as they were.
#
# Environment (relative paths are taken from the repository root):
#   BUILD_DIR           the build tree holding tools/ (default: build)
#   CIFAR10_DATA_DIR    folder of data_batch_{1..5}.bin and test_batch.bin
#                       (default: data/cifar10)
#   CIFAR10_OUTPUT_DIR  where the databases and the mean go
#                       (default: examples/cifar10; data/cifar10 makes what
#                       models/cifar10_quick and models/cifar10_full read)
#   DBTYPE              lmdb (default) or leveldb; the example nets read LMDB
set -euo pipefail

PROG=create_cifar10.sh
RECORD=3073  # bytes per image: 1 label byte + 3 x 32 x 32 pixels
die() { echo "$PROG: error: $*" >&2; exit 1; }

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
from_root() {
  case "$1" in
    /*) echo "$1" ;;
    *) echo "$ROOT/$1" ;;
  esac
}
BUILD_DIR=$(from_root "${BUILD_DIR:-build}")
DATA=$(from_root "${CIFAR10_DATA_DIR:-data/cifar10}")
EXAMPLE=$(from_root "${CIFAR10_OUTPUT_DIR:-examples/cifar10}")
DBTYPE="${DBTYPE:-lmdb}"
case "$DBTYPE" in
  lmdb|leveldb) ;;
  *) die "DBTYPE='$DBTYPE' is not lmdb or leveldb" ;;
esac

CONVERT="$BUILD_DIR/tools/convert_cifar_data"
MEAN="$BUILD_DIR/tools/compute_image_mean"
for tool in "$CONVERT" "$MEAN"; do
  [ -x "$tool" ] || die "$tool not found; build Poseidon first or set BUILD_DIR"
done

# The batches must be there and whole records before anything is written.
for f in data_batch_1.bin data_batch_2.bin data_batch_3.bin data_batch_4.bin \
         data_batch_5.bin test_batch.bin; do
  file="$DATA/$f"
  [ -f "$file" ] || die "CIFAR-10 batch '$file' is missing; run" \
      "data/cifar10/get_cifar10.sh first (or set CIFAR10_DATA_DIR)"
  size=$(wc -c < "$file")
  if [ "$size" -eq 0 ] || [ $((size % RECORD)) -ne 0 ]; then
    die "CIFAR-10 batch '$file' is $size bytes, not a whole number of" \
        "$RECORD-byte records (the real ones are 30730000 bytes); fetch it" \
        "again with data/cifar10/get_cifar10.sh"
  fi
done

mkdir -p "$EXAMPLE" || die "cannot create '$EXAMPLE'"
STAGE=$(mktemp -d "$EXAMPLE/.create_cifar10.XXXXXX") ||
  die "cannot write in '$EXAMPLE'"
trap 'rm -rf "$STAGE"' EXIT

# run_tool LOG COMMAND...: runs a Poseidon tool quietly (its log in LOG); on
# failure shows its "Error: ..." line, which names the file at fault.
run_tool() {
  local log=$1
  shift
  if ! GLOG_minloglevel=1 "$@" > "$log" 2>&1; then
    local why
    why=$(grep -m1 '^Error: ' "$log" || tail -1 "$log")
    die "$(basename "$1") failed: ${why#Error: }"
  fi
}

echo "Creating $DBTYPE databases from $DATA ..."
run_tool "$STAGE/convert.log" "$CONVERT" --backend="$DBTYPE" "$DATA" "$STAGE"
echo "Computing the mean image ..."
run_tool "$STAGE/mean.log" "$MEAN" --backend="$DBTYPE" \
  "$STAGE/cifar10_train_$DBTYPE" "$STAGE/mean.binaryproto"

for name in "cifar10_train_$DBTYPE" "cifar10_test_$DBTYPE" mean.binaryproto; do
  rm -rf "${EXAMPLE:?}/$name"
  mv "$STAGE/$name" "$EXAMPLE/$name"
done
echo "Done: $EXAMPLE/cifar10_train_$DBTYPE, $EXAMPLE/cifar10_test_$DBTYPE," \
     "$EXAMPLE/mean.binaryproto"
