"""Net surgery: load LeNet-style weights, edit them in numpy, save, reload
(in Python and in the C++ Net through copy_from), same outputs."""
import numpy as np

import caffe
from caffe.proto import caffe_pb2


def test_edit_save_reload(conv_file, tmp_path):
    net = caffe.Net(conv_file, caffe.TEST)
    original = str(tmp_path / 'original.caffemodel')
    net.save(original)

    loaded = caffe.Net(conv_file, original, caffe.TEST)
    for name in net.params:
        for a, b in zip(net.params[name], loaded.params[name]):
            assert np.array_equal(a.data, b.data)

    # Surgery: zero the first conv filter, scale the classifier, new bias.
    conv_w = loaded.params['conv1'][0].data
    assert conv_w.shape == (4, 1, 3, 3)
    conv_w[0] = 0.0
    loaded.params['ip1'][0].data[...] *= 2.0
    loaded.params['ip1'][1].data[...] = np.arange(5)
    edited = str(tmp_path / 'edited.caffemodel')
    loaded.save(edited)

    x = np.random.rand(2, 1, 12, 12).astype(np.float32)
    expected = loaded.forward(data=x)['prob'].copy()
    assert np.all(loaded.blobs['conv1'].data[:, 0] ==
                  loaded.params['conv1'][1].data[0])

    reloaded = caffe.Net(conv_file, caffe.TEST, weights=edited)
    assert np.all(reloaded.params['conv1'][0].data[0] == 0)
    assert np.array_equal(reloaded.params['ip1'][1].data, np.arange(5))
    assert np.allclose(reloaded.forward(data=x)['prob'], expected, atol=1e-6)
    fresh = caffe.Net(conv_file, caffe.TEST)
    fresh.copy_from(edited)
    assert np.allclose(fresh.forward(data=x)['prob'], expected, atol=1e-6)

    # The file is a standard NetParameter with the edited blobs.
    param = caffe_pb2.NetParameter()
    with open(edited, 'rb') as f:
        param.ParseFromString(f.read())
    ip1 = [l for l in param.layer if l.name == 'ip1'][0]
    assert list(ip1.blobs[1].data) == [0, 1, 2, 3, 4]


def test_transplant_params_between_shapes(conv_file, write, tmp_path):
    # A net with a wider classifier: copy the shared layers, keep the rest.
    wide = write('wide.prototxt', open(conv_file).read().replace(
        'name: "ip1"', 'name: "ip1_wide"').replace('num_output: 5',
                                                  'num_output: 7'))
    src = caffe.Net(conv_file, caffe.TEST)
    path = str(tmp_path / 'src.caffemodel')
    src.save(path)
    dst = caffe.Net(wide, caffe.TEST, weights=path)
    assert np.array_equal(dst.params['conv1'][0].data,
                          src.params['conv1'][0].data)
    assert dst.params['ip1_wide'][0].data.shape == (7, 100)
    dst.params['ip1_wide'][0].data[:5] = src.params['ip1'][0].data
    assert np.array_equal(dst.params['ip1_wide'][0].data[:5],
                          src.params['ip1'][0].data)
