"""caffe.Detector: a Net that scores windows of images (R-CNN style).

    det = caffe.Detector('deploy.prototxt', 'weights.caffemodel',
                         mean=np.array([104, 117, 123]), raw_scale=255,
                         channel_swap=(2, 1, 0), context_pad=16)
    dets = det.detect_windows([('img.jpg', np.array([[0, 0, 100, 100]]))])

Windows are (ymin, xmin, ymax, xmax) in pixels, bounds inclusive of ymin/xmin
and exclusive of ymax/xmax. Each window (widened by context_pad pixels of
context at the net's input scale, when given) is cropped, warped to the input
size and scored; context falling outside the image is filled with the mean.
"""
import os

import numpy as np

from . import _caffe
from . import io as caffe_io
from .pycaffe import Net


class Detector(Net):
    def __init__(self, model_file, pretrained_file, mean=None,
                 input_scale=None, raw_scale=None, channel_swap=None,
                 context_pad=None):
        Net.__init__(self, model_file, pretrained_file, _caffe.TEST)
        self.transformer = caffe_io.input_transformer(
            self, 'Detector', mean, input_scale, raw_scale, channel_swap)
        self.configure_crop(context_pad)

    def configure_crop(self, context_pad):
        """Sets the context padding and the value that fills context beyond
        the image (the mean in image space)."""
        in_ = self.inputs[0]
        self.context_pad = int(context_pad or 0)
        channels = self.blobs[in_].data.shape[1]
        fill = np.zeros(channels, dtype=np.float32)
        mean = self.transformer.mean.get(in_)
        if mean is not None:
            fill = mean.reshape(channels, -1).mean(axis=1)
            raw_scale = self.transformer.raw_scale.get(in_)
            if raw_scale:
                fill = fill / raw_scale
            swap = self.transformer.channel_swap.get(in_)
            if swap is not None:
                fill = fill[np.argsort(swap)]
        self.crop_mean = fill

    def crop(self, im, window):
        """The window of `im` (with context) warped to the input size."""
        crop_h, crop_w = self.blobs[self.inputs[0]].data.shape[2:]
        ymin, xmin, ymax, xmax = [int(v) for v in window]
        if self.context_pad == 0:
            return caffe_io.resize_image(im[ymin:ymax, xmin:xmax],
                                         (crop_h, crop_w))
        # Widen the box so that, after warping, context_pad pixels of
        # context surround the window on each side.
        pad = self.context_pad
        scale_y = crop_h / float(crop_h - 2 * pad)
        scale_x = crop_w / float(crop_w - 2 * pad)
        cy, cx = (ymin + ymax) / 2.0, (xmin + xmax) / 2.0
        half_h = (ymax - ymin) * scale_y / 2.0
        half_w = (xmax - xmin) * scale_x / 2.0
        box = np.round([cy - half_h, cx - half_w,
                        cy + half_h, cx + half_w]).astype(int)
        box_h, box_w = max(box[2] - box[0], 1), max(box[3] - box[1], 1)
        canvas = np.empty((box_h, box_w, im.shape[2]), dtype=np.float32)
        canvas[...] = self.crop_mean
        y0, x0 = max(box[0], 0), max(box[1], 0)
        y1, x1 = min(box[2], im.shape[0]), min(box[3], im.shape[1])
        if y1 > y0 and x1 > x0:
            canvas[y0 - box[0]:y1 - box[0], x0 - box[1]:x1 - box[1]] = \
                im[y0:y1, x0:x1]
        return caffe_io.resize_image(canvas, (crop_h, crop_w))

    def detect_windows(self, images_windows):
        """Scores windows: images_windows is a list of (image, windows),
        image a filename or an H x W x K array, windows an array of
        (ymin, xmin, ymax, xmax) rows. Returns one dict per window with
        'window', 'prediction' (the first output) and 'filename'."""
        in_ = self.inputs[0]
        crops, meta = [], []
        for image, windows in images_windows:
            im = caffe_io.load_image(image) if isinstance(image, str) \
                else np.asarray(image, dtype=np.float32)
            for window in np.asarray(windows):
                crops.append(self.transformer.preprocess(
                    in_, self.crop(im, window)))
                meta.append((image if isinstance(image, str) else None,
                             window))
        if not crops:
            return []
        out = self.forward_all(**{in_: np.stack(crops)})
        predictions = out[self.outputs[0]]
        return [{'window': window, 'prediction': predictions[i],
                 'filename': name} for i, (name, window) in enumerate(meta)]

    def detect_selective_search(self, image_fnames):
        """Scores the windows that selective search proposes for each image
        file, as Caffe does: through the `selective_search_ijcv_with_python`
        package (its get_windows runs the MATLAB selective_search_rcnn
        command), then detect_windows. Raises ImportError naming the package
        when it is not installed."""
        try:
            import selective_search_ijcv_with_python as selective_search
        except ImportError as e:
            raise ImportError(
                'detect_selective_search needs the '
                'selective_search_ijcv_with_python package (and MATLAB), as '
                'in Caffe: {}. Without it, compute windows elsewhere and '
                'call detect_windows'.format(e))
        # Absolute paths, since MATLAB runs in another directory.
        image_fnames = [os.path.abspath(f) for f in image_fnames]
        windows_list = selective_search.get_windows(
            image_fnames, cmd='selective_search_rcnn')
        return self.detect_windows(list(zip(image_fnames, windows_list)))
