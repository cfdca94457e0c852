"""caffe.Net: construction, blob/param views, forward/backward, batching,
weights I/O, MemoryData input arrays, and error reporting."""
import pathlib

import numpy as np
import pytest

import caffe
from caffe.proto import caffe_pb2

from conftest import TINY_NET


def softmax_loss(x, w, b, labels):
    logits = x @ w.T + b
    logits = logits - logits.max(axis=1, keepdims=True)
    p = np.exp(logits) / np.exp(logits).sum(axis=1, keepdims=True)
    n = len(labels)
    loss = -np.log(p[np.arange(n), labels.astype(int)]).mean()
    dlogits = p.copy()
    dlogits[np.arange(n), labels.astype(int)] -= 1
    dlogits /= n
    return loss, dlogits


# ---- construction -----------------------------------------------------------

def test_constructor_forms(tiny_file, tmp_path):
    net = caffe.Net(tiny_file, caffe.TEST)
    assert net.phase == caffe.TEST and net.name == 'tiny'
    weights = str(tmp_path / 'w.caffemodel')
    net.params['ip'][0].data[...] = 3.0
    net.save(weights)
    a = caffe.Net(tiny_file, weights, caffe.TEST)
    b = caffe.Net(tiny_file, caffe.TEST, weights=weights)
    c = caffe.Net(pathlib.Path(tiny_file), phase=caffe.TRAIN,
                  weights=pathlib.Path(weights), level=0, stages=[])
    for n in (a, b, c):
        assert np.all(n.params['ip'][0].data == 3.0)
    assert c.phase == caffe.TRAIN


def test_stages_and_level_select_layers(write):
    path = write('staged.prototxt', """
layer { name: "data" type: "Input" top: "data"
  input_param { shape { dim: 1 dim: 2 } } }
layer { name: "a" type: "ReLU" bottom: "data" top: "a"
  include { stage: "deploy" } }
layer { name: "b" type: "Sigmoid" bottom: "data" top: "b"
  include { min_level: 2 } }
""")
    assert list(caffe.Net(path, caffe.TEST).layer_dict) == ['data']
    net = caffe.Net(path, caffe.TEST, stages=['deploy'], level=2)
    assert [l.type for l in net.layers if l.type != 'Split'] == [
        'Input', 'ReLU', 'Sigmoid']
    net = caffe.Net(path, caffe.TEST, stages=['deploy'], level=1)
    assert [l.type for l in net.layers] == ['Input', 'ReLU']


def test_structure_accessors(tiny_file):
    net = caffe.Net(tiny_file, caffe.TRAIN)
    assert list(net.blobs) == ['data', 'label', 'ip', 'loss']
    assert list(net.params) == ['ip']
    assert net.inputs == ['data', 'label']
    assert net.outputs == ['loss']
    assert [l.type for l in net.layers] == [
        'Input', 'Input', 'InnerProduct', 'SoftmaxWithLoss']
    assert net.layer_dict['ip'].type == 'InnerProduct'
    assert net.top_names['loss'] == ['loss']
    assert net.bottom_names['loss'] == ['ip', 'label']
    assert net.bottom_names['data'] == []
    assert net.blob_loss_weights['loss'] == 1.0
    assert net.blob_loss_weights['ip'] == 0.0
    assert len(net.layer_dict['ip'].blobs) == 2
    assert net.params['ip'][0].data.shape == (2, 3)
    assert net.params['ip'][1].data.shape == (2,)
    blob = net.blobs['data']
    assert blob.shape == (4, 3) and blob.count == 12
    assert blob.num == 4 and blob.channels == 3
    assert 'Python' in caffe.layer_type_list()
    assert 'InnerProduct' in caffe.layer_type_list()


# ---- numpy views ------------------------------------------------------------

def test_data_and_diff_are_views_of_cpp_memory(tiny_file):
    net = caffe.Net(tiny_file, caffe.TRAIN)
    w = net.params['ip'][0]
    first, second = w.data, w.data
    assert np.shares_memory(first, second)
    assert first.flags.writeable and first.dtype == np.float32
    first[...] = 0.0
    net.params['ip'][1].data[...] = [1.0, -1.0]
    out = net.forward(data=np.random.rand(4, 3), label=np.zeros(4))
    # Weights written through the view are what the C++ forward used.
    assert np.allclose(net.blobs['ip'].data, [[1.0, -1.0]] * 4)
    expected = np.log(1 + np.exp(-2.0))
    assert np.isclose(float(out['loss']), expected, rtol=1e-5)
    assert np.shares_memory(w.diff, w.diff)
    assert not np.shares_memory(w.diff, w.data)


