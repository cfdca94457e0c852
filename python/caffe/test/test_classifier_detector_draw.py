"""caffe.Classifier, caffe.Detector and caffe.draw on a small conv net."""
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
    try:
        import pydot  # noqa: F401
    except ImportError:
        with pytest.raises(ImportError, match='pydot'):
            caffe.draw.draw_net(net, 'LR', 'png')
