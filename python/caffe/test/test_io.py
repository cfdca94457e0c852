"""caffe.io: Transformer, image helpers and protobuf conversions."""
import numpy as np
import pytest

import caffe
from caffe.proto import caffe_pb2


def test_transformer_preprocess_and_deprocess():
    t = caffe.io.Transformer({'data': (1, 3, 4, 5)})
    t.set_transpose('data', (2, 0, 1))
    t.set_channel_swap('data', (2, 1, 0))
    t.set_raw_scale('data', 255.0)
    t.set_mean('data', np.array([10.0, 20.0, 30.0]))
    t.set_input_scale('data', 0.5)
    img = np.random.rand(4, 5, 3).astype(np.float32)
    out = t.preprocess('data', img)
    assert out.shape == (3, 4, 5) and out.dtype == np.float32
    expected = (img.transpose(2, 0, 1)[::-1] * 255.0 -
                np.array([10.0, 20.0, 30.0])[:, None, None]) * 0.5
    assert np.allclose(out, expected, atol=1e-4)
    assert np.allclose(t.deprocess('data', out), img, atol=1e-5)
    # Resizes to the input's spatial size first.
    assert t.preprocess('data', np.random.rand(8, 10, 3)).shape == (3, 4, 5)


def test_transformer_checks():
    t = caffe.io.Transformer({'data': (1, 3, 4, 5)})
    with pytest.raises(KeyError):
        t.set_raw_scale('nope', 1.0)
    with pytest.raises(ValueError):
        t.set_transpose('data', (1, 0))
    with pytest.raises(ValueError):
        t.set_channel_swap('data', (1, 0))
    with pytest.raises(ValueError):
        t.set_mean('data', np.zeros(4))
    with pytest.raises(ValueError):
        t.set_mean('data', np.zeros((3, 2, 2)))
    t.set_mean('data', np.ones((3, 4, 5)))  # per-pixel mean is fine


def test_resize_image_and_oversample():
    img = np.arange(16, dtype=np.float32).reshape(4, 4, 1)
    same = caffe.io.resize_image(img, (4, 4))
    assert np.array_equal(same, img)
    big = caffe.io.resize_image(img, (8, 8))
    assert big.shape == (8, 8, 1)
    assert big.min() >= img.min() and big.max() <= img.max()
    near = caffe.io.resize_image(img, (2, 2), interp_order=0)
    assert near.shape == (2, 2, 1)
    const = caffe.io.resize_image(np.full((5, 7, 3), 0.25), (3, 11))
    assert np.allclose(const, 0.25)

    ims = [np.random.rand(6, 8, 3).astype(np.float32) for _ in range(2)]
    crops = caffe.io.oversample(ims, (4, 4))
    assert crops.shape == (20, 4, 4, 3)
    assert np.array_equal(crops[0], ims[0][:4, :4])
    assert np.array_equal(crops[3], ims[0][2:, 4:])
    assert np.array_equal(crops[4], ims[0][1:5, 2:6])
    assert np.array_equal(crops[5], crops[0][:, ::-1])
    assert np.array_equal(crops[10], ims[1][:4, :4])


def test_load_image(tmp_path):
    Image = pytest.importorskip('PIL.Image')
    rgb = (np.random.rand(5, 6, 3) * 255).astype(np.uint8)
    path = str(tmp_path / 'im.png')
    Image.fromarray(rgb).save(path)
    img = caffe.io.load_image(path)
    assert img.shape == (5, 6, 3) and img.dtype == np.float32
    assert np.allclose(img, rgb / 255.0, atol=1e-6)
    assert caffe.io.load_image(path, color=False).shape == (5, 6, 1)


