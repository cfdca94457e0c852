"""pycaffe's public API item by item, beyond the other test files: the
module's names and version, layer lookups, start/end of forward and
backward, HDF5 weights, per-layer hooks, Timer, NCCL and solver extras."""
import os
import re
import subprocess
import sys
from collections import OrderedDict

import numpy as np
import pytest

import caffe

# A DummyData -> Convolution -> InnerProduct -> SoftmaxWithLoss net, as
# pycaffe's own tests build (names of blobs and layers differ on purpose:
# layer 'ip' writes blob 'ip_blob').
SIMPLE_NET = """
name: 'simple' force_backward: true
layer { type: 'DummyData' name: 'data' top: 'data' top: 'label'
  dummy_data_param { shape { dim: 5 dim: 2 dim: 3 dim: 4 }
    shape { dim: 5 dim: 1 dim: 1 dim: 1 }
    data_filler { type: 'gaussian' std: 1 } data_filler { type: 'constant' } } }
layer { type: 'Convolution' name: 'conv' bottom: 'data' top: 'conv'
  convolution_param { num_output: 3 kernel_size: 2 pad: 1
    weight_filler { type: 'gaussian' std: 1 }
    bias_filler { type: 'constant' value: 2 } } }
layer { type: 'InnerProduct' name: 'ip' bottom: 'conv' top: 'ip_blob'
  inner_product_param { num_output: 7
    weight_filler { type: 'gaussian' std: 0.5 }
    bias_filler { type: 'constant' value: -1 } } }
layer { type: 'SoftmaxWithLoss' name: 'loss' bottom: 'ip_blob'
  bottom: 'label' top: 'loss' }
"""


@pytest.fixture
def simple_file(write):
    return write('simple.prototxt', SIMPLE_NET)


@pytest.fixture
def net(simple_file):
    return caffe.Net(simple_file, caffe.TRAIN)


# ---- the package ------------------------------------------------------------

BVLC_TOP_LEVEL = (
    'Net SGDSolver NesterovSolver AdaGradSolver RMSPropSolver AdaDeltaSolver '
    'AdamSolver NCCL Timer init_log log set_mode_cpu set_mode_gpu set_device '
    'Layer get_solver layer_type_list set_random_seed solver_count '
    'set_solver_count solver_rank set_solver_rank set_multiprocess has_nccl '
    '__version__ TRAIN TEST Classifier Detector io layers params NetSpec '
    'to_proto Blob Solver').split()


@pytest.mark.parametrize('name', BVLC_TOP_LEVEL)
def test_pycaffe_top_level_names(name):
    assert hasattr(caffe, name), name


def test_version_is_caffes_and_poseidon_version_the_projects():
    # As BVLC's pycaffe (its CAFFE_VERSION), so that scripts comparing
    # caffe.__version__ with Caffe releases take the Caffe 1.0 paths.
    assert caffe.__version__ == '1.0.0'
    assert tuple(int(x) for x in caffe.__version__.split('.')) >= (1, 0)
    cmake = os.path.join(os.path.dirname(__file__), '..', '..', '..',
                         'CMakeLists.txt')
    with open(cmake) as f:
        project = re.search(r'project\(Poseidon VERSION ([0-9.]+)', f.read())
    assert project, 'no project(Poseidon VERSION ...) in CMakeLists.txt'
    assert caffe.poseidon_version == project.group(1)
    import poseidon
    assert poseidon.__version__ == '1.0.0'
    assert poseidon.poseidon_version == caffe.poseidon_version


def test_submodules_import_as_in_pycaffe():
    import caffe.coord_map
    import caffe.draw
    import caffe.io
    import caffe.net_spec
    from caffe.proto import caffe_pb2
    assert caffe.coord_map.crop and caffe.draw.draw_net
    assert caffe_pb2.NetParameter


def test_layer_type_list_is_sorted_and_complete():
    types = caffe.layer_type_list()
    assert types == sorted(types)
    for t in ('Data', 'Convolution', 'InnerProduct', 'Python', 'LSTM',
              'HDF5Data', 'Deconvolution'):
        assert t in types


def test_solver_count_rank_and_multiprocess_settings():
    count, rank = caffe.solver_count(), caffe.solver_rank()
    try:
        caffe.set_solver_count(3)
        caffe.set_solver_rank(2)
        assert (caffe.solver_count(), caffe.solver_rank()) == (3, 2)
    finally:
        caffe.set_solver_count(count)
        caffe.set_solver_rank(rank)
    caffe.set_multiprocess(False)


def test_init_log_and_log_run(tmp_path):
    # In a child process: init_log changes glog's global settings.
    code = ('import caffe; caffe.init_log(0, True); '
            'caffe.log("hello from pycaffe")')
    result = subprocess.run([sys.executable, '-c', code],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            env=dict(__import__('os').environ,
                                     GLOG_minloglevel='0'))
    assert result.returncode == 0, result.stderr.decode()
    assert b'hello from pycaffe' in result.stderr


