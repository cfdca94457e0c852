#!/usr/bin/env bash
# The first thing a machine with a GPU runs: every GPU test, LeNet trained on
# Fashion-MNIST on the GPU (test accuracy must reach 0.90), the GPU benchmark
# against PyTorch, and a summary.
#
#   scripts/gpu_check.sh               build with CUDA here, then run the
#                                      checks here (a machine with a GPU and
#                                      Poseidon's build dependencies)
#   scripts/gpu_check.sh pack          build with CUDA here (OpenCV, HDF5,
#                                      oneDNN and MPI off) and pack the
#                                      binaries, the libraries a bare CUDA
#                                      machine lacks and the Fashion-MNIST
#                                      files into
#                                      .gpu_pack/poseidon_gpu.tar.xz
#   scripts/gpu_check.sh run [ARCHIVE] on the GPU machine: unpack ARCHIVE
#                                      (default .gpu_pack/poseidon_gpu.tar.xz)
#                                      and run the checks with its binaries
#
# Environment: BENCH=0 skips the benchmark; BENCH_ARGS are passed to
# scripts/bench/bench_gpu.py; LENET_ITERS (default 10000) shortens training;
# OUT (if set) receives the logs and the summary.
set -uo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)
PACK_DIR=.gpu_pack
ARCHIVE=$PACK_DIR/poseidon_gpu.tar.xz

# --- pack: build here, bundle what the GPU machine needs ---------------------
pack() {
  set -e
  local build=${BUILD_DIR:-build-gpu-pack}
  bash scripts/install_deps.sh --tests
  cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release -DUSE_CUDA=ON \
    -DUSE_CUDNN=ON -DUSE_OPENCV=OFF -DUSE_HDF5=OFF -DUSE_MPI=OFF \
    -DUSE_DNNL=OFF -DBUILD_python=OFF >/dev/null
  cmake --build "$build" -j "${JOBS:-$(nproc)}"
  local stage
  stage=$(mktemp -d)/poseidon_gpu
  mkdir -p "$stage"/{bin,lib,test,data}
  cp "$build"/tools/poseidon_train "$build"/tools/convert_mnist_data "$stage/bin/"
  cp "$build"/test/poseidon_tests "$stage/test/"
  cp "$build"/lib/libposeidon.so "$stage/lib/"
  # Every shared library the binaries load, except the C/C++ runtime (newer
  # on the GPU machine) and CUDA's own, NCCL included (218 MB; the GPU
  # machine has them, NCCL in PyTorch's nvidia packages).
  local lib
  for bin in "$stage"/bin/* "$stage"/test/* "$stage"/lib/libposeidon.so; do
    ldd "$bin" | awk '/=> \// {print $3}'
  done | sort -u | while read -r lib; do
    case "$(basename "$lib")" in
      libc.so*|libm.so*|libpthread.so*|libdl.so*|librt.so*|ld-linux*|\
      libstdc++.so*|libgcc_s.so*|libcuda.so*|libcudart.so*|libcublas*|\
      libcurand.so*|libcudnn*|libnvrtc*|libnvJitLink*|libnccl*|libposeidon.so) ;;
      *) cp -L "$lib" "$stage/lib/" ;;
    esac
  done
  cp /usr/share/datasets/fashion-mnist/*.gz "$stage/data/"
  mkdir -p "$PACK_DIR"
  tar -C "$(dirname "$stage")" -cJf "$ARCHIVE" poseidon_gpu
  rm -rf "$(dirname "$stage")"
  local size
  size=$(stat -c %s "$ARCHIVE")
  echo "gpu_check: packed $ARCHIVE ($((size / 1048576)) MiB)"
  if [ "$size" -gt $((60 * 1048576)) ]; then
    echo "gpu_check: the archive is over 60 MiB; it may not travel" >&2
    exit 1
  fi
}

# --- the checks ---------------------------------------------------------------
# Adds the directories holding CUDA's and cuDNN's libraries (system CUDA, or
# the nvidia-* wheels PyTorch brings) to LD_LIBRARY_PATH.
find_cuda_libs() {
  local dirs="" d
  for d in /usr/local/cuda/lib64 /usr/local/cuda/lib /usr/local/nvidia/lib64; do
    [ -d "$d" ] && dirs="$dirs:$d"
  done
  local site
  for site in $(python3 -c 'import site; print(" ".join(site.getsitepackages()))' 2>/dev/null); do
    for d in "$site"/nvidia/*/lib "$site"/nvidia/cu*/lib "$site"/torch/lib; do
      [ -d "$d" ] && dirs="$dirs:$d"
    done
  done
  export LD_LIBRARY_PATH="${LD_LIBRARY_PATH:-}${dirs}"
}

SUMMARY=()
STATUS=0
note() { SUMMARY+=("$1"); echo "gpu_check: $1"; }

