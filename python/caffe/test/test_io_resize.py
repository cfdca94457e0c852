"""caffe.io.resize_image against what BVLC's pycaffe computes: 1- and
3-channel images through skimage.transform.resize on the value range mapped
to [0, 1] (mode 'constant'), other channel counts through
scipy.ndimage.zoom, every interp_order 0..5; constant images; the numpy
fallback when scikit-image is missing; the callers (Transformer, oversample,
load_image, Classifier's path)."""
import numpy as np
import pytest

import caffe

skimage_transform = pytest.importorskip('skimage.transform')
ndimage = pytest.importorskip('scipy.ndimage')

ORDERS = [0, 1, 2, 3, 4, 5]
# Up in both axes, down in both, and mixed.
SIZES = [(9, 13), (3, 4), (10, 3)]


def bvlc_skimage(im, new_dims, order):
    """The 1/3-channel path: range to [0, 1], skimage resize, range back."""
    lo, hi = im.min(), im.max()
    unit = skimage_transform.resize((im - lo) / (hi - lo), new_dims,
                                    order=order, mode='constant')
    return (unit * (hi - lo) + lo).astype(np.float32)


def bvlc_zoom(im, new_dims, order):
    scale = (new_dims[0] / im.shape[0], new_dims[1] / im.shape[1], 1)
    return ndimage.zoom(im, scale, order=order).astype(np.float32)


def image(channels, lo=0.0, hi=1.0, shape=(6, 7), seed=0):
    rng = np.random.RandomState(seed + channels)
    return lo + (hi - lo) * rng.rand(shape[0], shape[1], channels)


@pytest.mark.parametrize('order', ORDERS)
@pytest.mark.parametrize('channels', [1, 3])
def test_one_and_three_channels_match_skimage(order, channels):
    im = image(channels)
    for dims in SIZES:
        out = caffe.io.resize_image(im, dims, interp_order=order)
        assert out.shape == dims + (channels,)
        assert out.dtype == np.float32
        np.testing.assert_allclose(out, bvlc_skimage(im, dims, order),
                                   rtol=0, atol=1e-6)


@pytest.mark.parametrize('order', ORDERS)
@pytest.mark.parametrize('channels', [1, 3])
def test_values_outside_unit_range_survive(order, channels):
    # [-40, 300]: neither clipped to [0, 1] nor rescaled into it.
    im = image(channels, lo=-40.0, hi=300.0)
    out = caffe.io.resize_image(im, (11, 5), interp_order=order)
    np.testing.assert_allclose(out, bvlc_skimage(im, (11, 5), order),
                               rtol=1e-6, atol=1e-4)
    assert out.min() < -20 and out.max() > 250


@pytest.mark.parametrize('order', ORDERS)
@pytest.mark.parametrize('channels', [2, 4, 5])
def test_other_channel_counts_match_zoom(order, channels):
    im = image(channels, lo=-3.0, hi=7.0)
    for dims in SIZES:
        out = caffe.io.resize_image(im, dims, interp_order=order)
        assert out.shape == dims + (channels,)
        assert out.dtype == np.float32
        np.testing.assert_allclose(out, bvlc_zoom(im, dims, order),
                                   rtol=0, atol=1e-5)


def test_paths_differ_where_bvlc_differs():
    # A 4-channel image is zoomed, its first 3 channels resized by skimage:
    # at the same size, their results differ (so the dispatch is checked).
    im = image(4)
    four = caffe.io.resize_image(im, (12, 14), interp_order=1)
    three = caffe.io.resize_image(im[:, :, :3], (12, 14), interp_order=1)
    assert not np.allclose(four[:, :, :3], three, atol=1e-3)


@pytest.mark.parametrize('channels', [1, 3])
@pytest.mark.parametrize('value', [0.25, -7.5, 300.0])
def test_constant_image_is_filled(channels, value):
    im = np.full((5, 7, channels), value)
    for order in ORDERS:
        out = caffe.io.resize_image(im, (3, 11), interp_order=order)
        assert out.shape == (3, 11, channels) and out.dtype == np.float32
        assert np.all(out == np.float32(value))


def test_bad_interp_order():
    im = image(3)
    for bad in (-1, 6, 1.5, True):
        with pytest.raises(ValueError, match='interp_order'):
            caffe.io.resize_image(im, (4, 4), interp_order=bad)


def test_without_scikit_image(monkeypatch):
    # As if scikit-image or scipy did not import: orders 0 and 1 use the
    # numpy resize, higher orders name what to install.
    monkeypatch.setattr(caffe.io, '_RESIZERS', False)
    im = np.arange(16, dtype=np.float32).reshape(4, 4, 1)
    up = caffe.io.resize_image(im, (8, 8))
    assert up.shape == (8, 8, 1) and up.dtype == np.float32
    assert up.min() == im.min() and up.max() == im.max()  # edges clamped
    near = caffe.io.resize_image(im, (2, 2), interp_order=0)
    assert near.shape == (2, 2, 1)
    assert set(near.ravel()) <= set(im.ravel())
    with pytest.raises(ImportError, match='scikit-image'):
        caffe.io.resize_image(im, (8, 8), interp_order=3)


def test_callers_resize_as_bvlc(tmp_path):
    # Transformer.preprocess resizes with the default order 1.
    im = image(3, shape=(8, 10))
    t = caffe.io.Transformer({'data': (1, 3, 4, 5)})
    t.set_transpose('data', (2, 0, 1))
    out = t.preprocess('data', im.astype(np.float32))
    expected = bvlc_skimage(im.astype(np.float32), (4, 5), 1)
    np.testing.assert_allclose(out, expected.transpose(2, 0, 1), atol=1e-6)
    # load_image -> resize_image -> oversample.
    Image = pytest.importorskip('PIL.Image')
    path = str(tmp_path / 'im.png')
    Image.fromarray((im * 255).astype(np.uint8)).save(path)
    loaded = caffe.io.load_image(path)
    resized = caffe.io.resize_image(loaded, (12, 12))
    np.testing.assert_allclose(resized, bvlc_skimage(loaded, (12, 12), 1),
                               atol=1e-6)
    crops = caffe.io.oversample([resized], (10, 10))
    assert crops.shape == (10, 10, 10, 3)
    assert np.array_equal(crops[4], resized[1:11, 1:11])
