#!/usr/bin/env bash
# The CIFAR-10 tutorial (docs/cifar10.md) end to end, on a small stand-in for
# the dataset since the real one cannot be downloaded here: files in
# CIFAR-10's binary format (1 label byte + R, G, B planes of 32x32 per
# record) whose classes differ in colour, under noise, packed as
# cifar-10-binary.tar.gz is (cifar-10-batches-bin/...). Checks that
#   - data/cifar10/get_cifar10.sh extracts it (with CIFAR10_EXPECTED_MD5 set
#     to its sum), byte for byte, and refuses, with exit 1 and one clear
#     line, an archive with another MD5 (naming both sums), a malformed
#     override, a file that is not a tar.gz, a truncated one, one lacking a
#     batch, a missing one, and a failed download (an unreachable URL on the
#     loopback interface: no network is touched);
#   - examples/cifar10/create_cifar10.sh refuses missing or malformed batches
#     in one line naming the file, and otherwise writes the two LMDBs (record
#     counts read back by compute_image_mean, and by mdb_stat when installed)
#     and mean.binaryproto (1x3x32x32, equal to the mean of the generated
#     training images);
#   - examples/cifar10/train_quick.sh, run in a scratch copy of the
#     repository layout with shortened solvers, trains well above chance
#     (0.10) and its second stage resumes from the first one's snapshot at
#     the lowered learning rate; train_full.sh's three stages chain the same
#     way;
#   - train_quick_mpirun.sh (2 ranks) and train_quick_psd_run.sh (2 ranks on
#     localhost through scripts/psd_run) run both stages, when mpirun is
#     installed and the build has MPI.
# The repository's own data/ and examples/ folders are not touched.
# Usage: test_cifar10_tutorial.sh BUILD_DIR SOURCE_DIR
# Environment: MPIEXEC (default: mpirun on PATH); MPIEXEC_ARGS, extra mpirun
# options (default: --allow-run-as-root --oversubscribe --bind-to none);
# KEEP_WORK=1 keeps the scratch folder (/tmp/poseidon_cifar10.*) to look at.
set -uo pipefail
source "$(cd "$(dirname "$0")" && pwd)/test_lib.sh"
BUILD_DIR=$(cd "$1" && pwd)
SRC=$(cd "$2" && pwd)
GET="$SRC/data/cifar10/get_cifar10.sh"
CREATE="$SRC/examples/cifar10/create_cifar10.sh"
EX="$SRC/examples/cifar10"
PUBLISHED_MD5=c32a1d4ab5d03f1284b67883e8d87530
MPIEXEC=${MPIEXEC:-mpirun}
MPIEXEC_ARGS=${MPIEXEC_ARGS:---allow-run-as-root --oversubscribe --bind-to none}
export POSEIDON_NUM_THREADS=${POSEIDON_NUM_THREADS:-1}
export OPENBLAS_NUM_THREADS=1
enter_workdir poseidon_cifar10
[ -n "${KEEP_WORK:-}" ] && trap 'echo "kept $WORK"' EXIT
start=$SECONDS

# Sizes of the stand-in: records per training batch file and in the test
# file, and the shortened schedules (the nets keep batch_size 100).
PER_BATCH=200
TEST_RECORDS=500
TEST_ITER=$((TEST_RECORDS / 100))
QUICK1=${QUICK1:-60}    # stage 1 of the quick schedule
QUICK2=${QUICK2:-20}    # stage 2, resumed
ACCURACY_MIN=0.5        # chance is 0.10

md5() { md5sum < "$1" | cut -c1-32; }
# one_line NAME: the last command's stderr (err.txt) is one line.
one_line() {
  local n
  n=$(wc -l < err.txt)
  if [ "$n" -eq 1 ]; then ok "$1: one line"; else
    fail "$1: $n lines of stderr:"; cat err.txt; fi
}
last_accuracy() {
  grep "Test net output #0: accuracy" "$1" | tail -1 | sed 's/.*accuracy = //'
}

