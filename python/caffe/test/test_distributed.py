"""Distributed training from Python under mpirun: 2 ranks with batch K
follow the same trajectory as one process with batch 2K (BSP), and an
uncaught exception on one rank ends the whole job. Skipped without mpirun."""
import os
import shutil
import subprocess
import sys

import numpy as np
import pytest

import caffe

NET = """
layer {{ name: "data" type: "Input" top: "data"
  input_param {{ shape {{ dim: {batch} dim: 2 }} }} }}
layer {{ name: "label" type: "Input" top: "label"
  input_param {{ shape {{ dim: {batch} }} }} }}
layer {{ name: "ip" type: "InnerProduct" bottom: "data" top: "ip"
  inner_product_param {{ num_output: 2
    weight_filler {{ type: "gaussian" std: 0.3 }} }} }}
layer {{ name: "loss" type: "SoftmaxWithLoss" bottom: "ip" bottom: "label"
  top: "loss" }}
"""

SOLVER = """
net: "{net}"
base_lr: 0.1
lr_policy: "fixed"
momentum: 0.9
max_iter: 100
display: 0
random_seed: 5
snapshot_after_train: false
snapshot_prefix: "{prefix}"
distributed {{ }}
"""

SCRIPT = """
import sys
import numpy as np
import caffe
solver = caffe.get_solver(sys.argv[1])
rank, size = caffe.rank(), caffe.world_size()
if sys.argv[3] == 'fail' and rank == 1:
    raise RuntimeError('rank one fails')
rng = np.random.RandomState(0)
x = rng.randn(8, 2).astype(np.float32)
y = (x.sum(axis=1) > 0).astype(np.float32)
k = 8 // size
solver.net.blobs['data'].data[...] = x[rank * k:(rank + 1) * k]
solver.net.blobs['label'].data[...] = y[rank * k:(rank + 1) * k]
solver.step(5)
np.save('{}_{}.npy'.format(sys.argv[2], rank), solver.net.params['ip'][0].data)
# One write: print() with several arguments wrote 'rank ' apart, and the
# two ranks' lines came out interleaved ('rank rank 1 of 2 ...').
sys.stdout.write('rank {} of {} distributed {}\\n'.format(
    rank, size, caffe.is_distributed()))
sys.stdout.flush()
"""


def mpirun():
    return shutil.which('mpirun') or shutil.which('mpiexec')


@pytest.fixture
def job(tmp_path, write):
    if mpirun() is None:
        pytest.skip('no mpirun')
    script = write('train.py', SCRIPT)

    def make(batch):
        net = write('net{}.prototxt'.format(batch), NET.format(batch=batch))
        return write('solver{}.prototxt'.format(batch), SOLVER.format(
            net=net, prefix=str(tmp_path / 'snap')))

    def run(np_, solver, mode='ok'):
        env = dict(os.environ, GLOG_minloglevel='2',
                   PYTHONPATH=os.pathsep.join(
                       [os.path.dirname(os.path.dirname(caffe.__file__))] +
                       sys.path[1:]))
        cmd = [mpirun(), '--allow-run-as-root', '--oversubscribe', '-np',
               str(np_), '-x', 'PYTHONPATH', '-x', 'GLOG_minloglevel',
               sys.executable, script, solver, str(tmp_path / 'w'), mode]
        return subprocess.run(cmd, capture_output=True, text=True, env=env,
                              timeout=120, cwd=str(tmp_path))
    return make, run


def test_two_ranks_match_one_process_with_twice_the_batch(job, tmp_path):
    make, run = job
    two = run(2, make(4))
    assert two.returncode == 0, two.stdout + two.stderr
    assert 'rank 0 of 2 distributed True' in two.stdout
    w0 = np.load(str(tmp_path / 'w_0.npy'))
    w1 = np.load(str(tmp_path / 'w_1.npy'))
    assert np.array_equal(w0, w1)
    one = run(1, make(8))
    assert one.returncode == 0, one.stdout + one.stderr
    assert 'rank 0 of 1 distributed False' in one.stdout
    assert np.allclose(np.load(str(tmp_path / 'w_0.npy')), w0, atol=1e-5)


def test_uncaught_exception_on_one_rank_ends_the_job(job):
    make, run = job
    failed = run(2, make(4), 'fail')
    assert failed.returncode != 0
    assert 'rank one fails' in failed.stderr + failed.stdout


def test_alone_rank_and_world_size():
    assert caffe.rank() == 0 and caffe.world_size() == 1
    assert caffe.is_distributed() is False
