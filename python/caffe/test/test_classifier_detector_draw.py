"""caffe.Classifier, caffe.Detector and caffe.draw on a small conv net."""
import os
import shutil

import numpy as np
import pytest

import caffe
from caffe.proto import caffe_pb2
from google.protobuf import text_format

from conftest import CONV_NET


@pytest.fixture
def weights(conv_file, tmp_path):
    path = str(tmp_path / 'conv.caffemodel')
    caffe.Net(conv_file, caffe.TEST).save(path)
    return path


def test_classifier_matches_a_direct_forward(conv_file, weights):
    clf = caffe.Classifier(conv_file, weights, image_dims=(14, 14),
                           raw_scale=255.0, mean=np.array([100.0]))
    images = [np.random.rand(20, 16, 1).astype(np.float32) for _ in range(3)]
    center = clf.predict(images, oversample=False)
    assert center.shape == (3, 5)
    assert np.allclose(center.sum(axis=1), 1.0, atol=1e-5)
    # The same crops through the plain net.
    net = caffe.Net(conv_file, weights, caffe.TEST)
    batch = []
    for im in images:
        im = caffe.io.resize_image(im, (14, 14))[1:13, 1:13]
        batch.append((im.transpose(2, 0, 1) * 255.0) - 100.0)
    direct = net.forward_all(data=np.stack(batch))['prob']
    assert np.allclose(center, direct, atol=1e-5)
    ten = clf.predict(images)
    assert ten.shape == (3, 5)
    assert np.allclose(ten.sum(axis=1), 1.0, atol=1e-5)


def test_detector_windows(conv_file, weights):
    det = caffe.Detector(conv_file, weights, raw_scale=255.0)
    im = np.random.rand(30, 30, 1).astype(np.float32)
    windows = np.array([[0, 0, 12, 12], [5, 5, 29, 20]])
    dets = det.detect_windows([(im, windows)])
    assert len(dets) == 2
    assert dets[0]['prediction'].shape == (5,)
    net = caffe.Net(conv_file, weights, caffe.TEST)
    x = (im[:12, :12].transpose(2, 0, 1) * 255.0)[np.newaxis]
    x = np.concatenate([x, x])
    assert np.allclose(dets[0]['prediction'], net.forward(data=x)['prob'][0],
                       atol=1e-5)
    padded = caffe.Detector(conv_file, weights, context_pad=2)
    assert len(padded.detect_windows([(im, windows)])) == 2


def test_draw_dot_source(tmp_path):
    net = caffe_pb2.NetParameter()
    text_format.Merge(CONV_NET, net)
    dot = caffe.draw.get_dot_source(net, 'TB')
    assert dot.startswith('digraph "minilenet"')
    assert 'conv1' in dot and 'Convolution' in dot and 'rankdir=TB' in dot
    path = str(tmp_path / 'net.dot')
    caffe.draw.draw_net_to_file(net, path, 'LR', phase=caffe.TEST)
    assert open(path).read().count('->') >= 6


def test_classifier_centre_crop_truncates_like_caffe(conv_file, weights):
    # image_dims 15 for crops of 12: Caffe's centre crop starts at
    # int(7.5 - 6) = 1.
    clf = caffe.Classifier(conv_file, weights, image_dims=(15, 15))
    im = np.random.rand(15, 15, 1).astype(np.float32)
    out = clf.predict([im], oversample=False)
    net = caffe.Net(conv_file, weights, caffe.TEST)
    x = im[1:13, 1:13].transpose(2, 0, 1)[np.newaxis]
    direct = net.forward(data=np.concatenate([x, x]))['prob'][0]
    assert np.allclose(out[0], direct, atol=1e-6)


def test_detect_selective_search_needs_its_package(conv_file, weights):
    det = caffe.Detector(conv_file, weights)
    with pytest.raises(ImportError,
                       match='selective_search_ijcv_with_python'):
        det.detect_selective_search(['image.jpg'])


# ---- caffe.draw ---------------------------------------------------------------

def _net(text):
    net = caffe_pb2.NetParameter()
    text_format.Merge(text, net)
    return net