# ---- layers and names ----------------------------------------------------------

def test_layer_dict_top_and_bottom_names(net):
    assert list(net.layer_dict.keys()) == list(net._layer_names)
    for i, name in enumerate(net._layer_names):
        assert net.layer_dict[name].type == net.layers[i].type
    assert net.top_names == OrderedDict([
        ('data', ['data', 'label']), ('conv', ['conv']), ('ip', ['ip_blob']),
        ('loss', ['loss'])])
    assert net.bottom_names == OrderedDict([
        ('data', []), ('conv', ['data']), ('ip', ['conv']),
        ('loss', ['ip_blob', 'label'])])
    # Every layer is a caffe.Layer, as in pycaffe (C++ or Python).
    assert all(isinstance(layer, caffe.Layer) for layer in net.layers)
    assert [layer.type for layer in net.layers] == [
        'DummyData', 'Convolution', 'InnerProduct', 'SoftmaxWithLoss']


def test_layer_dict_of_repeated_names_holds_the_last(write):
    path = write('twice.prototxt', """
      layer { name: 'in' type: 'Input' top: 'x' input_param { shape { dim: 2 } } }
      layer { name: 'act' type: 'ReLU' bottom: 'x' top: 'y' }
      layer { name: 'act' type: 'Sigmoid' bottom: 'y' top: 'z' }""")
    net = caffe.Net(path, caffe.TEST)
    assert len(net.layers) == 3
    assert net.layer_dict['act'].type == 'Sigmoid'
    assert net.top_names['act'] == ['z']


# ---- forward / backward by layer name --------------------------------------------

def test_forward_start_end_names_layers(net):
    net.forward()
    conv = net.blobs['conv']
    conv.data[...] = np.random.uniform(size=conv.data.shape)
    out = net.forward(start='ip', end='ip')
    assert set(out) == {'ip_blob'}       # the tops of layer `end`
    w, b = net.params['ip'][0].data, net.params['ip'][1].data
    expected = conv.data.reshape(5, -1).dot(w.T) + b
    assert np.allclose(out['ip_blob'], expected, rtol=1e-4, atol=1e-5)
    # Blobs asked for come along; start alone runs to the end.
    out = net.forward(start='ip', blobs=['conv'])
    assert set(out) == {'loss', 'conv'}


def test_backward_start_end_names_layers(net):
    net.forward()
    top = net.blobs['ip_blob']
    top.diff[...] = np.random.uniform(size=top.diff.shape)
    out = net.backward(start='ip', end='ip')
    assert set(out) == {'conv'}          # the bottoms of layer `end`
    w = net.params['ip'][0].data
    expected = top.diff.dot(w).reshape(net.blobs['conv'].diff.shape)
    assert np.allclose(out['conv'], expected, rtol=1e-4, atol=1e-5)


def test_unknown_start_or_end_raises_key_and_value_error(net):
    for kwargs in (dict(start='nope'), dict(end='nope')):
        with pytest.raises(KeyError, match="no layer named 'nope'"):
            net.forward(**kwargs)
        with pytest.raises(ValueError):
            net.backward(**kwargs)


def test_clear_param_diffs(net):
    net.forward()
    net.backward()
    diff = net.params['conv'][0].diff
    assert np.abs(diff).max() > 0
    net.clear_param_diffs()
    assert (diff == 0).all()


# ---- weights in HDF5 -------------------------------------------------------------------

def test_save_hdf5_and_load_hdf5_round_trip(net, simple_file, tmp_path):
    path = str(tmp_path / 'weights')  # no suffix needed
    net.save_hdf5(path)
    caffe.set_random_seed(99)
    other = caffe.Net(simple_file, caffe.TRAIN)
    assert not np.array_equal(other.params['ip'][0].data,
                              net.params['ip'][0].data)
    other.load_hdf5(path)
    for name in net.params:
        for a, b in zip(net.params[name], other.params[name]):
            assert np.array_equal(a.data, b.data)
    # The constructor's weights= and copy_from recognise HDF5 by content.
    third = caffe.Net(simple_file, caffe.TRAIN, weights=path)
    assert np.array_equal(third.params['conv'][1].data,
                          net.params['conv'][1].data)
    caffe.set_random_seed(98)
    fourth = caffe.Net(simple_file, caffe.TRAIN)
    fourth.copy_from(path)
    assert np.array_equal(fourth.params['conv'][0].data,
                          net.params['conv'][0].data)


def test_hdf5_weights_errors(net, write, tmp_path):
    with pytest.raises(caffe.Error, match='missing.h5'):
        net.load_hdf5(str(tmp_path / 'missing.h5'))
    narrow = write('narrow.prototxt', SIMPLE_NET.replace('num_output: 7',
                                                         'num_output: 4'))
    path = str(tmp_path / 'narrow.h5')
    caffe.Net(narrow, caffe.TRAIN).save_hdf5(path)
    with pytest.raises(caffe.ShapeError, match="layer 'ip'"):
        net.load_hdf5(path)


