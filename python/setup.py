"""`pip install ./python`: builds Poseidon's Python bindings with CMake and
installs the `caffe` package (and its alias `poseidon`) with libposeidon.so
inside it, so nothing else needs to be on the library path.

The CMake build directory is $POSEIDON_BUILD_DIR (default <repo>/build-pip;
point it at an existing build to reuse it). Extra CMake arguments come from
$POSEIDON_CMAKE_ARGS, the number of build jobs from $POSEIDON_JOBS.
Needs the Debian packages of scripts/install_deps.sh; the Python ones come
from scripts/install_python_deps.sh.
"""
import glob
import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

from setuptools import Distribution, setup
from setuptools.command.build_ext import build_ext

HERE = Path(__file__).resolve().parent
ROOT = Path(os.environ.get('POSEIDON_SOURCE_DIR', HERE.parent)).resolve()


class _BinaryDistribution(Distribution):
    """The wheel holds compiled code: tag it for this platform."""

    def has_ext_modules(self):
        return True


class _BuildWithCMake(build_ext):
    """Runs the CMake build and copies the packages into build_lib."""

    def run(self):
        if not (ROOT / 'CMakeLists.txt').exists():
            sys.exit('setup.py: no Poseidon source tree at {} (pip copied '
                     'python/ elsewhere?); set POSEIDON_SOURCE_DIR'.format(
                         ROOT))
        build_dir = Path(os.environ.get('POSEIDON_BUILD_DIR',
                                        ROOT / 'build-pip')).resolve()
        configure = ['cmake', '-S', str(ROOT), '-B', str(build_dir),
                     '-DCMAKE_BUILD_TYPE=Release', '-DBUILD_python=ON',
                     '-DBUILD_TESTS=OFF',
                     '-DPython_EXECUTABLE=' + sys.executable]
        try:
            import pybind11
            configure.append('-Dpybind11_DIR=' + pybind11.get_cmake_dir())
        except ImportError:
            pass
        configure += shlex.split(os.environ.get('POSEIDON_CMAKE_ARGS', ''))
        jobs = os.environ.get('POSEIDON_JOBS', str(os.cpu_count() or 1))
        subprocess.check_call(configure)
        subprocess.check_call(['cmake', '--build', str(build_dir), '--target',
                               'pycaffe', '-j', jobs])
        out = Path(self.build_lib)
        for package in ('caffe', 'poseidon'):
            target = out / package
            if target.exists():
                shutil.rmtree(target)
            shutil.copytree(build_dir / 'python' / package, target,
                            ignore=shutil.ignore_patterns('__pycache__',
                                                          'test'))
        for lib in glob.glob(str(build_dir / 'lib' / 'libposeidon.so*')):
            shutil.copy2(lib, out / 'caffe', follow_symlinks=True)


setup(
    name='poseidon-caffe',
    version='0.1.0',
    description="Poseidon's pycaffe-compatible Python interface (import "
                "caffe / import poseidon)",
    python_requires='>=3.8',
    install_requires=['numpy', 'protobuf>=3.20'],
    packages=[],
    cmdclass={'build_ext': _BuildWithCMake},
    distclass=_BinaryDistribution,
    zip_safe=False,
)
