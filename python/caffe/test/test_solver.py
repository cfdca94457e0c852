"""caffe solvers: the six classes, get_solver, step/solve, snapshots and
restore, callbacks, apply_update and test nets."""
import os

import numpy as np
import pytest

import caffe

TRAIN_NET = """
name: "logreg"
layer { name: "data" type: "Input" top: "data"
  input_param { shape { dim: 8 dim: 2 } } }
layer { name: "label" type: "Input" top: "label"
  input_param { shape { dim: 8 } } }
layer { name: "ip" type: "InnerProduct" bottom: "data" top: "ip"
  inner_product_param { num_output: 2 weight_filler { type: "constant" } } }
layer { name: "loss" type: "SoftmaxWithLoss" bottom: "ip" bottom: "label"
  top: "loss" }
layer { name: "accuracy" type: "Accuracy" bottom: "ip" bottom: "label"
  top: "accuracy" include { phase: TEST } }
"""

SOLVER = """
net: "{net}"
base_lr: {base_lr}
lr_policy: "fixed"
momentum: {momentum}
max_iter: 20
display: 0
snapshot_prefix: "{prefix}"
random_seed: 3
type: "{type}"
{extra}
"""

CLASSES = [
    (caffe.SGDSolver, 'SGD', 0.9),
    (caffe.NesterovSolver, 'Nesterov', 0.9),
    (caffe.AdaGradSolver, 'AdaGrad', 0.0),
    (caffe.RMSPropSolver, 'RMSProp', 0.0),
    (caffe.AdaDeltaSolver, 'AdaDelta', 0.9),
    (caffe.AdamSolver, 'Adam', 0.9),
]


def separable(n=8):
    x = np.random.randn(n, 2).astype(np.float32)
    return x, (x[:, 0] + x[:, 1] > 0).astype(np.float32)


@pytest.fixture
def solver_file(tmp_path, write):
    net = write('train.prototxt', TRAIN_NET)

    def make(type_name='SGD', momentum=0.9, extra='', base_lr=0.5):
        return write('solver.prototxt', SOLVER.format(
            net=net, prefix=str(tmp_path / 'snap'), type=type_name,
            momentum=momentum, extra=extra, base_lr=base_lr))
    return make


def feed(net, x, y):
    net.blobs['data'].data[...] = x
    net.blobs['label'].data[...] = y


@pytest.mark.parametrize('cls,type_name,momentum', CLASSES)
def test_each_solver_class_trains(solver_file, cls, type_name, momentum):
    # The file says SGD: the class decides the update rule, as in pycaffe.
    base_lr = 1.0 if type_name == 'AdaDelta' else 0.5
    solver = cls(solver_file('SGD', momentum, base_lr=base_lr))
    assert isinstance(solver, caffe.Solver)
    assert type(solver) is cls and solver.type == type_name
    x, y = separable()
    feed(solver.net, x, y)
    start = float(solver.net.forward()['loss'])
    solver.step(10)
    assert solver.iter == 10
    end = float(solver.net.forward()['loss'])
    assert end < start


def test_get_solver_uses_the_type_in_the_file(solver_file):
    solver = caffe.get_solver(solver_file('Adam'))
    assert isinstance(solver, caffe.AdamSolver) and solver.type == 'Adam'
    assert solver.param.type == 'Adam'
    assert solver.param.max_iter == 20
    assert 'Adam' in caffe.solver_type_list()


def test_solve_snapshot_and_restore(solver_file, tmp_path):
    solver = caffe.SGDSolver(solver_file())
    x, y = separable()
    feed(solver.net, x, y)
    solver.step(5)
    solver.snapshot()
    state = str(tmp_path / 'snap_iter_5.solverstate')
    assert os.path.exists(state)
    assert os.path.exists(str(tmp_path / 'snap_iter_5.caffemodel'))
    assert solver.last_snapshot == state
    w5 = solver.net.params['ip'][0].data.copy()
    solver.solve()  # runs to max_iter and snapshots
    assert solver.iter == 20
    assert os.path.exists(str(tmp_path / 'snap_iter_20.caffemodel'))

    resumed = caffe.SGDSolver(solver_file())
    resumed.restore(state)
    assert resumed.iter == 5
    assert np.array_equal(resumed.net.params['ip'][0].data, w5)
    feed(resumed.net, x, y)
    resumed.step(15)
    assert np.allclose(resumed.net.params['ip'][0].data,
                       solver.net.params['ip'][0].data, atol=1e-6)

    again = caffe.SGDSolver(solver_file())
    feed(again.net, x, y)
    again.solve(state)
    assert again.iter == 20
    with pytest.raises(caffe.FileError):
        caffe.SGDSolver(solver_file()).restore(str(tmp_path / 'none'))


def test_callbacks_and_apply_update(solver_file):
    solver = caffe.SGDSolver(solver_file(momentum=0.0))
    events = []
    solver.add_callback(lambda: events.append('start'),
                        lambda: events.append('grads'))

    class Observer(object):
        def on_start(self):
            events.append('obj-start')

        def on_gradients_ready(self):
            events.append('obj-grads')
    solver.add_callback(Observer())
    x, y = separable()
    feed(solver.net, x, y)
    solver.step(2)
    assert events == ['start', 'obj-start', 'grads', 'obj-grads'] * 2

    # apply_update: one manual SGD step from the gradients.
    net = solver.net
    net.clear_param_diffs()
    net.forward()
    net.backward()
    w = net.params['ip'][0].data.copy()
    g = net.params['ip'][0].diff.copy()
    solver.apply_update()
    assert np.allclose(net.params['ip'][0].data, w - 0.5 * g, atol=1e-6)

    def boom():
        raise RuntimeError('from callback')
    solver.add_callback(boom, lambda: None)
    with pytest.raises(RuntimeError, match='from callback'):
        solver.step(1)
    with pytest.raises(TypeError):
        solver.add_callback(object())


def test_test_nets_share_trained_weights(solver_file):
    path = solver_file(extra='test_iter: 1\ntest_interval: 1000\n'
                             'test_initialization: false')
    solver = caffe.SGDSolver(path)
    assert len(solver.test_nets) == 1
    test_net = solver.test_nets[0]
    assert 'accuracy' in test_net.outputs
    x, y = separable()
    feed(solver.net, x, y)
    solver.step(20)
    test_net.share_with(solver.net)
    feed(test_net, x, y)
    assert float(test_net.forward()['accuracy']) >= 0.75


def test_solver_errors(write, tmp_path):
    with pytest.raises(caffe.FileError):
        caffe.SGDSolver(str(tmp_path / 'missing.prototxt'))
    bad = write('bad_solver.prototxt', 'base_lr: "x"')
    with pytest.raises(caffe.ConfigError, match='bad_solver.prototxt'):
        caffe.get_solver(bad)
    unknown = write('unknown.prototxt', 'type: "Magic"\nnet: "x"')
    with pytest.raises(caffe.ConfigError, match='Magic'):
        caffe.get_solver(unknown)
