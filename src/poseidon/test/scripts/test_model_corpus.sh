#!/usr/bin/env bash
# The corpus test: every net prototxt in models/ and examples/ parses, builds
# and runs one forward/backward through `poseidon_train time`. Nets with data
# layers (train_val, train_test) run with them swapped for DummyData by
# scripts/dummy_data_net at a small batch, in the TRAIN phase and (for the
# nets of up to ~1 GFLOP per image) the TEST phase too; deploy nets run at
# batch 1 with force_backward. VGG19-22K's nets are only swapped and parsed
# (their 229M parameters make a run take minutes); the C++ test
# ModelTest.*vgg19_22k builds them.
# Usage: test_model_corpus.sh SOURCE_DIR BUILD_DIR
set -uo pipefail
source "$(cd "$(dirname "$0")" && pwd)/test_lib.sh"
SOURCE_DIR=$(cd "$1" && pwd)
BUILD_DIR=$(cd "$2" && pwd)
TOOL="$SOURCE_DIR/scripts/dummy_data_net"
TRAIN="$BUILD_DIR/tools/poseidon_train"
make_workdir poseidon_corpus
cd "$SOURCE_DIR"
SKIP_RUN="vgg19_22k"
DATA_TYPES='"(Data|ImageData|MemoryData|HDF5Data|WindowData)"'
DATA_TYPES+='|(DATA|IMAGE_DATA|MEMORY_DATA|HDF5_DATA|WINDOW_DATA)$'
# Nets whose TEST phase is run as well (the big ones differ from TRAIN only
# in their data layer and accuracies, which the small ones exercise).
SMALL="lenet|cifar10|fashion_mnist|alexnet|caffenet"

# run NAME MODEL [FLAGS...]: one forward/backward; wants per-layer lines.
run() {
  local name=$1 model=$2
  shift 2
  local start=$SECONDS
  if "$TRAIN" time --model="$model" --iterations=1 "$@" > "$WORK/log" 2>&1 &&
     grep -q "backward: " "$WORK/log" &&
     grep -q "Average Forward-Backward" "$WORK/log"; then
    ok "$name ($((SECONDS - start)) s)"
  else
    fail "$name"; grep -E "Error|error|Check" "$WORK/log" | tail -5
  fi
}

# The stored image shape of a net's dataset, for uncropped Data layers.
data_shape() {
  case $1 in
    *lenet*|*fashion_mnist*) echo 1,28,28 ;;
    *cifar10*) echo 3,32,32 ;;
    *inception_v3*) echo 3,320,320 ;;
    *) echo 3,256,256 ;;
  esac
}

nets=$(find models examples -name '*.prototxt' ! -name '*solver*' | sort)
count=0
for net in $nets; do
  count=$((count + 1))
  base=$(echo "$net" | tr '/' '_')
  out="$WORK/$base"
  if grep -Eq "type: ($DATA_TYPES)" "$net"; then
    case $net in *alexnet*|*caffenet*|*vgg*|*inception*|*resnet*|*googlenet*)
      batch=1 ;; *) batch=2 ;; esac
    if ! "$TOOL" --batch "$batch" --data-shape "$(data_shape "$net")" \
        "$net" -o "$out" 2> "$WORK/err"; then
      fail "$net: dummy_data_net"; cat "$WORK/err"
      continue
    fi
    if echo "$net" | grep -Eq "$SKIP_RUN"; then
      echo "skip $net: swapped only (too slow to run here)"; continue
    fi
    run "$net TRAIN" "$out" --phase=TRAIN
    if echo "$net" | grep -Eq "$SMALL"; then
      run "$net TEST" "$out" --phase=TEST
    fi
  else
    if echo "$net" | grep -Eq "$SKIP_RUN"; then
      echo "skip $net: too slow to run here"; continue
    fi
    # Batch 1: the first dim of the Input shape (or of input_dim).
    { echo "force_backward: true"
      sed -E '0,/(dim|input_dim): [0-9]+/s//\1: 1/' "$net"; } > "$out"
    run "$net" "$out"
  fi
done

echo "$count nets found"
[ "$count" -gt 0 ] || fail "no net prototxt under models/ or examples/"
finish
