"""caffe.coord_map: coordinate maps through NetSpec layers, and crop()
checked against the shapes a real caffe.Net computes."""
import numpy as np
import pytest

import caffe
from caffe import layers as L
from caffe import params as P
from caffe import coord_map as cm


def fcn_like(ks=3, stride=1, pad=0, pool=2, up=2, up_pad=0, size=40):
    """data -> conv -> max pool -> deconv (upsampling by `up`)."""
    n = caffe.NetSpec()
    n.data = L.Input(shape=dict(dim=[1, 2, size, size]))
    n.conv = L.Convolution(n.data, num_output=3, kernel_size=ks,
                           stride=stride, pad=pad,
                           weight_filler=dict(type='xavier'))
    n.pool = L.Pooling(n.conv, pool=P.Pooling.MAX, kernel_size=pool,
                       stride=pool)
    n.up = L.Deconvolution(n.pool, convolution_param=dict(
        num_output=3, kernel_size=2 * up, stride=up, pad=up_pad,
        weight_filler=dict(type='xavier')))
    return n


def test_single_layer_maps():
    n = fcn_like(ks=5, stride=2, pad=1)
    axis, a, b = cm.coord_map(n.conv.fn)
    # output x covers inputs stride*x - pad .. + kernel - 1: centre at
    # 2x + 1; so input i maps to output (i - 1) / 2.
    assert axis == 1 and a == pytest.approx(0.5) and b == pytest.approx(-0.5)
    axis, a, b = cm.coord_map(n.pool.fn)
    assert (axis, a[0], b[0]) == (1, 0.5, -0.25)
    axis, a, b = cm.coord_map(L.ReLU(n.pool).fn)
    assert (axis, a, b) == (None, 1, 0)
    with pytest.raises(cm.UndefinedMapException):
        cm.coord_map(L.InnerProduct(n.pool, num_output=2).fn)


def test_compose_and_inverse():
    m = (1, np.array([0.5]), np.array([-0.5]))
    assert cm.compose((None, 1, 0), m)[0] == 1
    ax, a, b = cm.compose(m, cm.inverse(m))
    assert ax == 1 and a == 1 and b == 0
    with pytest.raises(cm.AxisMismatchException):
        cm.compose((1, 1, 0), (2, 1, 0))


@pytest.mark.parametrize('pool,b_expected', [(2, 0), (4, -1)])
def test_pool_then_matching_deconv(pool, b_expected):
    n = fcn_like(pool=pool, up=pool)
    ax, a, b = cm.coord_map_from_to(n.up, n.data)
    assert ax == 1 and a == 1 and b == b_expected


def test_padding_moves_the_offset():
    n = fcn_like()
    _, a0, b0 = cm.coord_map_from_to(n.up, n.data)
    n = fcn_like(pad=3)
    _, a, b = cm.coord_map_from_to(n.up, n.data)
    assert a == a0 and b == b0 - 3
    n = fcn_like(up_pad=3)
    _, a, b = cm.coord_map_from_to(n.up, n.data)
    assert a == a0 and b == b0 + 3


def test_anisotropic_parameters_map_per_axis():
    n = fcn_like(ks=[3, 5], stride=[1, 2], pad=[0, 2])
    ax, a, b = cm.coord_map_from_to(n.up, n.data)
    n_h, n_w = fcn_like(3, 1, 0), fcn_like(5, 2, 2)
    _, a_h, b_h = cm.coord_map_from_to(n_h.up, n_h.data)
    _, a_w, b_w = cm.coord_map_from_to(n_w.up, n_w.data)
    assert list(a) == [a_h[0], a_w[0]] and list(b) == [b_h[0], b_w[0]]


def test_unconnected_tops_raise_runtime_error():
    n = fcn_like()
    n.other = L.Input(shape=dict(dim=[1, 2, 10, 10]))
    with pytest.raises(RuntimeError, match='connected by spatial layers'):
        cm.coord_map_from_to(n.up, n.other)
    n.ip = L.InnerProduct(n.up, num_output=2)
    with pytest.raises(RuntimeError):
        cm.coord_map_from_to(n.ip, n.data)


def test_crop_rejects_scale_mismatch_and_negative_offset():
    n = fcn_like(pool=3, up=2)
    with pytest.raises(AssertionError, match='scale mismatch'):
        cm.crop(n.up, n.data)
    n = fcn_like(up_pad=6)
    with pytest.raises(AssertionError, match='negative offset'):
        cm.crop(n.up, n.data)


def test_crop_of_a_crop_adds_the_offsets():
    n = fcn_like()
    _, _, b = cm.coord_map_from_to(n.up, n.data)
    n.cropped = L.Crop(n.up, n.data, axis=2, offset=4)
    ax, a, b_crop = cm.coord_map_from_to(n.cropped, n.data)
    assert ax == 1 and a == 1 and b_crop == b + 4


@pytest.mark.parametrize('ks,pad,pool,up,size', [
    (3, 0, 2, 2, 40), (5, 4, 2, 2, 37), (3, 10, 4, 4, 64), (7, 3, 2, 2, 33)])
def test_crop_layer_cuts_to_the_reference_size(write, ks, pad, pool, up,
                                               size):
    """The Crop layer crop() specs, built by caffe.Net, gives a top of the
    data's spatial size whose values are the upsampled map at the computed
    offset."""
    n = fcn_like(ks=ks, pad=pad, pool=pool, up=up, size=size)
    n.score = cm.crop(n.up, n.data)
    proto = n.to_proto()
    crop_param = proto.layer[-1].crop_param
    net = caffe.Net(write('crop.prototxt', str(proto)), caffe.TEST)
    net.blobs['data'].data[...] = np.random.randn(1, 2, size, size)
    net.forward()
    assert net.blobs['score'].data.shape[2:] == (size, size)
    _, _, b = cm.coord_map_from_to(n.up, n.data)
    off = int(-b[0])
    assert list(crop_param.offset) == [off] and crop_param.axis == 2
    np.testing.assert_array_equal(
        net.blobs['score'].data,
        net.blobs['up'].data[:, :, off:off + size, off:off + size])
