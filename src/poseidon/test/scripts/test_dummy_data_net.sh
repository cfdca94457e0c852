#!/usr/bin/env bash
# scripts/dummy_data_net: every data layer type becomes DummyData with the
# right shapes, the rest of the net is kept, missing shapes are errors (exit
# 1 naming the flag), the schema-free reader agrees with protobuf's where
# protobuf is installed, and a swapped net runs under `poseidon_train time`.
# Usage: test_dummy_data_net.sh SOURCE_DIR BUILD_DIR
set -uo pipefail
source "$(cd "$(dirname "$0")" && pwd)/test_lib.sh"
SOURCE_DIR=$(cd "$1" && pwd)
BUILD_DIR=$(cd "$2" && pwd)
TOOL="$SOURCE_DIR/scripts/dummy_data_net"
TRAIN="$BUILD_DIR/tools/poseidon_train"
enter_workdir poseidon_dummy_net

# dims FILE: the dim values of every shape, one shape per line.
dims() {
  python3 - "$1" <<'PY'
import re, sys
text = open(sys.argv[1]).read()
for block in re.findall(r"shape \{([^}]*)\}", text):
    print(" ".join(re.findall(r"dim: (\d+)", block)))
PY
}

# check_shapes NAME FILE WANTED_SHAPES: FILE has no data layer left, and its shapes
# (one per line) are WANTED_SHAPES.
check_shapes() {
  local name=$1 file=$2 wanted=$3
  local types='"(Data|ImageData|MemoryData|HDF5Data|WindowData)"|DATA$'
  if grep -Eq "type: ($types)" "$file"; then
    fail "$name: a data layer is left"; return
  fi
  local got
  got=$(dims "$file")
  if [ "$got" != "$wanted" ]; then
    fail "$name: shapes"; echo "  got:    $got" | head -4
    echo "  wanted: $wanted"; return
  fi
  ok "$name"
}

# 1. AlexNet's train_val: two Data layers (TRAIN 256, TEST 50), crop 227.
"$TOOL" "$SOURCE_DIR/models/alexnet/train_val.prototxt" -o alexnet.pt \
  2> /dev/null
check_shapes "Data with crop_size" alexnet.pt "256 3 227 227
256
50 3 227 227
50"
if [ "$(grep -c 'type: "DummyData"' alexnet.pt)" = 2 ] &&
   [ "$(grep -c 'phase: TRAIN' alexnet.pt)" = 1 ] &&
   [ "$(grep -c 'name: "conv5"' alexnet.pt)" = 1 ] &&
   [ "$(grep -c 'group: 2' alexnet.pt)" = 3 ] &&
   ! grep -Eq '^  (transform|data)_param|mean_file' alexnet.pt; then
  ok "phases and other layers kept, data parameters dropped"
else
  fail "phases and other layers kept, data parameters dropped"
fi

# 2. --batch, --data-shape (channels from the flag, size from the crop).
"$TOOL" --batch 2 --data-shape 1,256,256 \
  "$SOURCE_DIR/models/alexnet/train_val.prototxt" > batch.pt
check_shapes "--batch and --data-shape" batch.pt "2 1 227 227
2
2 1 227 227
2"

# 3. Uncropped Data needs --data-shape: exit 1, the flag named.
"$TOOL" "$SOURCE_DIR/models/lenet/train_val.prototxt" > out.pt 2> err.txt
rc=$?
if [ "$rc" = 1 ] && grep -q -- "--data-shape" err.txt && [ ! -s out.pt ]; then
  ok "missing image shape: $(head -1 err.txt)"
else
  fail "missing image shape (exit $rc)"; cat err.txt
fi
"$TOOL" --data-shape 1,28,28 "$SOURCE_DIR/models/lenet/train_val.prototxt" \
  -o lenet.pt
check_shapes "uncropped Data with --data-shape" lenet.pt "64 1 28 28
64
100 1 28 28
100"

# 4. The other data layer types, a V1 net, and in-line syntax variants.
cat > others.prototxt <<'NET'
name: "others"  # a comment
layer { name: "img" type: "ImageData" top: "img" top: "img_label"
  image_data_param { source: "list.txt" batch_size: 5 new_height: 40
                     new_width: 30 is_color: false } }
layer < name: 'mem' type: "MemoryData" top: "mem" top: "mem_label";
  memory_data_param { batch_size: 4, channels: 2, height: 6, width: 7 } >
