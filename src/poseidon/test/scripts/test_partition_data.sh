#!/usr/bin/env bash
# tools/partition_data through scripts/partition_data: a small MNIST-format
# database split into 3 parts (counts printed, parts created), and its errors
# (exit 1 with an "Error:" line): K < 1, a missing source, an existing part.
# Usage: test_partition_data.sh SOURCE_DIR BUILD_DIR
set -uo pipefail
SCRIPT="$(cd "$1" && pwd)/scripts/partition_data"
export POSEIDON_BUILD_DIR=$(cd "$2" && pwd)
WORK=$(mktemp -d /tmp/poseidon_partition.XXXXXX)
trap 'rm -rf "$WORK"' EXIT
cd "$WORK"
passed=0
failed=0
ok() { echo "ok   $1"; passed=$((passed + 1)); }
fail() { echo "FAIL $1"; failed=$((failed + 1)); }

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

# expect_error NAME PATTERN ARGS...
expect_error() {
  local name=$1 pattern=$2
  shift 2
  "$SCRIPT" "$@" > out.txt 2> err.txt
  local rc=$?
  if [ "$rc" -eq 1 ] && grep -Eq -- "$pattern" err.txt; then
    ok "$name: $(grep -m1 '^Error' err.txt)"
  else
    fail "$name: exit status $rc, stderr:"; cat err.txt
  fi
}
expect_error "existing part" "^Error: .*'src_lmdb_0' already exists" \
  --parts=2 src_lmdb
expect_error "zero parts" "^Error: .*at least 1" --parts=0 src_lmdb
expect_error "missing source" "^Error: .*no_such_lmdb" --parts=2 no_such_lmdb
[ ! -e no_such_lmdb_0 ] && ok "nothing created for a missing source" ||
  fail "no_such_lmdb_0 was created"

echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
