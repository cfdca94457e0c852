#!/usr/bin/env bash
# Installs what the Python bindings (cmake -DBUILD_python=ON) and their pytest
# suite need, for the interpreter in $PYTHON (default: the python3 on PATH,
# the one users run). Idempotent: when everything imports it changes nothing
# and needs no network.
#
#   Python headers       Debian python3-dev when this python3 lacks Python.h
#   numpy, pytest,       Debian's python3-* packages when $PYTHON is Debian's
#   protobuf, pybind11,  own /usr/bin/python3 (they match the C++ protobuf),
#   pillow, six, pydot,  else pip into $PYTHON (protobuf pinned to the
#   matplotlib, scipy,   release line of the installed protoc)
#   scikit-image
# (six: BVLC's pycaffe scripts and tests import it; pydot: caffe.draw;
# matplotlib: tools/extra/plot_training_log.py and the demo's curve;
# scikit-image and scipy: caffe.io.resize_image, as in BVLC's pycaffe.)
# pybind11 must be >= 2.12 when numpy is 2.x (numpy 2 ABI support).
#
# With --demo only what the demo needs: matplotlib (and numpy) for the
# training curve.
set -euo pipefail

PYTHON=${PYTHON:-python3}
SUDO=""
[ "$(id -u)" -ne 0 ] && SUDO="sudo"
export DEBIAN_FRONTEND=noninteractive
apt_updated=0
apt_install() {
  if [ "$apt_updated" -eq 0 ]; then
    $SUDO apt-get update -qq
    apt_updated=1
  fi
  $SUDO apt-get install -y -qq --no-install-recommends "$@"
}

py_has() { "$PYTHON" -c "import $1" >/dev/null 2>&1; }

is_debian_python=0
if [ "$("$PYTHON" -c 'import sys; print(sys.prefix)')" = "/usr" ]; then
  is_debian_python=1
fi

if [ "${1:-}" = --demo ]; then
  if ! py_has matplotlib; then
    echo "install_python_deps: matplotlib"
    if [ "$is_debian_python" -eq 1 ]; then
      apt_install python3-matplotlib
    else
      "$PYTHON" -m pip install -q matplotlib
    fi
  fi
  exit 0
fi

command -v protoc >/dev/null 2>&1 || apt_install protobuf-compiler
if ! "$PYTHON" - <<'EOF'
import os, sys, sysconfig
sys.exit(0 if os.path.exists(
    os.path.join(sysconfig.get_paths()["include"], "Python.h")) else 1)
EOF
then
  apt_install python3-dev
fi

# The Python protobuf release line that matches `protoc --version`:
# protoc 3.X -> protobuf 4.X.*, protoc 22..25 -> 4.X.*, 26..29 -> 5.X.*,
# 30 and later -> 6.X.*.
protobuf_spec() {
  local v major minor
  v=$(protoc --version | awk '{print $2}')
  major=${v%%.*}
  minor=$(echo "$v" | cut -d. -f2)
  if [ "$major" -eq 3 ]; then
    echo "protobuf==4.${minor}.*"
  elif [ "$major" -lt 26 ]; then
    echo "protobuf==4.${major}.*"
  elif [ "$major" -lt 30 ]; then
    echo "protobuf==5.${major}.*"
  else
    echo "protobuf==6.${major}.*"
  fi
}

pybind11_ok() {
  "$PYTHON" - <<'EOF' >/dev/null 2>&1
import numpy, pybind11
need = (2, 12) if int(numpy.__version__.split(".")[0]) >= 2 else (2, 10)
have = tuple(int(x) for x in pybind11.__version__.split(".")[:2])
raise SystemExit(0 if have >= need else 1)
EOF
}

missing_apt=()
missing_pip=()
py_has numpy || { missing_apt+=(python3-numpy); missing_pip+=(numpy); }
py_has pytest || { missing_apt+=(python3-pytest); missing_pip+=(pytest); }
py_has google.protobuf || {
  missing_apt+=(python3-protobuf)
  missing_pip+=("$(protobuf_spec)")
}
py_has PIL || { missing_apt+=(python3-pil); missing_pip+=(pillow); }
py_has six || { missing_apt+=(python3-six); missing_pip+=(six); }
py_has pydot || { missing_apt+=(python3-pydot); missing_pip+=(pydot); }
py_has matplotlib || {
  missing_apt+=(python3-matplotlib)
  missing_pip+=(matplotlib)
}
py_has scipy.ndimage || { missing_apt+=(python3-scipy); missing_pip+=(scipy); }
py_has skimage.transform || {
  missing_apt+=(python3-skimage)
  missing_pip+=(scikit-image)
}

if [ ${#missing_apt[@]} -gt 0 ] && [ "$is_debian_python" -eq 1 ]; then
  echo "install_python_deps: apt ${missing_apt[*]}"
  apt_install "${missing_apt[@]}"
elif [ ${#missing_pip[@]} -gt 0 ]; then
  echo "install_python_deps: pip ${missing_pip[*]}"
  "$PYTHON" -m pip install -q "${missing_pip[@]}"
fi

if ! pybind11_ok; then
  if [ "$is_debian_python" -eq 1 ]; then
    apt_install python3-pybind11 pybind11-dev
  fi
  if ! pybind11_ok; then
    echo "install_python_deps: pip pybind11>=2.12"
    "$PYTHON" -m pip install -q "pybind11>=2.12"
  fi
fi

# Optional: atheris, the coverage-guided fuzzer that
# scripts/fuzz/fuzz_psd_run.py uses for psd_run's config.json (without it
# that script falls back to its own random mutations). Debian does not
# package it; pip only into a Python that pip may change.
if ! py_has atheris && [ "$is_debian_python" -eq 0 ]; then
  echo "install_python_deps: pip atheris (optional)"
  "$PYTHON" -m pip install -q atheris ||
    echo "install_python_deps: atheris did not install; psd_run is fuzzed" \
         "by fuzz_psd_run.py's built-in loop"
fi

"$PYTHON" - <<'EOF'
import numpy, pybind11, pytest, google.protobuf, matplotlib, scipy, skimage
print("install_python_deps: numpy %s, pybind11 %s, protobuf %s, pytest %s, "
      "matplotlib %s, scipy %s, scikit-image %s"
      % (numpy.__version__, pybind11.__version__,
         google.protobuf.__version__, pytest.__version__,
         matplotlib.__version__, scipy.__version__, skimage.__version__))
EOF