def test_arrays_outlive_the_net(tiny_file):
    import gc
    net = caffe.Net(tiny_file, caffe.TRAIN)
    net.params['ip'][0].data[...] = 4.0
    weights = net.params['ip'][0].data
    blob = net.blobs['ip']
    del net
    gc.collect()
    assert np.all(weights == 4.0)
    blob.data[...] = 1.0  # the Blob object keeps its memory too
    assert blob.data.sum() == blob.count


def test_blob_assignment_and_reshape(tiny_file):
    net = caffe.Net(tiny_file, caffe.TRAIN)
    blob = net.blobs['data']
    blob.data = np.arange(12).reshape(4, 3)
    assert blob.data[3, 2] == 11
    blob.data = 7.0  # broadcast
    assert np.all(blob.data == 7.0)
    old = blob.data
    blob.reshape(8, 3)
    assert blob.data.shape == (8, 3)
    blob.reshape((2, 3))
    assert blob.shape == (2, 3)
    assert old.shape == (4, 3)  # earlier arrays stay valid
    net.blobs['label'].reshape(2)
    net.reshape()
    assert net.blobs['ip'].data.shape == (2, 2)
    standalone = caffe.Blob(2, 5)
    standalone.data[...] = 1
    assert standalone.data.sum() == 10


def test_shape_mismatched_assignment_raises_value_error(tiny_file):
    net = caffe.Net(tiny_file, caffe.TRAIN)
    with pytest.raises(ValueError):
        net.blobs['data'].data[...] = np.ones((5, 3))
    with pytest.raises(ValueError):
        net.blobs['data'].data = np.ones((2, 2))
    with pytest.raises(ValueError, match='batch size'):
        net.forward(data=np.ones((5, 3)), label=np.zeros(4))
    with pytest.raises(ValueError):
        net.blobs['data'].reshape(-1, 3)


def test_wrong_blob_or_layer_name_raises_key_error(tiny_file):
    net = caffe.Net(tiny_file, caffe.TRAIN)
    with pytest.raises(KeyError, match="no blob named 'nope'"):
        net.blobs['nope']
    with pytest.raises(KeyError):
        net.params['loss']
    with pytest.raises(KeyError, match='nope'):
        net.forward(nope=np.ones(3))
    with pytest.raises(KeyError, match='no layer'):
        net.forward(start='nope')


# ---- forward / backward -----------------------------------------------------

def test_forward_backward_match_numpy(tiny_file):
    net = caffe.Net(tiny_file, caffe.TRAIN)
    x = np.random.randn(4, 3).astype(np.float32)
    labels = np.array([0, 1, 1, 0], dtype=np.float32)
    w = net.params['ip'][0].data.copy()
    b = net.params['ip'][1].data.copy()
    out = net.forward(data=x, label=labels)
    loss, dlogits = softmax_loss(x, w, b, labels)
    assert np.isclose(float(out['loss']), loss, rtol=1e-4)
    net.clear_param_diffs()
    diffs = net.backward(diffs=['ip'])
    assert set(diffs) == {'data', 'label', 'ip'}
    assert np.allclose(diffs['ip'], dlogits, atol=1e-6)
    assert np.allclose(net.params['ip'][0].diff, dlogits.T @ x, atol=1e-5)
    assert np.allclose(net.params['ip'][1].diff, dlogits.sum(0), atol=1e-6)


def test_forward_start_end_and_extra_blobs(tiny_file):
    net = caffe.Net(tiny_file, caffe.TRAIN)
    net.blobs['data'].data[...] = 1.0
    out = net.forward(end='ip')
    assert list(out) == ['ip']
    net.blobs['ip'].data[...] = [[5.0, 0.0]] * 4
    net.blobs['label'].data[...] = 0
    out = net.forward(start='loss', blobs=['ip'])
    assert set(out) == {'loss', 'ip'}
    assert np.isclose(float(out['loss']), np.log(1 + np.exp(-5.0)), rtol=1e-4)


IP_NET = """
layer { name: "data" type: "Input" top: "data"
  input_param { shape { dim: 2 dim: 3 } } }
layer { name: "ip" type: "InnerProduct" bottom: "data" top: "ip"
  inner_product_param { num_output: 2 weight_filler { type: "gaussian" }
    bias_filler { type: "gaussian" } } }
force_backward: true
"""


