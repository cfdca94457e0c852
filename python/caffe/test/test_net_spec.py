"""caffe.NetSpec / caffe.layers / caffe.params: prototxt written in Python
that the C++ parser accepts."""
import re

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


# ---- tops: none, several, in place ---------------------------------------------

def test_zero_top_layers_build_and_forward_nothing(tmp_path):
    n = caffe.NetSpec()
    n.a, n.b = L.DummyData(shape=dict(dim=[3]), ntop=2)
    silence = L.Silence(n.a, ntop=0)
    assert isinstance(silence, caffe.net_spec.Function)
    n.silence_a = silence                      # named by the NetSpec
    n.silence_b = L.Silence(n.b, ntop=0)
    proto = n.to_proto()
    assert [l.name for l in proto.layer] == ['a', 'silence_a', 'silence_b']
    assert list(proto.layer[1].top) == []
    path = tmp_path / 'silent.prototxt'
    path.write_text(str(proto))
    net = caffe.Net(str(path), caffe.TEST)
    assert net.forward() == {}
    # A zero-top layer alone, through caffe.to_proto.
    assert len(caffe.to_proto(L.Silence(L.Input(shape=dict(dim=[1])),
                                        ntop=0)).layer) == 2


def test_several_tops_and_in_place():
    data, label, extra = L.DummyData(shape=[dict(dim=[2, 3])] * 3, ntop=3)
    assert all(isinstance(t, caffe.net_spec.Top) for t in (data, label, extra))
    relu = L.ReLU(data, in_place=True)
    proto = caffe.to_proto(relu, label, extra)
    # Anonymous tops are numbered per layer type, as in pycaffe.
    assert list(proto.layer[0].top) == ['DummyData1', 'DummyData2',
                                        'DummyData3']
    assert proto.layer[0].name == 'DummyData1'
    assert list(proto.layer[1].top) == list(proto.layer[1].bottom) == [
        'DummyData1']


def test_non_top_inputs_are_type_errors_with_caffes_message():
    pair = L.DummyData(ntop=2)
    with pytest.raises(TypeError) as e:
        L.Silence(pair, ntop=0)
    assert re.match(r"^Silence input 0 is not a Top \(type is "
                    r"<(type|class) 'tuple'>\)$", str(e.value))
    L.Silence(*pair, ntop=0)


def test_keyword_routing_as_in_pycaffe():
    n = caffe.NetSpec()
    n.data = L.Input(shape=dict(dim=[1, 1, 8, 8]))
    # *param keywords go to LayerParameter, others to the type's message,
    # then to LayerParameter.
    n.conv = L.Convolution(n.data, num_output=2, kernel_size=3,
                           param=[dict(lr_mult=1), dict(lr_mult=2)],
                           loss_weight=0, propagate_down=[False])
    n.up = L.Deconvolution(n.conv, num_output=1, kernel_size=4, stride=2)
    n.scaled = L.Power(n.data, power=2,
                       transform_param=dict(scale=0.5))
    layers = {l.name: l for l in n.to_proto().layer}
    conv = layers['conv']
    assert conv.convolution_param.num_output == 2
    assert [p.lr_mult for p in conv.param] == [1, 2]
    assert list(conv.propagate_down) == [False]
    assert layers['up'].convolution_param.stride == [2]
    assert layers['scaled'].power_param.power == 2
    assert layers['scaled'].transform_param.scale == 0.5


def test_netspec_dict_interface():
    n = caffe.NetSpec()
    n['data'] = L.Input(shape=dict(dim=[2, 4]))
    n.ip = L.InnerProduct(n['data'], num_output=3)
    assert n.keys() == ['data', 'ip'] and len(n.vals()) == 2
    n.update('ip', dict(bias_term=False))
    assert n.to_proto().layer[1].inner_product_param.bias_term is False
    with pytest.raises(KeyError):
        n['missing']
    with pytest.raises(AttributeError):
        n.missing
    assert getattr(n, 'missing', None) is None
    del n['ip']
    assert n.keys() == ['data']
    names = caffe.net_spec.param_name_dict()
    assert names['Convolution'] == 'convolution'
    assert names['InnerProduct'] == 'inner_product'
    assert names['Pooling'] == 'pooling'
