"""Training LeNet on Fashion-MNIST from Python (python/examples/train.py)
gives bit-identical weights to `poseidon_train train` with the same solver,
and the same script runs under mpirun -np 2. Short runs; skipped when the
LMDBs (scripts/build.sh converts them into data/fashion_mnist) or the tools
are missing."""
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import caffe
from caffe.proto import caffe_pb2

ROOT = Path(__file__).resolve().parents[3]
SOLVER = ROOT / 'models' / 'lenet' / 'solver.prototxt'
SCRIPT = ROOT / 'python' / 'examples' / 'train.py'
DATA = ROOT / 'data' / 'fashion_mnist'

pytestmark = pytest.mark.skipif(
    not (DATA / 'fashion_mnist_train_lmdb').exists() or not SOLVER.exists(),
    reason='Fashion-MNIST LMDBs not built')

ITERS = 30


def env():
    pkg = os.path.dirname(os.path.dirname(os.path.abspath(caffe.__file__)))
    path = os.pathsep.join([pkg] + [p for p in os.environ.get(
        'PYTHONPATH', '').split(os.pathsep) if p])
    return dict(os.environ, PYTHONPATH=path, GLOG_minloglevel='2')


def train_py(prefix, *extra, launcher=()):
    cmd = list(launcher) + [sys.executable, str(SCRIPT), '--solver',
                            str(SOLVER), '--max-iter', str(ITERS),
                            '--test-iter', '2', '--snapshot-prefix',
                            str(prefix)] + list(extra)
    run = subprocess.run(cmd, cwd=str(ROOT), env=env(), capture_output=True,
                         text=True, timeout=300)
    assert run.returncode == 0, run.stdout + run.stderr[-3000:]
    return dict(line.split(' = ') for line in run.stdout.splitlines()
                if ' = ' in line)


def weights(path):
    param = caffe_pb2.NetParameter()
    param.ParseFromString(Path(path).read_bytes())
    return {layer.name: [caffe.io.blobproto_to_array(b) for b in layer.blobs]
            for layer in param.layer if len(layer.blobs)}


def test_python_training_matches_poseidon_train(tmp_path):
    scores = train_py(tmp_path / 'py')
    assert 0.0 <= float(scores['accuracy']) <= 1.0
    assert float(scores['loss']) < 2.3  # it learned something in 30 steps
    tool = os.environ.get('POSEIDON_TRAIN') or os.path.join(
        os.path.dirname(os.path.dirname(os.path.dirname(
            os.path.abspath(caffe.__file__)))), 'tools', 'poseidon_train')
    if not os.access(tool, os.X_OK):
        pytest.skip('poseidon_train is not built')
    solver = tmp_path / 'solver.prototxt'
    text = SOLVER.read_text()
    text = text.replace('max_iter: 10000', 'max_iter: {}'.format(ITERS))
    text = text.replace('snapshot_prefix: "models/lenet/lenet"',
                        'snapshot_prefix: "{}"'.format(tmp_path / 'cpp'))
    text = text.replace('test_iter: 100', 'test_iter: 2')
    solver.write_text(text)
    run = subprocess.run([tool, 'train', '--solver=' + str(solver)],
                         cwd=str(ROOT), env=env(), capture_output=True,
                         text=True, timeout=300)
    assert run.returncode == 0, run.stderr[-3000:]
    suffix = '_iter_{}.caffemodel'.format(ITERS)
    py = weights(str(tmp_path / 'py') + suffix)
    cpp = weights(str(tmp_path / 'cpp') + suffix)
    assert sorted(py) == sorted(cpp) and len(cpp) == 4
    for name in cpp:
        for a, b in zip(py[name], cpp[name]):
            assert np.array_equal(a, b), name


def test_same_script_under_mpirun(tmp_path):
    launcher = shutil.which('mpirun')
    if launcher is None:
        pytest.skip('no mpirun')
    scores = train_py(tmp_path / 'mpi', '--distributed', launcher=(
        launcher, '--allow-run-as-root', '--oversubscribe', '-np', '2',
        '-x', 'PYTHONPATH', '-x', 'GLOG_minloglevel'))
    assert set(scores) == {'accuracy', 'loss'}
    assert float(scores['loss']) < 2.3
    assert (tmp_path / 'mpi_iter_{}.caffemodel'.format(ITERS)).exists()
