"""Moving data between numpy, images and Caffe's protobuf messages.

- Transformer: turns H x W x K images (floats in [0, 1], RGB) into the
  K x H x W arrays a net's input expects (resize, transpose, channel swap,
  raw scale, mean subtraction, input scale) and back.
- load_image, resize_image, oversample: image helpers (load_image needs
  Pillow; resize_image uses scikit-image and scipy as BVLC's does, with a
  numpy fallback for orders 0 and 1 when they are missing).
- blobproto_to_array, array_to_blobproto, arraylist_to_blobprotovector_str,
  blobprotovector_str_to_arraylist, array_to_datum, datum_to_array:
  conversions to and from caffe_pb2 messages.
"""
import numpy as np

from .proto import caffe_pb2


# ---- protobuf conversions ---------------------------------------------------

def blobproto_to_array(blob, return_diff=False):
    """The data (or diff) of a caffe_pb2.BlobProto as a float64 array, as
    Caffe returns it: shaped by the legacy num/channels/height/width when any
    of them is set, else by shape.dim (no dims: a 0-d array, which works for
    a single value and raises ValueError for more)."""
    values = blob.diff if return_diff else blob.data
    if not len(values):
        values = blob.double_diff if return_diff else blob.double_data
    values = np.array(values, dtype=float)
    if (blob.HasField('num') or blob.HasField('channels') or
            blob.HasField('height') or blob.HasField('width')):
        return values.reshape(blob.num, blob.channels, blob.height,
                              blob.width)
    return values.reshape(tuple(blob.shape.dim))


def array_to_blobproto(arr, diff=None):
    """A caffe_pb2.BlobProto holding `arr` (and `diff`, same shape)."""
    arr = np.asarray(arr)
    blob = caffe_pb2.BlobProto()
    blob.shape.dim.extend(arr.shape)
    blob.data.extend(arr.astype(np.float32).flat)
    if diff is not None:
        diff = np.asarray(diff)
        if diff.shape != arr.shape:
            raise ValueError('diff shape {} differs from data shape {}'.format(
                diff.shape, arr.shape))
        blob.diff.extend(diff.astype(np.float32).flat)
    return blob


def arraylist_to_blobprotovector_str(arraylist):
    """Serialized caffe_pb2.BlobProtoVector of the arrays."""
    vec = caffe_pb2.BlobProtoVector()
    vec.blobs.extend([array_to_blobproto(a) for a in arraylist])
    return vec.SerializeToString()


def blobprotovector_str_to_arraylist(data):
    """The arrays of a serialized caffe_pb2.BlobProtoVector."""
    vec = caffe_pb2.BlobProtoVector()
    vec.ParseFromString(data)
    return [blobproto_to_array(b) for b in vec.blobs]


def array_to_datum(arr, label=None):
    """A caffe_pb2.Datum from a K x H x W array: uint8 arrays go to `data`
    (bytes), others to `float_data`."""
    arr = np.asarray(arr)
    if arr.ndim != 3:
        raise ValueError('array_to_datum needs a 3-D (K x H x W) array, got '
                         'shape {}'.format(arr.shape))
    datum = caffe_pb2.Datum()
    datum.channels, datum.height, datum.width = arr.shape
    if arr.dtype == np.uint8:
        datum.data = arr.tobytes()
    else:
        datum.float_data.extend(arr.astype(np.float32).flat)
    if label is not None:
        datum.label = int(label)
    return datum


def datum_to_array(datum):
    """The K x H x W array of a caffe_pb2.Datum: uint8 for byte data, else
    float64 (as in Caffe). The label is not included."""
    shape = (datum.channels, datum.height, datum.width)
    if len(datum.data):
        return np.frombuffer(datum.data, dtype=np.uint8).reshape(shape).copy()
    return np.array(datum.float_data, dtype=float).reshape(shape)


# ---- images -----------------------------------------------------------------

