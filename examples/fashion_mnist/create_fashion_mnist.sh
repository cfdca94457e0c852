#!/usr/bin/env bash
# Converts Fashion-MNIST (Debian package dataset-fashion-mnist) into the LMDBs
# that the example nets read:
#   data/fashion_mnist/fashion_mnist_train_lmdb  (60000 examples)
#   data/fashion_mnist/fashion_mnist_test_lmdb   (10000 examples)
# Run from anywhere; paths are relative to the repository root. Databases that
# already exist are left alone, so running it twice is harmless, also at the
# same time (the test suite does): runs take turns on a lock file, and each
# database is written under a temporary name and renamed into place, so a
# reader never sees a half-written one.
#
# Environment:
#   BUILD_DIR  the CMake build directory holding tools/convert_mnist_data
#              (default: build, relative to the repository root)
#   DATA_SRC   where the idx files are
#              (default: /usr/share/datasets/fashion-mnist)
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
BUILD_DIR="${BUILD_DIR:-build}"
case "$BUILD_DIR" in
  /*) ;;
  *) BUILD_DIR="$ROOT/$BUILD_DIR" ;;
esac
DATA_SRC="${DATA_SRC:-/usr/share/datasets/fashion-mnist}"
OUT="$ROOT/data/fashion_mnist"
CONVERT="$BUILD_DIR/tools/convert_mnist_data"

if [ ! -x "$CONVERT" ]; then
  echo "error: $CONVERT not found; build Poseidon first or set BUILD_DIR" >&2
  exit 1
fi

mkdir -p "$OUT"
exec 9> "$OUT/.convert.lock"
flock 9
for split in train test; do
  if [ "$split" = train ]; then prefix=train; else prefix=t10k; fi
  db="$OUT/fashion_mnist_${split}_lmdb"
  if [ -e "$db" ]; then
    echo "$db exists; skipping (delete it to convert again)"
    continue
  fi
  images="$DATA_SRC/${prefix}-images-idx3-ubyte.gz"
  labels="$DATA_SRC/${prefix}-labels-idx1-ubyte.gz"
  for f in "$images" "$labels"; do
    if [ ! -f "$f" ]; then
      echo "error: $f not found (apt-get install dataset-fashion-mnist," \
           "or set DATA_SRC)" >&2
      exit 1
    fi
  done
  echo "Converting the $split split: $images + $labels -> $db"
  tmp="$db.partial.$$"
  rm -rf "$tmp"
  GLOG_minloglevel=1 "$CONVERT" --backend=lmdb "$images" "$labels" "$tmp"
  mv "$tmp" "$db"
done
echo "Done: $OUT"