layer { name: "h5" type: "HDF5Data" top: "x" top: "y"
  hdf5_data_param { source: "files.txt" batch_size: 3 } }
layer { name: "win" type: "WindowData" top: "win" top: "win_label"
  transform_param { crop_size: 9 mirror: true }
  window_data_param { source: "windows.txt" batch_size: 8 } }
layer { name: "crop_img" type: "ImageData" top: "c" top: "c_label"
  transform_param { crop_size: 11 } image_data_param { source: "l" } }
layer { name: "ip" type: "InnerProduct" bottom: "img" top: "ip"
  inner_product_param { num_output: 3 } param: [{lr_mult: 1}, {lr_mult: 2}] }
NET
"$TOOL" --top-shape x=10 --top-shape y=2,2 others.prototxt -o others.pt
check_shapes "ImageData, MemoryData, HDF5Data, WindowData" others.pt "5 1 40 30
5
4 2 6 7
4
3 10
3 2 2
8 3 9 9
8
1 3 11 11
1"
if grep -q "name: 'mem'" others.pt && grep -q "lr_mult: 2" others.pt; then
  ok "names and list-syntax fields kept"
else
  fail "names and list-syntax fields kept"
fi
"$TOOL" others.prototxt > /dev/null 2> err.txt
if [ $? = 1 ] && grep -q "layer 'h5'.*--data-shape" err.txt; then
  ok "HDF5Data without shapes: $(head -1 err.txt)"
else
  fail "HDF5Data without shapes"; cat err.txt
fi
"$TOOL" --data-shape 1,28,28 --batch 2 \
  "$SOURCE_DIR/examples/fashion_mnist/lenet_v1_train_test.prototxt" -o v1.pt
if grep -q "type: DUMMY_DATA" v1.pt && ! grep -q "type: DATA" v1.pt; then
  check_shapes "V1 net" v1.pt "2 1 28 28
2
2 1 28 28
2"
else
  fail "V1 net: no DUMMY_DATA"
fi

# 5. Bad input: unterminated block, bad flags.
printf 'layer { name: "d" type: "Data"\n' > broken.prototxt
"$TOOL" broken.prototxt > /dev/null 2> err.txt
if [ $? = 1 ] && grep -q "end of file" err.txt; then
  ok "truncated net: $(head -1 err.txt)"
else
  fail "truncated net"; cat err.txt
fi
"$TOOL" --data-shape 3,x,4 others.prototxt > /dev/null 2> err.txt
if [ $? = 1 ] && grep -q "data-shape" err.txt; then
  ok "bad --data-shape"
else
  fail "bad --data-shape"; cat err.txt
fi

# 6. With protobuf: the same output as without, and schema errors caught.
if command -v protoc > /dev/null &&
   python3 -c "import google.protobuf" 2> /dev/null; then
  mkdir pb
  protoc --proto_path="$SOURCE_DIR/src/poseidon/proto" --python_out=pb \
    caffe.proto
  if python3 -c "import sys; sys.path.insert(0, 'pb'); import caffe_pb2" \
      2> /dev/null; then
    "$TOOL" --proto-dir pb --top-shape x=10 --top-shape y=2,2 \
      others.prototxt -o others_pb.pt
    if cmp -s others.pt others_pb.pt; then
      ok "schema check: same output"
    else
      fail "schema check: output differs"
    fi
    printf 'layer { name: "d" type: "Data" top: "d" colour: 3 }\n' > bad.pt
    "$TOOL" --proto-dir pb bad.pt > /dev/null 2> err.txt
    if [ $? = 1 ] && grep -q "colour" err.txt; then
      ok "schema check: unknown field named"
    else
      fail "schema check: unknown field"; cat err.txt
    fi
  else
    echo "skip schema check: generated caffe_pb2 does not import"
  fi
else
  echo "skip schema check: no protoc or protobuf Python package"
fi

# 7. The swapped nets run.
for net in lenet.pt v1.pt batch.pt; do
  if [ "$net" = batch.pt ]; then
    # Colour AlexNet at batch 2.
    "$TOOL" --batch 2 "$SOURCE_DIR/models/alexnet/train_val.prototxt" \
      -o batch.pt 2> /dev/null
  fi
  if "$TRAIN" time --model="$net" --iterations=1 > log.txt 2>&1 &&
     grep -q "Average Forward-Backward" log.txt; then
    ok "poseidon_train time on $net"
  else
    fail "poseidon_train time on $net"; tail -5 log.txt
  fi
done

finish