def load_image(filename, color=True):
    """Reads an image as an H x W x 3 (color) or H x W x 1 float32 array with
    values in [0, 1]. Needs Pillow."""
    try:
        from PIL import Image
    except ImportError:
        raise ImportError('caffe.io.load_image needs Pillow (pip install '
                          'pillow)')
    with Image.open(filename) as im:
        im = im.convert('RGB' if color else 'L')
        img = np.asarray(im, dtype=np.float32) / 255.0
    if img.ndim == 2:
        img = img[:, :, np.newaxis]
    return img


def _resize_axis(img, axis, new_len, interp_order):
    """The numpy fallback of resize_image along one axis (orders 0 and 1)."""
    old_len = img.shape[axis]
    if old_len == new_len:
        return img
    # Sample positions in source coordinates, pixel centres aligned.
    pos = (np.arange(new_len, dtype=np.float64) + 0.5) * old_len / new_len - 0.5
    if interp_order == 0:
        idx = np.clip(np.floor(pos + 0.5).astype(int), 0, old_len - 1)
        return np.take(img, idx, axis=axis)
    pos = np.clip(pos, 0, old_len - 1)
    lo = np.floor(pos).astype(int)
    hi = np.minimum(lo + 1, old_len - 1)
    frac = (pos - lo).astype(np.float32)
    shape = [1] * img.ndim
    shape[axis] = new_len
    frac = frac.reshape(shape)
    return (np.take(img, lo, axis=axis) * (1 - frac) +
            np.take(img, hi, axis=axis) * frac)


def _numpy_resize(im, h, w, interp_order):
    out = _resize_axis(np.asarray(im, dtype=np.float32), 0, h, interp_order)
    out = _resize_axis(out, 1, w, interp_order)
    return np.ascontiguousarray(out, dtype=np.float32)


def _resizers():
    """(skimage.transform.resize, scipy.ndimage.zoom), or None when either
    is not installed. Imported on first use: they take a while to load and
    `import caffe` should not pay for it."""
    global _RESIZERS
    if _RESIZERS is None:
        try:
            from skimage.transform import resize
            from scipy.ndimage import zoom
            _RESIZERS = (resize, zoom)
        except ImportError:
            _RESIZERS = False
    return _RESIZERS or None


_RESIZERS = None


def resize_image(im, new_dims, interp_order=1):
    """Resizes an H x W x K image to new_dims (height, width), as BVLC's
    pycaffe does.

    interp_order: the spline order, 0 (nearest neighbour) to 5; 1, bilinear,
    is the default. Images of 1 or 3 channels go through
    skimage.transform.resize (mode 'constant'; its defaults otherwise, so it
    smooths before downsampling) with their value range mapped to [0, 1] and
    back, so values outside [0, 1] survive; a constant image gives that
    constant at the new size. Other channel counts go through
    scipy.ndimage.zoom with the per-axis scale. Returns float32
    new_dims[0] x new_dims[1] x K.

    Needs scikit-image and scipy (scripts/install_python_deps.sh). Without
    them orders 0 and 1 fall back to a plain numpy nearest/bilinear resize
    (no smoothing, edges clamped: close to, not equal to, BVLC's values) and
    other orders raise ImportError.
    """
    im = np.asarray(im)
    if im.ndim != 3:
        raise ValueError('resize_image needs an H x W x K array, got shape '
                         '{}'.format(im.shape))
    h, w = int(new_dims[0]), int(new_dims[1])
    if h <= 0 or w <= 0:
        raise ValueError('resize_image: bad new_dims {}'.format(new_dims))
    if (isinstance(interp_order, bool) or
            not isinstance(interp_order, (int, np.integer)) or
            not 0 <= interp_order <= 5):
        raise ValueError('resize_image: interp_order must be an integer '
                         'from 0 to 5, got {!r}'.format(interp_order))
    channels = im.shape[-1]
    if channels in (1, 3):
        # A constant image would divide by zero below.
        im_min, im_max = im.min(), im.max()
        if not im_max > im_min:
            return np.full((h, w, channels), im_min, dtype=np.float32)
    resizers = _resizers()
    if resizers is None:
        if interp_order > 1:
            raise ImportError(
                'caffe.io.resize_image with interp_order={} needs '
                'scikit-image and scipy (pip install scikit-image scipy, or '
                'scripts/install_python_deps.sh); without them only orders '
                '0 and 1 work'.format(interp_order))
        return _numpy_resize(im, h, w, interp_order)
    resize, zoom = resizers
    if channels in (1, 3):
        span = im_max - im_min
        unit = resize((im - im_min) / span, (h, w), order=interp_order,
                      mode='constant')
        out = unit * span + im_min
    else:
        scale = (float(h) / im.shape[0], float(w) / im.shape[1], 1.0)
        out = zoom(im, scale, order=interp_order)
    return out.astype(np.float32)


