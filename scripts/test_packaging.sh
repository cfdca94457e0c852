#!/usr/bin/env bash
# The packages as users install them (run by `scripts/run_tests.sh
# --packaging`; CI runs it): builds the Debian package and the wheel with
# scripts/package.sh, then for each way of installing checks what lands
# where and trains LeNet a few iterations on Fashion-MNIST from the installed
# copy, away from the source and build trees:
#   prefix  `cmake --install build-deb --prefix DIR` into a clean folder:
#           tools run from DIR/bin (relative RPATH), a C++ program builds
#           against it with find_package(Poseidon) and with pkg-config
#   deb     `apt-get install ./dist/poseidon_*.deb` (root only): tools on
#           PATH, `import caffe` in Debian's python3, the same C++ program;
#           removed again at the end
#   wheel   `pip install dist/poseidon_caffe-*.whl` into a fresh venv: the
#           console scripts poseidon_train and psd_run, `import caffe` and
#           `import poseidon`
# Usage: scripts/test_packaging.sh [BUILD_DIR]   (from anywhere)
# BUILD_DIR: the CMake tree both packages are built in (reconfigured for
# each: Debian's python3 for the .deb, the python3 on PATH for the wheel),
# e.g. the test suite's own build/ so that only the Python parts compile
# again; default: build-deb and build-wheel, as scripts/package.sh.
# Ends with "packaging: N passed, N failed"; exit 1 on any failure.
set -uo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
source "$ROOT/src/poseidon/test/scripts/test_lib.sh"
cd "$ROOT" || exit 1
make_workdir poseidon_packaging
DEB_BUILD_DIR=${1:-build-deb}
WHEEL_BUILD_DIR=${1:-build-wheel}
export DEB_BUILD_DIR WHEEL_BUILD_DIR
FMNIST=${DATA_SRC:-/usr/share/datasets/fashion-mnist}
DEB_INSTALLED=0
cleanup() {
  if [ "$DEB_INSTALLED" -eq 1 ]; then
    DEBIAN_FRONTEND=noninteractive apt-get purge -y -qq poseidon \
      > /dev/null 2>&1 || echo "packaging: could not remove the poseidon package"
  fi
  rm -rf "$WORK"
}
trap cleanup EXIT

finish_packaging() {
  echo "packaging: $passed passed, $failed failed"
  [ "$failed" -eq 0 ]
  exit $?
}

# ---- build both packages ---------------------------------------------------
if bash scripts/package.sh deb > "$WORK/deb_build.log" 2>&1; then
  ok "package.sh deb"
else
  fail "package.sh deb:"; tail -30 "$WORK/deb_build.log"; finish_packaging
fi
DEB=$(ls -t dist/poseidon_*.deb | head -1)

# ---- what the .deb holds and needs -----------------------------------------
dpkg-deb -c "$DEB" | awk '{print $6}' | sed 's|^\./|/|' > "$WORK/deb_files.txt"
for f in /usr/bin/poseidon_train /usr/bin/psd_run /usr/bin/convert_mnist_data \
         /usr/bin/compute_image_mean /usr/lib/libposeidon.so \
         /usr/lib/libposeidon_imgcodecs.so \
         /usr/include/poseidon/net.hpp /usr/include/poseidon/proto/caffe.pb.h \
         /usr/lib/cmake/Poseidon/PoseidonConfig.cmake \
         /usr/lib/pkgconfig/poseidon.pc \
         /usr/lib/python3/dist-packages/caffe/__init__.py \
         /usr/lib/python3/dist-packages/caffe/proto/caffe_pb2.py \
         /usr/lib/python3/dist-packages/poseidon/__init__.py; do
  expect_in "deb holds $f" "$f" "$WORK/deb_files.txt"
done
grep -q '/usr/lib/python3/dist-packages/caffe/_caffe.*\.so$' \
  "$WORK/deb_files.txt" && ok "deb holds the _caffe extension" ||
  fail "deb has no caffe/_caffe*.so"
