"""The timing nets of the benchmarks: scripts/bench/nets/<net>_time.prototxt.

lenet and cifar10_quick are written by hand and committed; the others are
made from the reference models by scripts/gen_models.py, which every
benchmark runs (a fraction of a second) through path() before its first
net, so they always match the generator and are never committed.
"""

import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
REPO_ROOT = os.path.dirname(os.path.dirname(HERE))
NET_DIR = os.path.join(HERE, "nets")
GENERATOR = os.path.join(REPO_ROOT, "scripts", "gen_models.py")

_written = False


def write():
    """Writes the generated timing nets into NET_DIR (once per process)."""
    global _written
    if _written:
        return
    result = subprocess.run(
        [sys.executable, GENERATOR, "--timing-only", "--out", REPO_ROOT],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
        universal_newlines=True)
    if result.returncode != 0:
        raise SystemExit("scripts/gen_models.py --timing-only failed:\n"
                         + result.stdout)
    _written = True


def path(name):
    """The timing net of `name` (lenet, vgg16, ...), written if need be."""
    write()
    return os.path.join(NET_DIR, name + "_time.prototxt")
