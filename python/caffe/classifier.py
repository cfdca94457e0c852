"""caffe.Classifier: a Net that classifies images.

    clf = caffe.Classifier('deploy.prototxt', 'weights.caffemodel',
                           image_dims=(256, 256),
                           mean=np.array([104, 117, 123]),
                           raw_scale=255, channel_swap=(2, 1, 0))
    probs = clf.predict([caffe.io.load_image('cat.jpg')])  # N x classes

Images are H x W x K float arrays (caffe.io.load_image); they are resized to
image_dims, cropped to the input size (ten crops averaged when
oversample=True, else the centre crop) and preprocessed by a
caffe.io.Transformer for the net's first input.
"""
import numpy as np

from . import _caffe
from . import io as caffe_io
from .pycaffe import Net


class Classifier(Net):
    def __init__(self, model_file, pretrained_file, image_dims=None,
                 mean=None, input_scale=None, raw_scale=None,
                 channel_swap=None):
        Net.__init__(self, model_file, pretrained_file, _caffe.TEST)
        self.transformer = caffe_io.input_transformer(
            self, 'Classifier', mean, input_scale, raw_scale, channel_swap)
        in_ = self.inputs[0]
        self.crop_dims = np.array(self.blobs[in_].data.shape[2:])
        if image_dims is None:
            image_dims = self.crop_dims
        self.image_dims = tuple(int(d) for d in image_dims)

    def predict(self, inputs, oversample=True):
        """Class scores (the first output) for a list of H x W x K images:
        an N x classes array."""
        inputs = list(inputs)
        if not inputs:
            raise ValueError('predict needs at least one image')
        resized = np.stack([caffe_io.resize_image(im, self.image_dims)
                            for im in inputs])
        if oversample:
            crops = caffe_io.oversample(resized, self.crop_dims)
        else:
            ch, cw = int(self.crop_dims[0]), int(self.crop_dims[1])
            # Truncated like Caffe's centre crop.
            y = int(self.image_dims[0] / 2.0 - ch / 2.0)
            x = int(self.image_dims[1] / 2.0 - cw / 2.0)
            crops = resized[:, y:y + ch, x:x + cw, :]
        in_ = self.inputs[0]
        caffe_in = np.stack([self.transformer.preprocess(in_, c)
                             for c in crops])
        out = self.forward_all(**{in_: caffe_in})
        predictions = out[self.outputs[0]]
        if oversample:
            predictions = predictions.reshape(
                (len(predictions) // 10, 10) + predictions.shape[1:])
            predictions = predictions.mean(axis=1)
        return predictions