# ---- the stand-in dataset ---------------------------------------------------
# Class c is a colour plus independent noise on every pixel; labels cycle
# so every file holds every class. expected_means.txt gets the
# mean of each channel over the training images, for the mean file check.
mkdir -p gen/cifar-10-batches-bin
python3 - "$PER_BATCH" "$TEST_RECORDS" <<'PY' || fatal "generating the data"
import os, random, sys
per_batch, test_records = int(sys.argv[1]), int(sys.argv[2])
out = "gen/cifar-10-batches-bin"
# Class colours: mid-grey moved by 6 levels along an axis or diagonal of
# RGB space, under +-64 of uniform noise on every pixel. A pixel alone says
# little; averages over many say it all, so the quick net needs a few dozen
# iterations to learn it (about 0.9 test accuracy after 40 at batch 100).
# Far stronger colours make the first updates so large that the net can
# diverge at Caffe's learning rate.
offsets = [(1, 0, 0), (0, 1, 0), (0, 0, 1), (-1, 0, 0), (0, -1, 0),
           (0, 0, -1), (1, 1, 1), (-1, -1, -1), (1, -1, 0), (-1, 1, 0)]
palette = [tuple(128 + 6 * o for o in offset) for offset in offsets]
noise = 64  # each pixel: colour +- noise
tables = [[bytes(min(255, max(0, base + v % (2 * noise + 1) - noise))
                 for v in range(256)) for base in colour]
          for colour in palette]
rng = random.Random(7)
sums = [0, 0, 0]
def write(path, count, first, train):
    with open(path, "wb") as f:
        for i in range(count):
            label = (first + i) % 10
            planes = [rng.randbytes(1024).translate(tables[label][c])
                      for c in range(3)]
            if train:
                for c in range(3):
                    sums[c] += sum(planes[c])
            f.write(bytes([label]) + b"".join(planes))
for b in range(1, 6):
    write("%s/data_batch_%d.bin" % (out, b), per_batch, 3 * b, True)
write(out + "/test_batch.bin", test_records, 1, False)
with open(out + "/batches.meta.txt", "w") as f:
    f.write("\n".join(["airplane", "automobile", "bird", "cat", "deer", "dog",
                       "frog", "horse", "ship", "truck"]) + "\n\n")
with open("expected_means.txt", "w") as f:
    f.write(" ".join("%.4f" % (s / (5 * per_batch * 1024)) for s in sums) + "\n")
PY
tar -czf cifar-10-binary.tar.gz -C gen cifar-10-batches-bin ||
  fatal "packing the archive"
SUM=$(md5 cifar-10-binary.tar.gz)
echo "stand-in archive: $((5 * PER_BATCH)) training and $TEST_RECORDS test" \
     "images, MD5 $SUM ($((SECONDS - start)) s)"

# ---- get_cifar10.sh -----------------------------------------------------------
# Without the override the real checksum is required: both sums named.
CIFAR10_DIR="$WORK/dl" expect_status "wrong MD5 refused" 1 \
  "MD5 $SUM .*$PUBLISHED_MD5" "$GET" cifar-10-binary.tar.gz
one_line "wrong MD5"
if [ -z "$(ls "$WORK/dl" 2> /dev/null)" ]; then
  ok "wrong MD5: nothing extracted"
else fail "wrong MD5: files appeared:"; ls "$WORK/dl"; fi
# An override that is not a sum cannot switch the check off.
CIFAR10_DIR="$WORK/dl" CIFAR10_EXPECTED_MD5="" expect_status \
  "empty CIFAR10_EXPECTED_MD5 refused" 1 "not an MD5 sum" \
  "$GET" cifar-10-binary.tar.gz
CIFAR10_DIR="$WORK/dl" CIFAR10_EXPECTED_MD5=skip expect_status \
  "CIFAR10_EXPECTED_MD5=skip refused" 1 "not an MD5 sum" \
  "$GET" cifar-10-binary.tar.gz
# An override that is another sum: still a mismatch naming both.
CIFAR10_DIR="$WORK/dl" CIFAR10_EXPECTED_MD5=0123456789abcdef0123456789abcdef \
  expect_status "mismatch with the override" 1 \
  "MD5 $SUM .*0123456789abcdef0123456789abcdef" "$GET" cifar-10-binary.tar.gz

