"""Weights edited in Python load in the C++ tool: `poseidon_train test`
reports the accuracy and loss the Python net computes. Skipped when the tool
is not built (set $POSEIDON_TRAIN, or build the poseidon_train target in the
build tree the package comes from)."""
import os
import re
import subprocess

import numpy as np
import pytest

import caffe

NET = """
name: "interop"
layer { name: "data" type: "DummyData" top: "data" top: "label"
  dummy_data_param {
    shape { dim: 4 dim: 3 } shape { dim: 4 }
    data_filler { type: "constant" value: 1 }
    data_filler { type: "constant" value: 1 } } }
layer { name: "ip" type: "InnerProduct" bottom: "data" top: "ip"
  inner_product_param { num_output: 2 weight_filler { type: "gaussian" } } }
layer { name: "accuracy" type: "Accuracy" bottom: "ip" bottom: "label"
  top: "accuracy" }
layer { name: "loss" type: "SoftmaxWithLoss" bottom: "ip" bottom: "label"
  top: "loss" }
"""


def find_tool():
    tool = os.environ.get('POSEIDON_TRAIN')
    if not tool:
        build = os.path.dirname(os.path.dirname(os.path.dirname(
            os.path.abspath(caffe.__file__))))
        tool = os.path.join(build, 'tools', 'poseidon_train')
    return tool if os.path.isfile(tool) and os.access(tool, os.X_OK) else None


def test_surgery_then_cpp_test_gives_same_scores(write, tmp_path):
    tool = find_tool()
    if tool is None:
        pytest.skip('poseidon_train is not built')
    model = write('interop.prototxt', NET)
    net = caffe.Net(model, caffe.TEST)
    # Surgery: make class 1 win everywhere (labels are all 1).
    net.params['ip'][0].data[...] = 0.0
    net.params['ip'][1].data[...] = [0.0, 5.0]
    weights = str(tmp_path / 'edited.caffemodel')
    net.save(weights)
    out = caffe.Net(model, weights, caffe.TEST).forward()
    assert float(out['accuracy']) == 1.0
    env = dict(os.environ, GLOG_minloglevel='0', GLOG_logtostderr='1')
    run = subprocess.run([tool, 'test', '--model=' + model,
                          '--weights=' + weights, '--iterations=2'],
                         capture_output=True, text=True, env=env, timeout=60)
    assert run.returncode == 0, run.stderr[-2000:]
    log = run.stdout + run.stderr
    acc = re.findall(r'\] accuracy = ([0-9.eE+-]+)', log)
    loss = re.findall(r'\] loss = ([0-9.eE+-]+)', log)
    assert acc and loss, log[-2000:]
    assert float(acc[-1]) == pytest.approx(float(out['accuracy']))
    assert float(loss[-1]) == pytest.approx(float(out['loss']), rel=1e-4)
    assert float(out['loss']) == pytest.approx(np.log1p(np.exp(-5.0)),
                                               rel=1e-4)
