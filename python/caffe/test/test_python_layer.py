"""The `Python` layer type: layers written in Python inside prototxt nets."""
import sys
import textwrap

import numpy as np
import pytest

import caffe

MODULE = textwrap.dedent('''
    import numpy as np
    import caffe

    class TimesTwo(caffe.Layer):
        """y = k x, k from param_str (default 2)."""
        def setup(self, bottom, top):
            if len(bottom) != 1:
                raise Exception('TimesTwo needs one bottom')
            self.k = float(self.param_str or 2)
            self.calls = []

        def reshape(self, bottom, top):
            top[0].reshape(*bottom[0].data.shape)

        def forward(self, bottom, top):
            self.calls.append('forward')
            top[0].data[...] = self.k * bottom[0].data

        def backward(self, top, propagate_down, bottom):
            self.calls.append(('backward', list(propagate_down)))
            if propagate_down[0]:
                bottom[0].diff[...] = self.k * top[0].diff

    class Scale(caffe.Layer):
        """y = w * x with a learnable scalar w (starts at 1)."""
        def setup(self, bottom, top):
            self.blobs.add_blob(1)
            self.blobs[0].data[...] = 1.0

        def reshape(self, bottom, top):
            top[0].reshape(*bottom[0].data.shape)

        def forward(self, bottom, top):
            top[0].data[...] = self.blobs[0].data[0] * bottom[0].data

        def backward(self, top, propagate_down, bottom):
            self.blobs[0].diff[0] += np.sum(top[0].diff * bottom[0].data)
            if propagate_down[0]:
                bottom[0].diff[...] = self.blobs[0].data[0] * top[0].diff

    class Broken(caffe.Layer):
        def reshape(self, bottom, top):
            top[0].reshape(*bottom[0].data.shape)

        def forward(self, bottom, top):
            raise ValueError('broken forward')

    class BadSetup(caffe.Layer):
        def setup(self, bottom, top):
            raise Exception('bad parameter ' + self.param_str)
''')

NET = '''
force_backward: true
layer {{ name: "data" type: "Input" top: "data"
  input_param {{ shape {{ dim: 2 dim: 3 }} }} }}
layer {{ name: "py" type: "Python" bottom: "data" top: "py"
  python_param {{ module: "{module}" layer: "{layer}" {extra} }} }}
'''


@pytest.fixture
def layer_net(tmp_path, write, monkeypatch):
    (tmp_path / 'pylayers_for_test.py').write_text(MODULE)
    monkeypatch.syspath_prepend(str(tmp_path))
    yield lambda layer, extra='', module='pylayers_for_test': caffe.Net(
        write('py.prototxt', NET.format(module=module, layer=layer,
                                        extra=extra)), caffe.TRAIN)
    sys.modules.pop('pylayers_for_test', None)


def test_forward_backward_and_param_str(layer_net):
    net = layer_net('TimesTwo', 'param_str: "3"')
    layer = net.layer_dict['py']
    assert layer.param_str == '3' and layer.phase == caffe.TRAIN
    assert layer.type == 'Python'
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    out = net.forward(data=x)
    assert np.allclose(out['py'], 3 * x)
    grads = net.backward(py=np.ones((2, 3)))
    assert np.allclose(grads['data'], 3.0)
    assert layer.calls == ['forward', ('backward', [True])]
    assert net.layers[1] is layer


def test_default_param_str(layer_net):
    net = layer_net('TimesTwo')
    assert net.layer_dict['py'].param_str == ''
    assert np.allclose(net.forward(data=np.ones((2, 3)))['py'], 2.0)


def test_learnable_blobs_are_params(layer_net, tmp_path):
    net = layer_net('Scale')
    assert list(net.params) == ['py']
    assert net.params['py'][0].data.shape == (1,)
    x = np.full((2, 3), 2.0, dtype=np.float32)
    net.forward(data=x)
    net.clear_param_diffs()
    net.backward(py=np.ones((2, 3)))
    assert np.isclose(net.params['py'][0].diff[0], 12.0)
    net.params['py'][0].data[...] = 5.0
    path = str(tmp_path / 'py.caffemodel')
    net.save(path)
    other = layer_net('Scale')
    other.copy_from(path)
    assert other.params['py'][0].data[0] == 5.0


def test_errors_become_python_exceptions(layer_net):
    with pytest.raises(caffe.ConfigError, match='no_such_module'):
        layer_net('X', module='no_such_module')
    with pytest.raises(caffe.ConfigError, match='Missing'):
        layer_net('Missing')
    with pytest.raises(caffe.ConfigError, match="bad parameter p1"):
        layer_net('BadSetup', 'param_str: "p1"')
    net = layer_net('Broken')
    with pytest.raises(ValueError, match='broken forward'):
        net.forward(data=np.ones((2, 3)))
    # The net is still usable after a failed forward.
    with pytest.raises(ValueError):
        net.forward()