# The right override, the archive given by the environment variable.
if CIFAR10_DIR="$WORK/dl" CIFAR10_EXPECTED_MD5=$SUM \
    CIFAR10_ARCHIVE="$WORK/cifar-10-binary.tar.gz" "$GET" > out.txt 2> err.txt
then ok "get_cifar10.sh extracts the archive"
else fail "get_cifar10.sh: exit status $?"; cat err.txt; fi
expect_in "override is announced" "instead of the published $PUBLISHED_MD5" \
  err.txt
expect_in "counts reported" \
  "$((5 * PER_BATCH)) training and $TEST_RECORDS test images" out.txt
same=1
for f in data_batch_1.bin data_batch_2.bin data_batch_3.bin data_batch_4.bin \
         data_batch_5.bin test_batch.bin batches.meta.txt; do
  cmp -s "gen/cifar-10-batches-bin/$f" "$WORK/dl/$f" ||
    { same=0; echo "differs or missing: $WORK/dl/$f"; }
done
[ "$same" = 1 ] && ok "the 7 files extracted byte for byte" ||
  fail "extracted files differ"
if compgen -G "$WORK/dl/.get_cifar10.*" > /dev/null; then
  fail "scratch folder left:"; ls -A "$WORK/dl"
else ok "no scratch folder left"; fi
[ -f cifar-10-binary.tar.gz ] && ok "a given archive is not deleted" ||
  fail "get_cifar10.sh deleted the archive it was given"
CIFAR10_DIR="$WORK/dl" check "second run: nothing to do" "$GET"
expect_in "second run says so" "nothing to do" out.txt

# Damaged archives, each with the override set to its own sum so that the
# later checks are reached.
echo "not an archive" > junk.tar.gz
CIFAR10_DIR="$WORK/bad" CIFAR10_EXPECTED_MD5=$(md5 junk.tar.gz) expect_status \
  "not a tar.gz refused" 1 "junk.tar.gz' is not a complete gzip-compressed tar" \
  "$GET" junk.tar.gz
head -c $(($(wc -c < cifar-10-binary.tar.gz) / 2)) cifar-10-binary.tar.gz \
  > truncated.tar.gz
CIFAR10_DIR="$WORK/bad" CIFAR10_EXPECTED_MD5=$(md5 truncated.tar.gz) \
  expect_status "truncated archive refused" 1 \
  "truncated.tar.gz' is not a complete gzip-compressed tar" \
  "$GET" truncated.tar.gz
tar -czf partial.tar.gz -C gen --exclude=data_batch_4.bin cifar-10-batches-bin
CIFAR10_DIR="$WORK/bad" CIFAR10_EXPECTED_MD5=$(md5 partial.tar.gz) \
  expect_status "archive lacking a batch refused" 1 \
  "lacks cifar-10-batches-bin/data_batch_4.bin" "$GET" partial.tar.gz
if [ -z "$(ls "$WORK/bad" 2> /dev/null)" ]; then
  ok "damaged archives: nothing extracted"
else fail "damaged archives: files appeared:"; ls -A "$WORK/bad"; fi
CIFAR10_DIR="$WORK/bad" expect_status "missing archive refused" 1 \
  "archive '$WORK/nowhere.tar.gz' not found" "$GET" "$WORK/nowhere.tar.gz"
one_line "missing archive"
# No archive and no way to download: a refused connection on loopback port 1
# stands for a host this machine cannot reach.
CIFAR10_DIR="$WORK/bad" CIFAR10_URL=http://127.0.0.1:1/cifar-10-binary.tar.gz \
  expect_status "failed download refused" 1 \
  "cannot download http://127.0.0.1:1/cifar-10-binary.tar.gz .*get_cifar10.sh PATH/cifar-10-binary.tar.gz" \
  "$GET"
one_line "failed download"
expect_in "failed download: the published sum is named" "$PUBLISHED_MD5" err.txt