def test_blobproto_round_trips():
    arr = np.random.rand(2, 3, 4).astype(np.float32)
    diff = np.random.rand(2, 3, 4).astype(np.float32)
    blob = caffe.io.array_to_blobproto(arr, diff)
    assert isinstance(blob, caffe_pb2.BlobProto)
    assert np.array_equal(caffe.io.blobproto_to_array(blob), arr)
    assert np.array_equal(caffe.io.blobproto_to_array(blob, True), diff)
    legacy = caffe_pb2.BlobProto(num=1, channels=2, height=1, width=2)
    legacy.data.extend([1, 2, 3, 4])
    assert caffe.io.blobproto_to_array(legacy).shape == (1, 2, 1, 2)
    s = caffe.io.arraylist_to_blobprotovector_str([arr, arr[0]])
    back = caffe.io.blobprotovector_str_to_arraylist(s)
    assert len(back) == 2 and np.array_equal(back[1], arr[0])


def test_datum_round_trips():
    pixels = (np.random.rand(3, 4, 5) * 255).astype(np.uint8)
    datum = caffe.io.array_to_datum(pixels, label=7)
    assert datum.label == 7 and (datum.channels, datum.height,
                                 datum.width) == (3, 4, 5)
    assert np.array_equal(caffe.io.datum_to_array(datum), pixels)
    floats = np.random.rand(1, 2, 2).astype(np.float32)
    assert np.allclose(caffe.io.datum_to_array(
        caffe.io.array_to_datum(floats)), floats)
    with pytest.raises(ValueError):
        caffe.io.array_to_datum(np.zeros((2, 2)))


def test_mean_file_round_trip_into_transformer(tmp_path):
    # A .binaryproto mean (as compute_image_mean writes) into set_mean.
    mean = np.random.rand(1, 3, 4, 5).astype(np.float32)
    path = tmp_path / 'mean.binaryproto'
    path.write_bytes(caffe.io.array_to_blobproto(mean).SerializeToString())
    blob = caffe_pb2.BlobProto()
    blob.ParseFromString(path.read_bytes())
    t = caffe.io.Transformer({'data': (1, 3, 4, 5)})
    t.set_transpose('data', (2, 0, 1))
    t.set_mean('data', caffe.io.blobproto_to_array(blob)[0])
    out = t.preprocess('data', np.zeros((4, 5, 3)))
    assert np.allclose(out, -mean[0])


def test_blobproto_to_array_follows_caffes_shape_rules():
    values = np.arange(100, dtype=np.float32)
    # shape.dim when no legacy dimension is set.
    blob = caffe_pb2.BlobProto()
    blob.data.extend(values)
    blob.shape.dim.extend([10, 10])
    arr = caffe.io.blobproto_to_array(blob)
    assert arr.shape == (10, 10) and arr.dtype == np.float64
    # Legacy num/channels/height/width win when any is set.
    legacy = caffe_pb2.BlobProto(num=1, channels=1, height=10, width=10)
    legacy.data.extend(values)
    assert caffe.io.blobproto_to_array(legacy).shape == (1, 1, 10, 10)
    # No shape at all: one value is a scalar, more cannot be shaped.
    bare = caffe_pb2.BlobProto()
    bare.data.extend(values)
    with pytest.raises(ValueError):
        caffe.io.blobproto_to_array(bare)
    single = caffe_pb2.BlobProto()
    single.data.append(123)
    assert caffe.io.blobproto_to_array(single) == 123
    # double_data when data is empty.
    double = caffe_pb2.BlobProto()
    double.double_data.extend([0.5, 1.5])
    double.shape.dim.append(2)
    assert list(caffe.io.blobproto_to_array(double)) == [0.5, 1.5]


def test_datum_label_and_float_data():
    with_label = caffe.io.array_to_datum(np.ones((10, 10, 3)), label=1)
    without = caffe.io.array_to_datum(np.ones((10, 10, 3)))
    assert not without.HasField('label')
    assert len(with_label.SerializeToString()) > len(
        without.SerializeToString())
    floats = caffe.io.datum_to_array(with_label)
    assert floats.dtype == np.float64 and floats.shape == (10, 10, 3)


def test_oversample_centre_crop_truncates_like_caffe():
    im = np.arange(15 * 15, dtype=np.float32).reshape(15, 15, 1)
    crops = caffe.io.oversample([im], (12, 12))
    # Centre 7.5 - 6 = 1.5, truncated to 1.
    assert np.array_equal(crops[4], im[1:13, 1:13])
    assert np.array_equal(crops[9], im[1:13, 1:13][:, ::-1])