def test_draw_helpers():
    draw = caffe.draw
    assert draw.get_pooling_types_dict() == {0: 'MAX', 1: 'AVE',
                                             2: 'STOCHASTIC'}
    layers = {l.name: l for l in _net(CONV_NET).layer}
    assert draw.get_edge_label(layers['conv1']) == '4'
    assert draw.get_edge_label(layers['ip1']) == '5'
    assert draw.get_edge_label(layers['relu1']) == '""'
    data = caffe_pb2.LayerParameter(type='Data')
    data.data_param.batch_size = 64
    assert draw.get_edge_label(data) == 'Batch 64'
    assert draw.get_layer_label(layers['conv1'], 'LR') == (
        r'"conv1\n(Convolution)\nkernel size: 3\nstride: 1\npad: 0"')
    assert draw.get_layer_label(layers['pool1'], 'TB') == (
        '"pool1 (Pooling MAX) kernel size: 2 stride: 2 pad: 0"')
    assert draw.get_layer_label(layers['ip1'], 'TB', display_lrm=True) == (
        '"ip1 (InnerProduct) lr mult: 1.0, 1.0"')
    assert draw.get_layer_lr_mult(layers['ip1']) == (1.0, 1.0)
    with pytest.raises(ValueError):
        draw.get_layer_lr_mult(layers['relu1'])
    colors = [draw.choose_color_by_layertype(t) for t in
              ('Convolution', 'Deconvolution', 'Pooling', 'InnerProduct',
               'ReLU')]
    assert colors == ['#FF5050', '#FF5050', '#FF9900', '#CC33FF', '#6495ED']
    assert draw.BLOB_STYLE['shape'] == 'octagon'


def test_draw_phase_filter():
    net = _net("""
      layer { name: 'train_in' type: 'Input' top: 'x' include { phase: TRAIN } }
      layer { name: 'test_in' type: 'Input' top: 'x' include { phase: TEST } }
      layer { name: 'both' type: 'ReLU' bottom: 'x' top: 'y' }""")
    train = caffe.draw.get_dot_source(net, 'LR', phase=caffe.TRAIN)
    assert 'train_in' in train and 'test_in' not in train
    everything = caffe.draw.get_dot_source(net, 'LR')
    assert 'train_in' in everything and 'test_in' in everything
    both = _net("""layer { name: 'bad' type: 'ReLU'
      include { phase: TRAIN } exclude { phase: TEST } }""")
    with pytest.raises(ValueError, match='both include and exclude'):
        caffe.draw.get_dot_source(both, 'LR', phase=caffe.TRAIN)


@pytest.mark.skipif(shutil.which('dot') is None,
                    reason="Graphviz's dot is not installed")
def test_draw_net_renders_images(tmp_path):
    net = _net(CONV_NET)
    png = caffe.draw.draw_net(net, 'LR')
    assert png.startswith(b'\x89PNG')
    path = str(tmp_path / 'net.svg')
    caffe.draw.draw_net_to_file(net, path, 'TB', display_lrm=True)
    assert '<svg' in open(path).read()


def test_get_pydot_graph():
    pydot = pytest.importorskip('pydot')
    graph = caffe.draw.get_pydot_graph(_net(CONV_NET), 'TB')
    assert isinstance(graph, pydot.Dot)
    assert len(graph.get_edges()) >= 6


def test_every_net_of_the_tree_draws():
    # As pycaffe's test_draw walks models/ and examples/ (DOT here, which is
    # what Graphviz renders; the PNG test above covers rendering).
    root = os.path.join(os.path.dirname(__file__), '..', '..', '..')
    count = 0
    for top in ('models', 'examples'):
        for cwd, _, files in os.walk(os.path.join(root, top)):
            for name in files:
                if name.endswith('.prototxt') and 'solver' not in name:
                    with open(os.path.join(cwd, name)) as f:
                        net = _net(f.read())
                    assert caffe.draw.get_dot_source(net, 'LR').startswith(
                        'digraph')
                    count += 1
    assert count >= 20