dpkg-deb -f "$DEB" Depends > "$WORK/depends.txt"
for dep in libprotobuf libgoogle-glog libopenblas libopenmpi openmpi-bin \
           python3-numpy python3-protobuf liblmdb; do
  expect_in "deb depends on $dep" "$dep" "$WORK/depends.txt"
done

# train_lenet NAME TRAIN_COMMAND...: converts Fashion-MNIST's test split with
# the convert_mnist_data next to TRAIN_COMMAND's poseidon_train into a
# fresh folder and trains LeNet 30 iterations there (data and snapshots in
# that folder); checks the summary line and the snapshot.
train_lenet() {
  local name=$1 train=$2 convert=$3 dir="$WORK/train_$1"
  mkdir -p "$dir"
  "$convert" --backend=lmdb "$FMNIST/t10k-images-idx3-ubyte.gz" \
    "$FMNIST/t10k-labels-idx1-ubyte.gz" "$dir/fmnist_lmdb" \
    > "$dir/convert.log" 2>&1 ||
    { fail "$name: convert_mnist_data:"; tail -5 "$dir/convert.log"; return; }
  sed -e "s|data/fashion_mnist/fashion_mnist_t[a-z]*_lmdb|$dir/fmnist_lmdb|" \
    examples/fashion_mnist/lenet_train_test.prototxt > "$dir/net.prototxt"
  cat > "$dir/solver.prototxt" <<EOF
net: "$dir/net.prototxt"
test_iter: 5
test_interval: 30
base_lr: 0.01
momentum: 0.9
lr_policy: "fixed"
display: 10
max_iter: 30
snapshot_prefix: "$dir/lenet"
random_seed: 1
EOF
  (cd "$dir" && "$train" train --solver="$dir/solver.prototxt") \
    > "$dir/train.log" 2>&1
  local rc=$?
  if [ "$rc" -eq 0 ] && grep -q "Training done: 30 iterations" "$dir/train.log" &&
     [ -s "$dir/lenet_iter_30.caffemodel" ]; then
    ok "$name: LeNet trains ($(grep -o 'accuracy = [0-9.]*' "$dir/train.log" |
                                tail -1))"
  else
    fail "$name: training exit $rc:"; tail -15 "$dir/train.log"
  fi
}

# convert_png NAME TOOL: the installed convert_imageset reads a PNG
# through the image codecs plugin installed beside the library.
convert_png() {
  local name=$1 tool=$2 dir="$WORK/imageset_$1"
  mkdir -p "$dir"
  echo "lenet_curve.png 3" > "$dir/list.txt"
  if "$tool" --resize_height=16 --resize_width=16 "$ROOT/docs/images/" \
       "$dir/list.txt" "$dir/lmdb" > "$dir/log" 2>&1 &&
     grep -q "Wrote 1 images" "$dir/log"; then
    ok "$name: convert_imageset decodes a PNG (image codecs plugin)"
  else
    fail "$name: convert_imageset:"; tail -5 "$dir/log"
  fi
}

# A C++ program against the installed headers and library: builds a net
# from a prototxt string and runs it forward. cpp_consumer NAME CMAKE_ARGS...
cat > "$WORK/consumer.cpp" <<'EOF'
#include <iostream>
#include <string>
#include "poseidon/net.hpp"
#include "poseidon/util/io.hpp"