def test_backward_with_top_diff_kwargs(write):
    path = write('ip.prototxt', IP_NET)
    net = caffe.Net(path, caffe.TRAIN)
    net.forward(data=np.ones((2, 3)))
    top_diff = np.array([[1.0, 0.0], [0.0, 2.0]], dtype=np.float32)
    out = net.backward(ip=top_diff)
    w = net.params['ip'][0].data
    assert np.allclose(out['data'], top_diff @ w, atol=1e-6)


def test_forward_all_batches_and_pads(tiny_file):
    net = caffe.Net(tiny_file, caffe.TEST)
    x = np.random.randn(10, 3).astype(np.float32)
    out = net.forward_all(blobs=['ip'], data=x, label=np.zeros(10))
    assert out['ip'].shape == (10, 2)
    w, b = net.params['ip'][0].data, net.params['ip'][1].data
    assert np.allclose(out['ip'], x @ w.T + b, atol=1e-5)
    out = net.forward_all(data=x, label=np.zeros(10))
    assert out['loss'].shape == (3,)  # one loss per batch of 4


def test_forward_backward_all(write):
    path = write('ip.prototxt', IP_NET)
    net = caffe.Net(path, caffe.TRAIN)
    x = np.random.randn(5, 3).astype(np.float32)
    top = np.random.randn(5, 2).astype(np.float32)
    fwd, bwd = net.forward_backward_all(data=x, ip=top)
    w, b = net.params['ip'][0].data, net.params['ip'][1].data
    assert fwd['ip'].shape == (5, 2) and bwd['data'].shape == (5, 3)
    assert np.allclose(fwd['ip'], x @ w.T + b, atol=1e-5)
    assert np.allclose(bwd['data'], top @ w, atol=1e-5)


def test_memory_data_set_input_arrays(write):
    path = write('mem.prototxt', """
layer { name: "data" type: "MemoryData" top: "data" top: "label"
  memory_data_param { batch_size: 2 channels: 1 height: 2 width: 2 } }
layer { name: "flat" type: "Flatten" bottom: "data" top: "flat" }
""")
    net = caffe.Net(path, caffe.TEST)
    data = np.arange(16, dtype=np.float32).reshape(4, 1, 2, 2)
    labels = np.array([0, 1, 2, 3], dtype=np.float32)
    net.set_input_arrays(data, labels)
    out = net.forward()
    assert np.array_equal(out['flat'], data[:2].reshape(2, 4))
    net.forward()
    assert np.array_equal(net.blobs['label'].data, [2, 3])
    assert np.array_equal(net.blobs['flat'].data, data[2:].reshape(2, 4))
    with pytest.raises(ValueError):
        net.set_input_arrays(np.zeros((4, 3, 2, 2)), labels)
    with pytest.raises(ValueError):
        net.set_input_arrays(data, labels[:3])
    with pytest.raises(caffe.ConfigError, match='multiple of batch_size'):
        net.set_input_arrays(data[:3], labels[:3])


# ---- weights I/O ------------------------------------------------------------

def test_save_copy_from_and_share_with(tiny_file, tmp_path):
    a = caffe.Net(tiny_file, caffe.TRAIN)
    b = caffe.Net(tiny_file, caffe.TEST)
    assert not np.allclose(a.params['ip'][0].data, b.params['ip'][0].data)
    path = str(tmp_path / 'a.caffemodel')
    a.save(path)
    b.copy_from(path)
    assert np.array_equal(a.params['ip'][0].data, b.params['ip'][0].data)
    saved = caffe_pb2.NetParameter()
    with open(path, 'rb') as f:
        saved.ParseFromString(f.read())
    ip = [l for l in saved.layer if l.name == 'ip'][0]
    assert list(ip.blobs[0].shape.dim) == [2, 3]
    c = caffe.Net(tiny_file, caffe.TEST)
    c.share_with(a)
    a.params['ip'][0].data[...] = 42
    assert np.all(c.params['ip'][0].data == 42)


# ---- errors -----------------------------------------------------------------