def test_save_hdf5_writes_caffes_layout(net, tmp_path):
    h5py = pytest.importorskip('h5py')
    path = str(tmp_path / 'w.h5')
    net.save_hdf5(path, write_diff=True)
    with h5py.File(path, 'r') as f:
        assert list(f['data'].keys()) == sorted(net._layer_names)
        assert np.array_equal(f['data/ip/0'][...], net.params['ip'][0].data)
        assert 'diff' in f


# ---- hooks -----------------------------------------------------------------------------

def test_layer_hooks_see_every_layer_in_order(net):
    calls = []
    net.before_forward(lambda i: calls.append(('bf', i)))
    net.after_forward(lambda i: calls.append(('af', i)))
    net.before_backward(lambda i: calls.append(('bb', i)))
    net.after_backward(lambda i: calls.append(('ab', i)))
    net.forward()
    n = len(net.layers)
    assert calls == [(k, i) for i in range(n) for k in ('bf', 'af')]
    del calls[:]
    net.backward()
    backward_layers = [i for k, i in calls if k == 'bb']
    assert backward_layers == sorted(backward_layers, reverse=True)
    assert [i for k, i in calls if k == 'ab'] == backward_layers
    assert 2 in backward_layers          # ip needs backward


def test_hook_exceptions_propagate(net):
    def fail(i):
        raise RuntimeError('hook failed at %d' % i)
    net.after_forward(fail)
    with pytest.raises(RuntimeError, match='hook failed at 0'):
        net.forward()


# ---- solver extras --------------------------------------------------------------------------

def test_solver_share_weights(simple_file, write):
    solver_file = write('solver.prototxt', """
      net: '%s' base_lr: 0.1 lr_policy: 'fixed' display: 0
      snapshot_after_train: false""" % simple_file)
    solver = caffe.SGDSolver(solver_file)
    net = caffe.Net(simple_file, caffe.TEST)
    solver.share_weights(net)
    solver.step(2)
    assert np.array_equal(net.params['ip'][0].data,
                          solver.net.params['ip'][0].data)
    assert solver.param.base_lr == pytest.approx(0.1)
    assert solver.param.max_iter == solver.param.max_iter  # a SolverParameter


def test_timer_measures_milliseconds():
    timer = caffe.Timer()
    assert timer.ms == 0
    timer.start()
    import time
    time.sleep(0.02)
    timer.stop()
    assert 15 <= timer.ms < 2000
    first = timer.ms
    assert timer.ms == first             # stopped: reading does not change it


def test_nccl_is_not_available():
    assert caffe.has_nccl() is False
    with pytest.raises(caffe.Error, match='mpirun'):
        caffe.NCCL(None, b'')
    with pytest.raises(caffe.Error):
        caffe.NCCL.new_uid()


def test_hdf5_snapshots_restore(simple_file, write, tmp_path):
    prefix = str(tmp_path / 'h5snap')
    solver_file = write('h5solver.prototxt', """
      net: '%s' base_lr: 0.1 lr_policy: 'fixed' momentum: 0.9 display: 0
      snapshot_format: HDF5 snapshot_prefix: '%s'
      snapshot_after_train: false""" % (simple_file, prefix))
    solver = caffe.SGDSolver(solver_file)
    solver.step(2)
    solver.snapshot()
    assert os.path.isfile(prefix + '_iter_2.caffemodel.h5')
    assert os.path.isfile(prefix + '_iter_2.solverstate.h5')
    weights = solver.net.params['ip'][0].data.copy()
    caffe.set_random_seed(77)
    fresh = caffe.SGDSolver(solver_file)
    fresh.restore(prefix + '_iter_2.solverstate.h5')
    assert fresh.iter == 2
    assert np.array_equal(fresh.net.params['ip'][0].data, weights)
    # The weights file alone loads into a Net, as Caffe's HDF5 weights do.
    net = caffe.Net(simple_file, caffe.TEST,
                    weights=prefix + '_iter_2.caffemodel.h5')
    assert np.array_equal(net.params['ip'][0].data, weights)


def test_errors_quote_bad_bytes_escaped(tmp_path):
    # A layer name holding an escape sequence and a byte that is not UTF-8:
    # Python gets a caffe.Error whose text is printable, never a decoding
    # error or a garbled terminal.
    path = tmp_path / 'bad.prototxt'
    path.write_bytes(b"layer { name: 'in' type: 'Input' top: 'x' "
                     b"input_param { shape { dim: 1 } } }\n"
                     b"layer { name: 'r\x1b[2J\xff' type: 'ReLU' "
                     b"bottom: 'nope' top: 'y' }\n")
    with pytest.raises(caffe.Error) as e:
        caffe.Net(str(path), caffe.TEST)
    message = str(e.value)
    assert '\\x1b[2J' in message
    assert '\x1b' not in message and '\xff' not in message