int main() {
  poseidon::NetParameter param;
  const std::string text =
      "name: 'tiny' "
      "layer { name: 'data' type: 'Input' top: 'data' "
      "        input_param { shape { dim: 2 dim: 3 } } } "
      "layer { name: 'ip' type: 'InnerProduct' bottom: 'data' top: 'ip' "
      "        inner_product_param { num_output: 4 "
      "          weight_filler { type: 'constant' value: 0.5 } } }";
  poseidon::ReadProtoFromTextString(text, "tiny net", &param);
  poseidon::Net<float> net(param);
  float* data = net.blob_by_name("data")->mutable_cpu_data();
  for (int i = 0; i < 6; ++i) data[i] = 1.0f;
  net.Forward();
  // Every output is 3 * 0.5 = 1.5.
  std::cout << "ip[0] = " << net.blob_by_name("ip")->cpu_data()[0] << "\n";
  return net.blob_by_name("ip")->cpu_data()[0] == 1.5f ? 0 : 1;
}
EOF
cat > "$WORK/CMakeLists.txt" <<'EOF'
cmake_minimum_required(VERSION 3.18)
project(consumer LANGUAGES CXX)
find_package(Poseidon 0.1 REQUIRED)
add_executable(consumer consumer.cpp)
target_link_libraries(consumer PRIVATE Poseidon::poseidon)
EOF
cpp_consumer() {
  local name=$1 dir="$WORK/consumer_$1"
  shift
  if cmake -S "$WORK" -B "$dir" "$@" > "$WORK/$name.cmake.log" 2>&1 &&
     cmake --build "$dir" >> "$WORK/$name.cmake.log" 2>&1 &&
     GLOG_minloglevel=1 "$dir/consumer" > "$WORK/$name.run.log" 2>&1; then
    ok "$name: find_package(Poseidon) program builds and runs ($(cat "$WORK/$name.run.log"))"
  else
    fail "$name: find_package(Poseidon) consumer:"; tail -15 "$WORK/$name.cmake.log"
    cat "$WORK/$name.run.log" 2>/dev/null
  fi
}

# ---- a clean prefix --------------------------------------------------------
PREFIX="$WORK/prefix"
if cmake --install "$DEB_BUILD_DIR" --prefix "$PREFIX" > "$WORK/install.log" 2>&1; then
  ok "cmake --install into a clean prefix"
else
  fail "cmake --install:"; tail -10 "$WORK/install.log"
fi
if [ -e "$PREFIX/caffe" ] || [ -e "$PREFIX/bin/_psd_run.py" ]; then
  fail "prefix: the wheel's layout leaked into a plain install"
else ok "prefix: no wheel-only files"; fi
"$PREFIX/bin/poseidon_train" --version > "$WORK/version.txt" 2>&1
expect_in "prefix: poseidon_train --version" "0.1.0" "$WORK/version.txt"
ldd "$PREFIX/bin/poseidon_train" | grep libposeidon > "$WORK/ldd.txt"
expect_in "prefix: tools load the prefix's libposeidon" \
  "$PREFIX/bin/../lib/libposeidon.so" "$WORK/ldd.txt"
train_lenet prefix "$PREFIX/bin/poseidon_train" "$PREFIX/bin/convert_mnist_data"
convert_png prefix "$PREFIX/bin/convert_imageset"
cpp_consumer prefix -DCMAKE_PREFIX_PATH="$PREFIX"
if g++ -o "$WORK/consumer_pc" "$WORK/consumer.cpp" \
     $(PKG_CONFIG_PATH="$PREFIX/lib/pkgconfig" pkg-config --cflags --libs poseidon) \
     > "$WORK/pc.log" 2>&1 && "$WORK/consumer_pc" > "$WORK/pc.run" 2>&1; then
  ok "prefix: pkg-config poseidon program builds and runs"
else
  fail "prefix: pkg-config consumer:"; tail -10 "$WORK/pc.log"
fi
PYTHONPATH="$PREFIX/lib/python3/dist-packages" /usr/bin/python3 -c \
  'import caffe, poseidon, sys; assert poseidon is caffe; print(caffe.__file__)' \
  > "$WORK/py.txt" 2>&1
expect_in "prefix: import caffe (Debian's python3)" "$PREFIX/lib/python3/dist-packages/caffe" \
  "$WORK/py.txt"

# ---- the Debian package ----------------------------------------------------
if [ "$(id -u)" -ne 0 ]; then
  echo "packaging: not root, so the .deb is not installed (apt needs root)"
elif dpkg-query -W -f='${Status}' poseidon 2>/dev/null | grep -q "ok installed"; then
  fail "a poseidon package is installed already; not touching it"