# ---- create_cifar10.sh ------------------------------------------------------
export BUILD_DIR
mkdir -p empty
CIFAR10_DATA_DIR="$WORK/empty" CIFAR10_OUTPUT_DIR="$WORK/out_missing" \
  expect_status "missing batches refused" 1 \
  "batch '$WORK/empty/data_batch_1.bin' is missing; run data/cifar10/get_cifar10.sh" \
  "$CREATE"
one_line "missing batches"
mkdir -p short
cp "$WORK"/dl/*.bin short/
head -c $((PER_BATCH * 3073 - 100)) "$WORK/dl/data_batch_3.bin" \
  > short/data_batch_3.bin
CIFAR10_DATA_DIR="$WORK/short" CIFAR10_OUTPUT_DIR="$WORK/out_short" \
  expect_status "short batch refused" 1 \
  "'$WORK/short/data_batch_3.bin' is $((PER_BATCH * 3073 - 100)) bytes, not a whole number of 3073-byte records" \
  "$CREATE"
one_line "short batch"
# A label above 9 is found by convert_cifar_data; its one Error line is shown.
mkdir -p badlabel
cp "$WORK"/dl/*.bin badlabel/
printf '\x0c' | dd of=badlabel/test_batch.bin bs=1 seek=$((3 * 3073)) \
  conv=notrunc 2> /dev/null
CIFAR10_DATA_DIR="$WORK/badlabel" CIFAR10_OUTPUT_DIR="$WORK/out_badlabel" \
  expect_status "label 12 refused" 1 \
  "convert_cifar_data failed: .*test_batch.bin' record 3 has label 12" \
  "$CREATE"
one_line "label 12"
if [ -z "$(ls -A "$WORK/out_badlabel" 2> /dev/null)" ]; then
  ok "failed conversion leaves nothing behind"
else fail "failed conversion left:"; ls -A "$WORK/out_badlabel"; fi

# The tutorial's layout in a scratch copy: examples/cifar10/ with the nets.
TREE="$WORK/tree"
OUT="$TREE/examples/cifar10"
mkdir -p "$OUT"
cp "$EX"/cifar10_quick_train_test.prototxt "$EX"/cifar10_full_train_test.prototxt \
  "$OUT/"
t=$SECONDS
CIFAR10_DATA_DIR="$WORK/dl" CIFAR10_OUTPUT_DIR="$OUT" check \
  "create_cifar10.sh makes the databases" "$CREATE"
echo "create_cifar10.sh: $((SECONDS - t)) s"
for f in cifar10_train_lmdb cifar10_test_lmdb mean.binaryproto; do
  [ -e "$OUT/$f" ] && ok "made $f" || fail "no $OUT/$f"
done
if compgen -G "$OUT/.create_cifar10.*" > /dev/null; then
  fail "staging folder left in $OUT"
else ok "no staging folder left"; fi
# Record counts as the reader sees them (compute_image_mean logs how many
# records it averaged), and the per-channel means.
for split in train test; do
  want=$TEST_RECORDS
  [ $split = train ] && want=$((5 * PER_BATCH))
  if "$BUILD_DIR/tools/compute_image_mean" "$OUT/cifar10_${split}_lmdb" \
      "$WORK/${split}_mean.binaryproto" > ${split}_mean.txt \
      2> ${split}_mean_err.txt; then
    got=$(sed -n 's/.*Wrote the mean of \([0-9]*\) records.*/\1/p' \
          ${split}_mean_err.txt | head -1)
    [ "$got" = "$want" ] && ok "$split LMDB holds $got records" ||
      { fail "$split LMDB holds '$got' records, wanted $want";
        tail -3 ${split}_mean_err.txt; }
  else
    fail "compute_image_mean cannot read the $split LMDB"
    tail -3 ${split}_mean_err.txt
  fi
done
if command -v mdb_stat > /dev/null; then
  for split in train test; do
    want=$TEST_RECORDS
    [ $split = train ] && want=$((5 * PER_BATCH))
    got=$(mdb_stat "$OUT/cifar10_${split}_lmdb" | sed -n 's/.*Entries: //p')
    [ "$got" = "$want" ] && ok "mdb_stat: $split LMDB has $got entries" ||
      fail "mdb_stat: $split LMDB has '$got' entries, wanted $want"
  done
