"""Python layers in nets run by the C++ tool: poseidon_train (built with the
bindings) starts an interpreter, imports caffe and runs the layer."""
import os
import subprocess
import textwrap

import pytest

import caffe

MODULE = textwrap.dedent('''
    import caffe

    class Times(caffe.Layer):
        """y = k x, k from param_str."""
        def setup(self, bottom, top):
            self.k = float(self.param_str)

        def reshape(self, bottom, top):
            top[0].reshape(*bottom[0].data.shape)

        def forward(self, bottom, top):
            top[0].data[...] = self.k * bottom[0].data

        def backward(self, top, propagate_down, bottom):
            if propagate_down[0]:
                bottom[0].diff[...] = self.k * top[0].diff
''')

NET = textwrap.dedent('''
    name: "py"
    layer { name: "x" type: "DummyData" top: "x"
      dummy_data_param { shape { dim: 2 dim: 3 }
                         data_filler { type: "constant" value: 1.5 } } }
    layer { name: "times" type: "Python" bottom: "x" top: "y"
      python_param { module: "ptpl_layers" layer: "Times" param_str: "3" } }
    layer { name: "sum" type: "Reduction" bottom: "y" top: "total"
      reduction_param { operation: MEAN axis: 0 } }
''')


def tool():
    path = os.environ.get('POSEIDON_TRAIN') or os.path.join(
        os.path.dirname(os.path.dirname(os.path.dirname(
            os.path.abspath(caffe.__file__)))), 'tools', 'poseidon_train')
    if not os.access(path, os.X_OK):
        pytest.skip('poseidon_train is not built')
    return path


def run(tmp_path, *args):
    (tmp_path / 'ptpl_layers.py').write_text(MODULE)
    net = tmp_path / 'net.prototxt'
    net.write_text(NET)
    env = dict(os.environ)
    package_dir = os.path.dirname(os.path.dirname(caffe.__file__))
    env['PYTHONPATH'] = os.pathsep.join(
        [str(tmp_path), package_dir] +
        [p for p in [env.get('PYTHONPATH')] if p])
    env['GLOG_minloglevel'] = '0'
    return subprocess.run([tool()] + list(args) + ['--model=' + str(net)],
                          env=env, stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, text=True, timeout=120)


def test_time_runs_a_python_layer(tmp_path):
    r = run(tmp_path, 'time', '--iterations=2')
    if 'built without the Python bindings' in r.stdout:
        pytest.skip('poseidon_train was built without embedding Python')
    assert r.returncode == 0, r.stdout[-2000:]
    assert 'imported caffe' in r.stdout
    assert 'times\tforward:' in r.stdout


def test_test_scores_a_python_layer(tmp_path):
    # total = mean over the batch of 3 x 1.5 = 4.5 for each of 3 elements.
    weights = tmp_path / 'w.caffemodel'
    caffe.Net(str(_write_net(tmp_path)), caffe.TEST).save(str(weights))
    r = run(tmp_path, 'test', '--iterations=1', '--weights=' + str(weights))
    if 'built without the Python bindings' in r.stdout:
        pytest.skip('poseidon_train was built without embedding Python')
    assert r.returncode == 0, r.stdout[-2000:]
    assert 'total = 4.5' in r.stdout, r.stdout[-2000:]


def _write_net(tmp_path):
    import sys
    (tmp_path / 'ptpl_layers.py').write_text(MODULE)
    if str(tmp_path) not in sys.path:
        sys.path.insert(0, str(tmp_path))
    net = tmp_path / 'net.prototxt'
    net.write_text(NET)
    return net


def test_missing_module_is_a_clear_error(tmp_path):
    (tmp_path / 'net.prototxt').write_text(NET.replace('ptpl_layers',
                                                       'no_such_module'))
    env = dict(os.environ)
    package_dir = os.path.dirname(os.path.dirname(caffe.__file__))
    env['PYTHONPATH'] = os.pathsep.join(
        [package_dir] + [p for p in [env.get('PYTHONPATH')] if p])
    r = subprocess.run([tool(), 'time', '--iterations=1',
                        '--model=' + str(tmp_path / 'net.prototxt')],
                       env=env, stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT, text=True, timeout=120)
    assert r.returncode == 1
    assert 'Error:' in r.stdout and 'no_such_module' in r.stdout, \
        r.stdout[-2000:]