else
  if DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "./$DEB" \
      > "$WORK/apt.log" 2>&1; then
    DEB_INSTALLED=1
    ok "apt-get install ./$DEB"
  else
    fail "apt-get install ./$DEB:"; tail -10 "$WORK/apt.log"
  fi
  if [ "$DEB_INSTALLED" -eq 1 ]; then
    for tool in poseidon_train psd_run convert_mnist_data compute_image_mean; do
      [ "$(command -v $tool)" = "/usr/bin/$tool" ] && ok "deb: $tool on PATH" ||
        fail "deb: $tool is '$(command -v $tool)'"
    done
    train_lenet deb /usr/bin/poseidon_train /usr/bin/convert_mnist_data
    convert_png deb /usr/bin/convert_imageset
    (cd "$WORK" && /usr/bin/python3 -c \
      'import caffe, poseidon; print(caffe.__file__); n = caffe.Net("'"$ROOT"'/models/lenet/deploy.prototxt", caffe.TEST); print(n.forward()["prob"].shape)') \
      > "$WORK/deb_py.txt" 2>&1
    expect_in "deb: import caffe from dist-packages" \
      "/usr/lib/python3/dist-packages/caffe/__init__.py" "$WORK/deb_py.txt"
    expect_in "deb: pycaffe runs a net" "(64, 10)" "$WORK/deb_py.txt"
    psd_run --dry-run -c examples/cluster/config.json \
      "poseidon_train train --solver=s.prototxt" > "$WORK/psd.txt" 2>&1
    expect_in "deb: psd_run --dry-run" "mpirun " "$WORK/psd.txt"
    cpp_consumer deb
  fi
fi

# ---- the wheel in a fresh venv ---------------------------------------------
# (After the prefix install: with one BUILD_DIR the wheel reconfigures it.)
WHEEL=""
if bash scripts/package.sh wheel > "$WORK/wheel_build.log" 2>&1; then
  ok "package.sh wheel"
  WHEEL=$(ls -t dist/poseidon_caffe-*.whl | head -1)
else
  fail "package.sh wheel:"; tail -30 "$WORK/wheel_build.log"
fi
if [ -n "$WHEEL" ]; then
  VENV="$WORK/venv"
  if python3 -m venv "$VENV" > "$WORK/venv.log" 2>&1 &&
     "$VENV/bin/pip" install -q "$WHEEL" >> "$WORK/venv.log" 2>&1; then
    ok "pip install $(basename "$WHEEL") into a fresh venv"
    for tool in poseidon_train psd_run convert_mnist_data; do
      [ -x "$VENV/bin/$tool" ] && ok "wheel: console script $tool" ||
        fail "wheel: no $VENV/bin/$tool"
    done
    "$VENV/bin/poseidon_train" --version > "$WORK/wversion.txt" 2>&1
    expect_in "wheel: poseidon_train --version" "0.1.0" "$WORK/wversion.txt"
    train_lenet wheel "$VENV/bin/poseidon_train" "$VENV/bin/convert_mnist_data"
    convert_png wheel "$VENV/bin/convert_imageset"
    "$VENV/bin/psd_run" --dry-run -c examples/cluster/config.json \
      "poseidon_train train --solver=s.prototxt" > "$WORK/wpsd.txt" 2>&1
    expect_in "wheel: psd_run --dry-run" "mpirun " "$WORK/wpsd.txt"
    (cd "$WORK" && "$VENV/bin/python" -c \
      'import caffe, poseidon; assert poseidon is caffe; print(caffe.__file__); n = caffe.Net("'"$ROOT"'/models/lenet/deploy.prototxt", caffe.TEST); print(n.forward()["prob"].shape)') \
      > "$WORK/wpy.txt" 2>&1
    expect_in "wheel: import caffe from the venv" "$VENV/lib/" "$WORK/wpy.txt"
    expect_in "wheel: pycaffe runs a net" "(64, 10)" "$WORK/wpy.txt"
  else
    fail "pip install the wheel:"; tail -10 "$WORK/venv.log"
  fi
fi

finish_packaging
