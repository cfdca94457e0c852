#!/usr/bin/env bash
# Installs the Debian packages Poseidon builds and runs with. Idempotent: when
# everything is present it does nothing (and needs no network).
#
#   bash scripts/install_deps.sh           what the library, the tools and the
#                                          demo need (scripts/demo.sh)
#   bash scripts/install_deps.sh --tests   that, plus what the test command
#                                          needs (scripts/run_tests.sh):
#                                          GoogleTest, Octave, clang and the
#                                          sanitizer runtimes, Slurm, ...
set -euo pipefail

# The library, the tools and the demo's data.
PACKAGES=(
  build-essential cmake pkg-config ccache
  protobuf-compiler libprotobuf-dev
  libgoogle-glog-dev libgflags-dev
  liblmdb-dev
  libleveldb-dev        # the LevelDB backend of util/db (Caffe's default)
  libopenblas-dev
  # oneDNN: the float GEMM on AVX-512 CPUs (util/sgemm.hpp)
  libdnnl-dev
  openmpi-bin libopenmpi-dev
  libopencv-core-dev libopencv-imgproc-dev libopencv-imgcodecs-dev
  zlib1g-dev
  libhdf5-dev
  dataset-fashion-mnist
)

TEST_PACKAGES=(
  libgtest-dev
  lmdb-utils            # mdb_stat/mdb_dump in the tool tests
  graphviz              # dot, for caffe.draw's tests
  libblis-dev           # scripts/bench/bench_gemm compares it with OpenBLAS
  octave octave-dev     # octave-cli and mkoctfile for matlab/ (matcaffe)
  # scripts/run_hardening.sh: sanitizer builds and libFuzzer harnesses
  # (clang's runtimes, libFuzzer included, are in libclang-rt-dev; llvm
  # has llvm-symbolizer for readable sanitizer reports)
  clang libclang-rt-dev llvm
  # scripts/netns_cluster (multi-host tests in network namespaces): ip and
  # tc, and iptables for link faults where the kernel has no netem qdisc
  iproute2 iptables
  # the packaging test (scripts/test_packaging.sh): the .deb is installed
  # with apt and inspected with dpkg-deb; python3-venv for the wheel's venv
  dpkg-dev file python3-venv
  # the Slurm test (scripts/test_slurm.sh): a one-node cluster
  slurmctld slurmd slurm-client munge
)

case "${1:-}" in
  "") ;;
  --tests) PACKAGES+=("${TEST_PACKAGES[@]}") ;;
  *)
    echo "usage: $0 [--tests]" >&2
    exit 2
    ;;
esac

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