else
  echo "skip mdb_stat counts: lmdb-utils not installed"
fi
# compute_image_mean prints the channel means of what it read: they must be
# the generated training images' (an independent sum in Python).
python3 - train_mean.txt expected_means.txt "$OUT/mean.binaryproto" <<'PY' &&
import re, struct, sys
printed = [float(x) for x in
           re.findall(r"mean_value channel \[\d\]: ([-\d.e+]+)",
                      open(sys.argv[1]).read())]
expected = [float(x) for x in open(sys.argv[2]).read().split()]
assert len(printed) == 3 and all(abs(a - b) < 1e-2
                                 for a, b in zip(printed, expected)), \
    (printed, expected)
# mean.binaryproto is a BlobProto: num, channels, height, width (fields 1-4,
# varints) and data (field 5, packed floats). Read it by hand.
buf = open(sys.argv[3], "rb").read()
pos, dims, data = 0, {}, []
def varint():
    global pos
    shift = value = 0
    while True:
        b = buf[pos]; pos += 1
        value |= (b & 0x7f) << shift; shift += 7
        if b < 0x80:
            return value
while pos < len(buf):
    key = varint()
    field, wire = key >> 3, key & 7
    if wire == 0:
        dims[field] = varint()
    elif wire == 2:
        n = varint()
        if field == 5:
            data = struct.unpack("<%df" % (n // 4), buf[pos:pos + n])
        pos += n
    else:
        raise SystemExit("unexpected wire type %d" % wire)
assert (dims.get(1), dims.get(2), dims.get(3), dims.get(4)) == (1, 3, 32, 32), dims
assert len(data) == 3072, len(data)
for c in range(3):
    plane = sum(data[c * 1024:(c + 1) * 1024]) / 1024
    assert abs(plane - expected[c]) < 1e-2, (c, plane, expected[c])
print("mean image 1x3x32x32, channel means", ["%.2f" % e for e in expected])
PY
  ok "mean.binaryproto is 1x3x32x32 and the training images' mean" ||
  fail "mean file or printed means differ from the generated data"
# Running it again replaces the databases.
CIFAR10_DATA_DIR="$WORK/dl" CIFAR10_OUTPUT_DIR="$OUT" check \
  "create_cifar10.sh again replaces them" "$CREATE"

# ---- train_quick.sh ---------------------------------------------------------
# Shortened copies of the real solvers: only the schedule's lengths, the test
# size and the snapshot place change; the learning rates stay.
# make_solvers ITERS1 ITERS2 PREFIX NAME: the quick (NAME=quick) or full
# solvers with stage 1 = ITERS1 iterations and each later stage ITERS2 more.
make_solvers() {
  local i1=$1 i2=$2 prefix=$3 name=$4 stage=0 end=$1 file
  for file in "$EX"/cifar10_${name}_solver.prototxt \
              "$EX/cifar10_${name}_solver_lr"*.prototxt; do
    [ "$stage" -gt 0 ] && end=$((end + i2))
    sed -e "s/^max_iter: .*/max_iter: $end/" \
        -e "s/^snapshot: .*/snapshot: $end/" \
        -e "s/^test_interval: .*/test_interval: $((stage ? i2 : i1))/" \
        -e "s/^test_iter: .*/test_iter: $TEST_ITER/" \
        -e "s/^display: .*/display: 10/" \
        -e "s|^snapshot_prefix: .*|snapshot_prefix: \"$prefix\"|" \
        "$file" > "$OUT/$(basename "$file")"
    echo "random_seed: 1" >> "$OUT/$(basename "$file")"
    stage=$((stage + 1))
  done
}
cd "$TREE" || fatal "no $TREE"
make_solvers "$QUICK1" "$QUICK2" examples/cifar10/cifar10_quick quick
t=$SECONDS
BUILD_DIR="$BUILD_DIR" "$EX/train_quick.sh" > "$WORK/quick.out" 2>&1
status=$?
echo "train_quick.sh ($QUICK1 + $QUICK2 iterations): $((SECONDS - t)) s"
LOG=examples/cifar10/cifar10_quick_train.log
if [ "$status" -eq 0 ]; then ok "train_quick.sh runs both stages"; else
  fail "train_quick.sh: exit status $status"; tail -20 "$WORK/quick.out"; fi
[ -f "$LOG" ] && ok "log kept in $LOG" || fail "no $LOG"
sed -n '/stage cifar10_quick_solver_lr1/q;p' "$LOG" > stage1.log
stage1=$(last_accuracy stage1.log)
grep -q "Iteration $QUICK1, Testing net" "$LOG" ||
  fail "stage 1 did not test at iteration $QUICK1"
[ -f "examples/cifar10/cifar10_quick_iter_$QUICK1.solverstate" ] &&
  ok "stage 1 snapshot cifar10_quick_iter_$QUICK1.solverstate" ||
  fail "no stage 1 snapshot"
expect_in "stage 2 resumes from it" \
  "Resuming from examples/cifar10/cifar10_quick_iter_$QUICK1.solverstate" "$LOG"
sed -n '/stage cifar10_quick_solver_lr1/,$p' "$LOG" > stage2.log
grep -Eq "lr = (0\.0001|1e-04)\b" stage2.log &&
  ok "stage 2 trains at lr 0.0001" ||
  { fail "stage 2 log shows no lr = 0.0001:"; grep -m3 "lr" stage2.log; }
# Resumed weights: stage 2's first test (before any update) scores what
# stage 1's last one did.
resumed=$(grep -m1 "Test net output #0: accuracy" stage2.log | sed 's/.*= //')
[ -n "$stage1" ] && [ "$resumed" = "$stage1" ] &&
  ok "stage 2 starts from stage 1's weights (test accuracy $resumed)" ||
  fail "stage 2 starts at test accuracy '$resumed', stage 1 ended at '$stage1'"
final=$((QUICK1 + QUICK2))
[ -f "examples/cifar10/cifar10_quick_iter_$final.caffemodel" ] &&
  ok "final weights cifar10_quick_iter_$final.caffemodel" ||
  fail "no final weights"
accuracy=$(last_accuracy "$LOG")
echo "test accuracy after $QUICK1 iterations: $stage1; after $final: $accuracy"
if awk -v a="${accuracy:-0}" -v m="$ACCURACY_MIN" 'BEGIN { exit !(a > m) }'
then ok "test accuracy $accuracy is above $ACCURACY_MIN (chance 0.10)"
else fail "test accuracy '$accuracy' is not above $ACCURACY_MIN"; fi
expect_in "the script names the final weights" \
  "final weights examples/cifar10/cifar10_quick_iter_$final.caffemodel" "$LOG"

# Outside a repository layout the script says where to run it.
(cd "$WORK/empty" && BUILD_DIR="$BUILD_DIR" "$EX/train_quick.sh" \
  > "$WORK/out.txt" 2> "$WORK/err.txt")
[ $? -eq 1 ] && grep -q "run this from the Poseidon repository root" \
  "$WORK/err.txt" && ok "train_quick.sh outside the root: clear error" ||
  { fail "train_quick.sh outside the root:"; cat "$WORK/err.txt"; }

# ---- train_full.sh: three chained stages of a few iterations ----------------
make_solvers 4 2 examples/cifar10/cifar10_full full
t=$SECONDS
BUILD_DIR="$BUILD_DIR" "$EX/train_full.sh" > "$WORK/full.out" 2>&1
status=$?
echo "train_full.sh (4 + 2 + 2 iterations): $((SECONDS - t)) s"
if [ "$status" -eq 0 ] && [ -f examples/cifar10/cifar10_full_iter_8.caffemodel ] &&
   grep -q "Resuming from examples/cifar10/cifar10_full_iter_4.solverstate" \
     examples/cifar10/cifar10_full_train.log &&
   grep -q "Resuming from examples/cifar10/cifar10_full_iter_6.solverstate" \
     examples/cifar10/cifar10_full_train.log; then
  ok "train_full.sh: 3 stages, each resuming from the last snapshot"
else
  fail "train_full.sh: exit status $status"; tail -20 "$WORK/full.out"
fi

# ---- several ranks ----------------------------------------------------------
if ! command -v "$MPIEXEC" > /dev/null; then
  echo "skip the mpirun and psd_run variants: $MPIEXEC not installed"
elif ! grep -q '^USE_MPI:BOOL=ON' "$BUILD_DIR/CMakeCache.txt" 2> /dev/null
then
  echo "skip the mpirun and psd_run variants: the build has no MPI"
else
  # 40 + 10 iterations at batch 100 per rank: an effective batch of 200.
  make_solvers 40 10 examples/cifar10/mpi_quick quick
  t=$SECONDS
  BUILD_DIR="$BUILD_DIR" MPIRUN="$MPIEXEC" MPIRUN_ARGS="$MPIEXEC_ARGS" \
    timeout 300 "$EX/train_quick_mpirun.sh" > "$WORK/mpi.out" 2>&1
  status=$?
  echo "train_quick_mpirun.sh (2 ranks, 40 + 10 iterations): $((SECONDS - t)) s"
  MLOG=examples/cifar10/cifar10_quick_mpirun.log
  if [ "$status" -eq 0 ] &&
     [ "$(grep -c "Distributed training: 2 ranks" "$MLOG")" -eq 2 ] &&
     grep -q "Resuming from examples/cifar10/mpi_quick_iter_40.solverstate" \
       "$MLOG" && [ -f examples/cifar10/mpi_quick_iter_50.caffemodel ]; then
    ok "train_quick_mpirun.sh: both stages on 2 ranks, stage 2 resumed"
  else
    fail "train_quick_mpirun.sh: exit status $status"; tail -20 "$WORK/mpi.out"
  fi
  accuracy=$(last_accuracy "$MLOG")
  if awk -v a="${accuracy:-0}" -v m="$ACCURACY_MIN" 'BEGIN { exit !(a > m) }'
  then ok "2 ranks: test accuracy $accuracy is above $ACCURACY_MIN"
  else fail "2 ranks: test accuracy '$accuracy' is not above $ACCURACY_MIN"; fi

  make_solvers 10 5 examples/cifar10/psd_quick quick
  t=$SECONDS
  BUILD_DIR="$BUILD_DIR" PSD_MPIRUN_ARGS="$MPIEXEC_ARGS" \
    PSD_OUTPUT=examples/cifar10/psd_logs PATH="$(dirname "$MPIEXEC"):$PATH" \
    timeout 300 "$EX/train_quick_psd_run.sh" > "$WORK/psd.out" 2>&1
  status=$?
  echo "train_quick_psd_run.sh (2 ranks, 10 + 5 iterations): $((SECONDS - t)) s"
  PLOG=examples/cifar10/cifar10_quick_psd_run.log
  if [ "$status" -eq 0 ] && [ -f examples/cifar10/psd_quick_iter_15.caffemodel ] &&
     grep -q "Resuming from examples/cifar10/psd_quick_iter_10.solverstate" \
       "$PLOG"; then
    ok "train_quick_psd_run.sh: both stages via psd_run, stage 2 resumed"
  else
    fail "train_quick_psd_run.sh: exit status $status"; tail -20 "$WORK/psd.out"
  fi
  # Every rank's log is kept (psd_run -o), one folder per stage.
  logs=$(grep -l "Distributed training: 2 ranks" \
         examples/cifar10/psd_logs/poseidon_log_*/* 2> /dev/null | wc -l)
  [ "$logs" -ge 2 ] &&
    ok "psd_run kept the ranks' logs ($logs with the 2-rank start-up line)" ||
    { fail "no rank logs with 'Distributed training: 2 ranks' under" \
           "examples/cifar10/psd_logs:"; ls -R examples/cifar10/psd_logs; }
fi
cd "$WORK" || exit 1
echo "total: $((SECONDS - start)) s"
finish