def test_missing_and_bad_files_raise_python_exceptions(write, tmp_path,
                                                      tiny_file):
    missing = str(tmp_path / 'missing.prototxt')
    with pytest.raises(caffe.FileError, match='missing.prototxt'):
        caffe.Net(missing, caffe.TEST)
    with pytest.raises(OSError):
        caffe.Net(missing, caffe.TEST)
    bad = write('bad.prototxt', 'layer { name: "x" type: }')
    with pytest.raises(caffe.ConfigError, match=r'bad.prototxt:1:'):
        caffe.Net(bad, caffe.TEST)
    unknown = write('unknown.prototxt',
                    'layer { name: "x" type: "NoSuchLayer" top: "x" }')
    with pytest.raises(caffe.ConfigError, match='NoSuchLayer'):
        caffe.Net(unknown, caffe.TEST)
    shapes = write('shapes.prototxt', TINY_NET + '''
layer { name: "sum" type: "Eltwise" bottom: "data" bottom: "ip" top: "sum" }
''')
    with pytest.raises(caffe.ShapeError, match="layer 'sum'"):
        caffe.Net(shapes, caffe.TEST)
    net = caffe.Net(tiny_file, caffe.TEST)
    with pytest.raises(caffe.FileError):
        net.copy_from(str(tmp_path / 'none.caffemodel'))
    with pytest.raises(ValueError):
        caffe.Net(tiny_file, 7)
    with pytest.raises(IndexError):
        net._forward(0, 99)
    assert issubclass(caffe.ConfigError, ValueError)
    assert issubclass(caffe.Error, RuntimeError)


def test_modes_and_seeds(tiny_file):
    if not caffe.has_gpu:
        with pytest.raises(caffe.Error, match='CUDA'):
            caffe.set_mode_gpu()
    caffe.set_mode_cpu()
    caffe.set_device(0)
    caffe.set_random_seed(5)
    w1 = caffe.Net(tiny_file, caffe.TEST).params['ip'][0].data.copy()
    caffe.set_random_seed(5)
    w2 = caffe.Net(tiny_file, caffe.TEST).params['ip'][0].data.copy()
    assert np.array_equal(w1, w2)


def test_gpu_mode_agrees_with_cpu(conv_file):
    """GPU mode runs the same net and .data stays a synchronised host view."""
    if not caffe.has_gpu or caffe.gpu_device_count() == 0:
        if caffe.has_gpu:
            with pytest.raises(caffe.Error, match='GPU'):
                caffe.set_mode_gpu()
        pytest.skip('no GPU: CPU-only build or no device')
    caffe.set_random_seed(3)
    net = caffe.Net(conv_file, caffe.TEST)
    x = np.random.RandomState(0).randn(*net.blobs['data'].data.shape)
    net.blobs['data'].data[...] = x
    caffe.set_mode_cpu()
    cpu_out = {k: v.copy() for k, v in net.forward().items()}
    caffe.set_device(0)
    caffe.set_mode_gpu()
    try:
        net.blobs['data'].data[...] = x
        gpu_out = net.forward()
        for k in cpu_out:
            np.testing.assert_allclose(gpu_out[k], cpu_out[k], rtol=1e-4,
                                       atol=1e-5)
        # A host write through the view reaches the device on the next pass.
        net.blobs['data'].data[...] = 0
        zero_out = net.forward()
        assert not np.allclose(zero_out[next(iter(zero_out))],
                               cpu_out[next(iter(cpu_out))])
    finally:
        caffe.set_mode_cpu()


def test_poseidon_alias():
    import poseidon
    assert poseidon is caffe
    assert poseidon.Net is caffe.Net
    from poseidon.proto import caffe_pb2 as pb
    assert pb.NetParameter is caffe_pb2.NetParameter


# ---- shared diffs -------------------------------------------------------------

def test_shared_diffs_are_opt_in_and_give_the_same_gradients(conv_file):
    plain = caffe.Net(conv_file, caffe.TEST)
    shared = caffe.Net(conv_file, caffe.TEST)
    assert not plain.share_diffs
    shared.share_diffs = True
    assert shared.share_diffs
    for name, blobs in plain.params.items():
        for i, blob in enumerate(blobs):
            shared.params[name][i].data[...] = blob.data
    x = np.random.randn(*plain.blobs['data'].data.shape)
    g = np.random.randn(*plain.blobs['prob'].data.shape)

    def passes():
        for net in (plain, shared):
            net.clear_param_diffs()
            net.blobs['data'].data[...] = x
            net.forward()
            net.blobs['prob'].diff[...] = g
            net.backward()
        for name, blobs in plain.params.items():
            for i, blob in enumerate(blobs):
                np.testing.assert_allclose(shared.params[name][i].diff,
                                           blob.diff, rtol=1e-5, atol=1e-7)

    passes()
    # The output keeps the gradient it was given; a kept inner blob holds
    # its own after backward, as without sharing.
    np.testing.assert_array_equal(shared.blobs['prob'].diff,
                                  g.astype(np.float32))
    shared.keep_diff('ip1')
    passes()
    np.testing.assert_allclose(shared.blobs['ip1'].diff,
                               plain.blobs['ip1'].diff, rtol=1e-5, atol=1e-7)
    with pytest.raises(Exception, match='no blob named'):
        shared.keep_diff('no_such_blob')
