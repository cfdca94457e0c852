#!/usr/bin/env bash
# Builds Poseidon's packages into dist/:
#
#   bash scripts/package.sh deb     dist/poseidon_<version>_<arch>.deb, from
#                                   the CMake tree $DEB_BUILD_DIR (default
#                                   build-deb) through CPack; install it with
#                                   `apt install ./dist/poseidon_..._amd64.deb`
#   bash scripts/package.sh wheel   dist/poseidon_caffe-<version>-...whl for
#                                   the python3 on PATH (or $PYTHON), through
#                                   `pip wheel .` (pyproject.toml), keeping its
#                                   CMake tree in $WHEEL_BUILD_DIR (default
#                                   build-wheel)
#
# The .deb's Python package is built for Debian's own /usr/bin/python3 (the
# interpreter that reads /usr/lib/python3/dist-packages), whatever python3
# is first on PATH. Both builds share compiled objects with build/ through
# ccache (CMakeLists.txt gives it the source tree as CCACHE_BASEDIR), so
# after the demo or the tests they mostly link. Needs the packages of
# scripts/install_deps.sh.
set -euo pipefail
cd "$(dirname "$0")/.."
JOBS=${JOBS:-$(nproc)}
mkdir -p dist

SUDO=""
[ "$(id -u)" -ne 0 ] && SUDO="sudo"

# apt_need PACKAGE...: installs the Debian packages that are missing.
apt_need() {
  local missing=() p
  for p in "$@"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null |
      grep -q "install ok installed" || missing+=("$p")
  done
  [ ${#missing[@]} -eq 0 ] && return 0
  echo "package: installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
}

build_deb() {
  local dir=${DEB_BUILD_DIR:-build-deb}
  # Debian's python3 and what pycaffe builds with there; dpkg-shlibdeps
  # (dpkg-dev) computes the package's library dependencies.
  apt_need python3 python3-dev python3-numpy python3-protobuf \
    python3-pybind11 pybind11-dev dpkg-dev file
  cmake -S . -B "$dir" -DCMAKE_BUILD_TYPE=Release -DBUILD_TESTS=OFF \
    -DBUILD_python=ON -DBUILD_matlab=OFF -DUSE_CUDA=OFF -DUSE_CUDNN=OFF \
    -DPython_EXECUTABLE=/usr/bin/python3 -Dpybind11_DIR= "$@"
  cmake --build "$dir" -j "$JOBS"
  (cd "$dir" && cpack -G DEB)
  local deb
  deb=$(ls -t "$dir"/poseidon_*.deb | head -1)
  cp "$deb" dist/
  echo "package: dist/$(basename "$deb")"
}

build_wheel() {
  local dir=${WHEEL_BUILD_DIR:-build-wheel} python=${PYTHON:-python3}
  "$python" -m pip --version >/dev/null
  # The generator of scripts/build.sh, so that an existing tree is reused.
  export CMAKE_GENERATOR=${CMAKE_GENERATOR:-Unix Makefiles}
  "$python" -m pip wheel . --no-deps -w dist -C build-dir="$dir" "$@"
  echo "package: $(ls -t dist/poseidon_caffe-*.whl | head -1)"
}

case "${1:-}" in
  deb) shift; build_deb "$@" ;;
  wheel) shift; build_wheel "$@" ;;
  *)
    echo "usage: $0 deb|wheel [extra CMake or pip arguments]" >&2
    exit 2
    ;;
esac
