#!/usr/bin/env bash
# Installs the Debian packages Poseidon builds and runs with. Idempotent: when
# everything is present it does nothing (and needs no network).
set -euo pipefail

PACKAGES=(
  build-essential cmake pkg-config ccache
  protobuf-compiler libprotobuf-dev
  libgoogle-glog-dev libgflags-dev
  liblmdb-dev lmdb-utils
  libleveldb-dev        # the LevelDB backend of util/db (Caffe's default)
  libopenblas-dev
  # oneDNN (the opt-in float GEMM, POSEIDON_SGEMM=onednn; util/sgemm.hpp)
  # and BLIS, which scripts/bench/bench_gemm compares with OpenBLAS
  libdnnl-dev libblis-dev
  openmpi-bin libopenmpi-dev
  libopencv-core-dev libopencv-imgproc-dev libopencv-imgcodecs-dev
  zlib1g-dev
  libhdf5-dev
  libgtest-dev
  graphviz
  dataset-fashion-mnist
  octave octave-dev     # octave-cli and mkoctfile for matlab/ (matcaffe)
  # scripts/run_hardening.sh: sanitizer builds and libFuzzer harnesses
  # (clang's runtimes, libFuzzer included, are in libclang-rt-dev; llvm
  # has llvm-symbolizer for readable sanitizer reports)
  clang libclang-rt-dev llvm
  # scripts/netns_cluster (multi-host tests in network namespaces): ip and
  # tc, and iptables for link faults where the kernel has no netem qdisc
  iproute2 iptables
)

missing=()
for p in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" \
    || missing+=("$p")
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "install_deps: all ${#PACKAGES[@]} packages present"
  exit 0
fi

echo "install_deps: installing ${missing[*]}"
SUDO=""
[ "$(id -u)" -ne 0 ] && SUDO="sudo"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
