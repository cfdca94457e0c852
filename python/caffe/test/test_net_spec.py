"""caffe.NetSpec / caffe.layers / caffe.params: prototxt written in Python
that the C++ parser accepts."""
import numpy as np
import pytest

import caffe
from caffe import layers as L, params as P
from caffe.proto import caffe_pb2


def lenet(batch):
    n = caffe.NetSpec()
    n.data, n.label = L.DummyData(shape=[dict(dim=[batch, 1, 12, 12]),
                                         dict(dim=[batch])],
                                  data_filler=dict(type='gaussian'), ntop=2)
    n.conv1 = L.Convolution(n.data, kernel_size=3, num_output=4,
                            weight_filler=dict(type='xavier'))
    n.pool1 = L.Pooling(n.conv1, kernel_size=2, stride=2, pool=P.Pooling.MAX)
    n.relu1 = L.ReLU(n.pool1, in_place=True)
    n.ip1 = L.InnerProduct(n.relu1, num_output=3,
                           weight_filler=dict(type='xavier'),
                           param=[dict(lr_mult=1), dict(lr_mult=2)])
    n.loss = L.SoftmaxWithLoss(n.ip1, n.label)
    return n.to_proto()


def test_to_proto_structure():
    proto = lenet(4)
    assert isinstance(proto, caffe_pb2.NetParameter)
    names = [l.name for l in proto.layer]
    assert names == ['data', 'conv1', 'pool1', 'relu1', 'ip1', 'loss']
    relu = proto.layer[3]
    assert list(relu.bottom) == ['pool1'] and list(relu.top) == ['pool1']
    assert list(proto.layer[4].bottom) == ['pool1']
    conv = proto.layer[1].convolution_param
    assert list(conv.kernel_size) == [3] and conv.num_output == 4
    assert proto.layer[2].pooling_param.pool == caffe_pb2.PoolingParameter.MAX
    assert [p.lr_mult for p in proto.layer[4].param] == [1, 2]
    assert list(proto.layer[0].top) == ['data', 'label']


def test_generated_prototxt_runs_in_cpp(tmp_path):
    path = tmp_path / 'lenet.prototxt'
    path.write_text(str(lenet(4)))
    net = caffe.Net(str(path), caffe.TRAIN)
    assert net.blobs['data'].data.shape == (4, 1, 12, 12)
    assert net.params['ip1'][0].data.shape == (3, 100)
    loss = float(net.forward()['loss'])
    assert np.isfinite(loss) and loss > 0


def test_autonames_and_top_to_proto():
    data = L.Input(shape=dict(dim=[2, 3]))
    ip = L.InnerProduct(data, num_output=2)
    proto = L.ReLU(ip).to_proto()
    assert [l.name for l in proto.layer] == ['Input1', 'InnerProduct1',
                                             'ReLU1']
    assert list(proto.layer[2].bottom) == ['InnerProduct1']
    proto2 = caffe.to_proto(ip)
    assert len(proto2.layer) == 2


def test_layer_level_fields_and_errors():
    n = caffe.NetSpec()
    n.data = L.Input(shape=dict(dim=[1, 2]))
    n.out = L.InnerProduct(n.data, num_output=1, name='custom',
                           include=dict(phase=caffe.TEST), loss_weight=0.5,
                           inner_product_param=dict(bias_term=False))
    layer = n.to_proto().layer[1]
    assert layer.name == 'custom'
    assert layer.include[0].phase == caffe.TEST
    assert list(layer.loss_weight) == [0.5]
    assert layer.inner_product_param.bias_term is False
    assert layer.inner_product_param.num_output == 1
    n.bad = L.InnerProduct(n.data, no_such_field=1)
    with pytest.raises(AttributeError, match='no_such_field'):
        n.to_proto()
    with pytest.raises(TypeError):
        n.x = 3
    with pytest.raises(AttributeError):
        P.NoSuchThing.X
