#!/usr/bin/env bash
# tools/partition_data through scripts/partition_data: a small MNIST-format
# database split into 3 parts (counts printed, parts created), and its errors
# (exit 1 with an "Error:" line): K < 1, a missing source, an existing part.
# Usage: test_partition_data.sh SOURCE_DIR BUILD_DIR
set -uo pipefail
source "$(cd "$(dirname "$0")" && pwd)/test_lib.sh"
SCRIPT="$(cd "$1" && pwd)/scripts/partition_data"
export POSEIDON_BUILD_DIR=$(cd "$2" && pwd)
enter_workdir poseidon_partition

# 7 examples of 2x2 pixels in idx format, converted to an LMDB.
python3 - <<'PY'
import struct
n = 7
with open("images.idx", "wb") as f:
    f.write(struct.pack(">iiii", 2051, n, 2, 2) + bytes(range(4 * n)))
with open("labels.idx", "wb") as f:
    f.write(struct.pack(">ii", 2049, n) + bytes(i % 10 for i in range(n)))
PY
"$POSEIDON_BUILD_DIR/tools/convert_mnist_data" images.idx labels.idx src_lmdb \
  > /dev/null 2>&1 || { echo "FAIL cannot build the source database"; exit 1; }

if "$SCRIPT" --parts=3 src_lmdb > out.txt 2> err.txt; then
  ok "partition into 3 exits 0"
else
  fail "partition exit status $?"; cat err.txt
fi
for line in "src_lmdb_0: 3 records" "src_lmdb_1: 2 records" \
            "src_lmdb_2: 2 records" "Partitioned 7 records"; do
  grep -qF "$line" out.txt && ok "prints '$line'" ||
    { fail "output lacks '$line':"; cat out.txt; }
done
[ -f src_lmdb_2/data.mdb ] && [ ! -e src_lmdb_3 ] && ok "3 parts created" ||
  fail "parts: $(ls)"

# expect_error NAME PATTERN ARGS...: partition_data ARGS exits 1 with
# PATTERN in its stderr.
expect_error() {
  local name=$1 pattern=$2
  shift 2
  expect_status "$name" 1 "$pattern" "$SCRIPT" "$@"
}
expect_error "existing part" "^Error: .*'src_lmdb_0' already exists" \
  --parts=2 src_lmdb
expect_error "zero parts" "^Error: .*at least 1" --parts=0 src_lmdb
expect_error "missing source" "^Error: .*no_such_lmdb" --parts=2 no_such_lmdb
[ ! -e no_such_lmdb_0 ] && ok "nothing created for a missing source" ||
  fail "no_such_lmdb_0 was created"

finish
