"""Shared fixtures for the caffe package tests: small nets written to
tmp_path. The package under test is the one on sys.path (the build tree's
<build>/python, see scripts/run_python_tests.sh, or an installed one)."""
import os

import numpy as np
import pytest

os.environ.setdefault('GLOG_minloglevel', '2')

import caffe  # noqa: E402

TINY_NET = """
name: "tiny"
layer { name: "data" type: "Input" top: "data"
  input_param { shape { dim: 4 dim: 3 } } }
layer { name: "label" type: "Input" top: "label"
  input_param { shape { dim: 4 } } }
layer { name: "ip" type: "InnerProduct" bottom: "data" top: "ip"
  inner_product_param { num_output: 2
    weight_filler { type: "gaussian" std: 0.5 }
    bias_filler { type: "constant" value: 0.1 } } }
layer { name: "loss" type: "SoftmaxWithLoss" bottom: "ip" bottom: "label"
  top: "loss" }
"""

# A LeNet-shaped convolutional net on 1 x 12 x 12 inputs.
CONV_NET = """
name: "minilenet"
layer { name: "data" type: "Input" top: "data"
  input_param { shape { dim: 2 dim: 1 dim: 12 dim: 12 } } }
layer { name: "conv1" type: "Convolution" bottom: "data" top: "conv1"
  convolution_param { num_output: 4 kernel_size: 3
    weight_filler { type: "xavier" } bias_filler { type: "constant" } } }
layer { name: "pool1" type: "Pooling" bottom: "conv1" top: "pool1"
  pooling_param { pool: MAX kernel_size: 2 stride: 2 } }
layer { name: "relu1" type: "ReLU" bottom: "pool1" top: "pool1" }
layer { name: "ip1" type: "InnerProduct" bottom: "pool1" top: "ip1"
  inner_product_param { num_output: 5 weight_filler { type: "xavier" } } }
layer { name: "prob" type: "Softmax" bottom: "ip1" top: "prob" }
"""


@pytest.fixture(autouse=True)
def _seed():
    caffe.set_mode_cpu()
    caffe.set_random_seed(1701)
    np.random.seed(1701)


@pytest.fixture
def write(tmp_path):
    """write(name, text) -> path of a new file in tmp_path."""
    def _write(name, text):
        path = tmp_path / name
        path.write_text(text)
        return str(path)
    return _write


@pytest.fixture
def tiny_file(write):
    return write('tiny.prototxt', TINY_NET)


@pytest.fixture
def conv_file(write):
    return write('conv.prototxt', CONV_NET)