def oversample(images, crop_dims):
    """Ten crops of each H x W x K image: the four corners and the centre,
    then the same five mirrored left-right.

    Returns a float32 (10 N) x crop_h x crop_w x K array.
    """
    crop_h, crop_w = int(crop_dims[0]), int(crop_dims[1])
    images = [np.asarray(im) for im in images]
    if not images:
        raise ValueError('oversample needs at least one image')
    h, w, k = images[0].shape
    if crop_h > h or crop_w > w:
        raise ValueError('crop {}x{} is larger than the image {}x{}'.format(
            crop_h, crop_w, h, w))
    starts = [(0, 0), (0, w - crop_w), (h - crop_h, 0),
              (h - crop_h, w - crop_w),
              # The centre crop starts at the truncated centre - crop / 2,
              # as in Caffe.
              (int(h / 2.0 - crop_h / 2.0), int(w / 2.0 - crop_w / 2.0))]
    crops = np.empty((10 * len(images), crop_h, crop_w, k), dtype=np.float32)
    i = 0
    for im in images:
        for y, x in starts:
            crops[i] = im[y:y + crop_h, x:x + crop_w, :]
            i += 1
        crops[i:i + 5] = crops[i - 5:i, :, ::-1, :]
        i += 5
    return crops


# ---- Transformer ------------------------------------------------------------