checks() {
  local bin=$1 tests=$2 data_src=$3
  local out=${OUT:-$(mktemp -d)}
  mkdir -p "$out"
  nvidia-smi -L 2>/dev/null || true
  "$bin/poseidon_train" device_query 2>&1 | tee "$out/device_query.log"

  # 1. Every GPU test: the typed GPU variants and the CPU/GPU agreement
  #    tests. POSEIDON_REQUIRE_GPU=1 makes "no GPU" a failure, not a skip.
  echo "=== GPU tests ==="
  POSEIDON_REQUIRE_GPU=1 POSEIDON_SOURCE_DIR=$ROOT \
    "$tests" --gtest_filter='*GPU*' --gtest_brief=1 2>&1 | tee "$out/gpu_tests.log"
  local rc=${PIPESTATUS[0]}
  local line
  line=$(grep -E '^\[==========\] [0-9]+ tests? from' "$out/gpu_tests.log" | tail -1)
  local failed
  failed=$(grep -c '^\[  FAILED  \] .*\.' "$out/gpu_tests.log")
  if [ "$rc" -eq 0 ]; then
    note "GPU tests: passed ($line)"
  else
    note "GPU tests: FAILED ($failed failed; $line)"
    STATUS=1
  fi
  # The CPU tests of the same binary, for completeness.
  POSEIDON_SOURCE_DIR=$ROOT "$tests" --gtest_filter='-*GPU*' --gtest_brief=1 \
    >"$out/cpu_tests.log" 2>&1
  if [ $? -eq 0 ]; then note "CPU tests of the CUDA build: passed"; else
    note "CPU tests of the CUDA build: FAILED (see cpu_tests.log)"; STATUS=1; fi

  # 2. LeNet on Fashion-MNIST on the GPU.
  echo "=== LeNet on Fashion-MNIST, GPU ==="
  local work
  work=$(mktemp -d)
  "$bin/convert_mnist_data" "$data_src/train-images-idx3-ubyte.gz" \
    "$data_src/train-labels-idx1-ubyte.gz" "$work/train_lmdb" >/dev/null 2>&1 &&
  "$bin/convert_mnist_data" "$data_src/t10k-images-idx3-ubyte.gz" \
    "$data_src/t10k-labels-idx1-ubyte.gz" "$work/test_lmdb" >/dev/null 2>&1
  if [ $? -ne 0 ]; then note "LeNet: data conversion FAILED"; STATUS=1; else
    sed -e "s#data/fashion_mnist/fashion_mnist_train_lmdb#$work/train_lmdb#" \
        -e "s#data/fashion_mnist/fashion_mnist_test_lmdb#$work/test_lmdb#" \
        examples/fashion_mnist/lenet_train_test.prototxt >"$work/net.prototxt"
    sed -e "s#^net:.*#net: \"$work/net.prototxt\"#" \
        -e "s#^snapshot_prefix:.*#snapshot_prefix: \"$work/lenet\"#" \
        -e "s#^max_iter:.*#max_iter: ${LENET_ITERS:-10000}#" \
        examples/fashion_mnist/lenet_solver.prototxt >"$work/solver.prototxt"
    local start end
    start=$(date +%s.%N)
    "$bin/poseidon_train" train --solver="$work/solver.prototxt" --gpu=0 \
      >"$out/lenet_gpu.log" 2>&1
    rc=$?
    end=$(date +%s.%N)
    local acc
    acc=$(grep -E 'Test net output #[0-9]+: accuracy = ' "$out/lenet_gpu.log" |
          tail -1 | sed -E 's/.*accuracy = ([0-9.eE+-]+).*/\1/')
    tail -n 5 "$out/lenet_gpu.log"
    if [ "$rc" -eq 0 ] && [ -n "$acc" ] &&
       python3 -c "import sys; sys.exit(0 if float('$acc') >= 0.90 else 1)"; then
      note "LeNet on the GPU: test accuracy $acc (>= 0.90), $(python3 -c "print(f'{$end-$start:.1f}')") s"
    else
      note "LeNet on the GPU: FAILED (exit $rc, final accuracy '${acc:-none}')"
      STATUS=1
    fi
  fi
  rm -rf "$work"

  # 3. The benchmark.
  if [ "${BENCH:-1}" != 0 ]; then
    echo "=== GPU benchmark ==="
    python3 scripts/bench/bench_gpu.py --poseidon-train "$bin/poseidon_train" \
      ${BENCH_ARGS:-} 2>&1 | tee "$out/bench_gpu.log"
    if [ "${PIPESTATUS[0]}" -eq 0 ]; then note "benchmark: done (bench_gpu.log)";
    else note "benchmark: FAILED"; STATUS=1; fi
  fi

  echo "=== gpu_check summary ==="
  printf '%s\n' "${SUMMARY[@]}" | tee "$out/summary.txt"
  [ "$STATUS" -eq 0 ] && echo "gpu_check: all passed" || echo "gpu_check: FAILED"
  return "$STATUS"
}

case "${1:-}" in
  pack)
    pack
    ;;
  run)
    archive=${2:-$ARCHIVE}
    dest=$(mktemp -d)
    tar -C "$dest" -xJf "$archive" || { echo "gpu_check: cannot unpack $archive"; exit 1; }
    find_cuda_libs
    export LD_LIBRARY_PATH="$dest/poseidon_gpu/lib:$LD_LIBRARY_PATH"
    checks "$dest/poseidon_gpu/bin" "$dest/poseidon_gpu/test/poseidon_tests" \
      "$dest/poseidon_gpu/data"
    exit $?
    ;;
  "")
    build=${BUILD_DIR:-build-cuda}
    bash scripts/install_deps.sh --tests || exit 1
    BUILD_DIR=$build bash scripts/build.sh -DUSE_CUDA=ON -DUSE_CUDNN=ON \
      -DBUILD_TESTS=ON || exit 1
    find_cuda_libs
    checks "$build/tools" "$build/test/poseidon_tests" \
      /usr/share/datasets/fashion-mnist
    exit $?
    ;;
  *)
    sed -n '2,22p' "$0"
    exit 2
    ;;
esac