class Transformer(object):
    """Prepares images for a net's inputs and turns inputs back into images.

    inputs: {input blob name: its shape (N, K, H, W)}, e.g.
    ``{'data': net.blobs['data'].data.shape}``.

    preprocess(name, image H x W x K) applies, in order: resize to the
    input's H x W, transpose, channel swap, raw scale, mean subtraction,
    input scale. deprocess undoes them (except the resize).
    """

    def __init__(self, inputs):
        self.inputs = dict((k, tuple(v)) for k, v in inputs.items())
        self.transpose = {}
        self.channel_swap = {}
        self.raw_scale = {}
        self.mean = {}
        self.input_scale = {}

    def _check_input(self, in_):
        if in_ not in self.inputs:
            raise KeyError('{!r} is not one of the net inputs: {}'.format(
                in_, ', '.join(self.inputs)))

    def preprocess(self, in_, data):
        """An H x W x K image -> the K x H x W float32 array for input in_."""
        self._check_input(in_)
        caffe_in = np.asarray(data, dtype=np.float32)
        in_dims = self.inputs[in_][2:]
        if caffe_in.ndim == 3 and caffe_in.shape[:2] != in_dims:
            caffe_in = resize_image(caffe_in, in_dims)
        if in_ in self.transpose:
            caffe_in = caffe_in.transpose(self.transpose[in_])
        if in_ in self.channel_swap:
            caffe_in = caffe_in[self.channel_swap[in_], :, :]
        caffe_in = np.array(caffe_in, dtype=np.float32)  # own copy
        if in_ in self.raw_scale:
            caffe_in *= self.raw_scale[in_]
        if in_ in self.mean:
            caffe_in -= self.mean[in_]
        if in_ in self.input_scale:
            caffe_in *= self.input_scale[in_]
        return caffe_in

    def deprocess(self, in_, data):
        """Inverts preprocess (but not its resize)."""
        self._check_input(in_)
        decaf_in = np.array(data, dtype=np.float32).squeeze()
        if in_ in self.input_scale:
            decaf_in /= self.input_scale[in_]
        if in_ in self.mean:
            decaf_in += self.mean[in_]
        if in_ in self.raw_scale:
            decaf_in /= self.raw_scale[in_]
        if in_ in self.channel_swap:
            decaf_in = decaf_in[np.argsort(self.channel_swap[in_]), :, :]
        if in_ in self.transpose:
            decaf_in = decaf_in.transpose(np.argsort(self.transpose[in_]))
        return decaf_in

    def set_transpose(self, in_, order):
        """Axis order for the input, e.g. (2, 0, 1) for H x W x K -> K x H x
        W."""
        self._check_input(in_)
        if len(order) != len(self.inputs[in_]) - 1:
            raise ValueError('transpose order {} must have {} axes, one per '
                             'axis of an input item'.format(
                                 order, len(self.inputs[in_]) - 1))
        self.transpose[in_] = tuple(order)

    def set_channel_swap(self, in_, order):
        """Channel order after transposing, e.g. (2, 1, 0) for RGB -> BGR."""
        self._check_input(in_)
        if len(order) != self.inputs[in_][1]:
            raise ValueError('channel swap {} must list the input\'s {} '
                             'channels'.format(order, self.inputs[in_][1]))
        self.channel_swap[in_] = list(order)

    def set_raw_scale(self, in_, scale):
        """Multiplies the image (e.g. by 255 for [0, 1] -> [0, 255]) before
        the mean is subtracted."""
        self._check_input(in_)
        self.raw_scale[in_] = scale

    def set_mean(self, in_, mean):
        """The mean to subtract: K values (one per channel) or a K x H x W
        array."""
        self._check_input(in_)
        mean = np.asarray(mean, dtype=np.float32)
        channels = self.inputs[in_][1]
        if mean.ndim == 1:
            if mean.shape[0] != channels:
                raise ValueError('mean has {} channels; the input has '
                                 '{}'.format(mean.shape[0], channels))
            mean = mean[:, np.newaxis, np.newaxis]
        else:
            shape = mean.shape if mean.ndim == 3 else (1,) + mean.shape
            if len(shape) != 3 or shape != tuple(self.inputs[in_][1:]):
                raise ValueError('mean shape {} is incompatible with the '
                                 'input shape {}'.format(
                                     mean.shape, self.inputs[in_][1:]))
            mean = mean.reshape(shape)
        self.mean[in_] = mean

    def set_input_scale(self, in_, scale):
        """Multiplies the input after mean subtraction."""
        self._check_input(in_)
        self.input_scale[in_] = scale


def input_transformer(net, what, mean=None, input_scale=None, raw_scale=None,
                      channel_swap=None):
    """The Transformer of `net`'s first input for images given as H x W x K
    arrays, as Classifier and Detector set it up; `what` names the caller in
    the error raised when the net has no input."""
    if not net.inputs:
        raise ValueError('%s needs a net with an Input layer' % what)
    in_ = net.inputs[0]
    transformer = Transformer({in_: net.blobs[in_].data.shape})
    transformer.set_transpose(in_, (2, 0, 1))
    if mean is not None:
        transformer.set_mean(in_, mean)
    if input_scale is not None:
        transformer.set_input_scale(in_, input_scale)
    if raw_scale is not None:
        transformer.set_raw_scale(in_, raw_scale)
    if channel_swap is not None:
        transformer.set_channel_swap(in_, channel_swap)
    return transformer
