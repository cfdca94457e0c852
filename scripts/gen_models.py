#!/usr/bin/env python3
"""Writes the prototxt files of the large reference models.

Produces models/<net>/{train_val,deploy,solver}.prototxt for alexnet, vgg16,
googlenet and resnet50 from one description per network, so that the
training net and the deployment net can never drift apart, and the timing
nets scripts/bench/nets/<net>_time.prototxt (the training net fed by an Input
layer and a constant DummyData label, for `poseidon_train time`). models/ is
committed (users expect the files there) and CI checks it against this
script (ctest generated_models); the timing nets are not: each benchmark
writes them when it starts (scripts/bench/timing_nets.py). The small models
(lenet, cifar10_quick) and their timing nets are written by hand.

While building, every blob's (channels, height, width) is tracked with
Caffe's shape rules (convolution rounds down, pooling rounds up), which gives
the parameter count of each net; it is printed for checking against the
published figures.

Usage:
  scripts/gen_models.py              # (re)write the files, print the counts
  scripts/gen_models.py --check      # fail if a file of models/ is stale
  scripts/gen_models.py --timing-only  # write only the timing nets
  scripts/gen_models.py --out DIR    # write under DIR/ instead of the repo

Only the Python standard library is needed.
"""

import argparse
import math
import os
import sys

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TIMING_DIR = "scripts/bench/nets/"

IMAGENET_TRAIN = "data/ilsvrc12/ilsvrc12_train_lmdb"
IMAGENET_VAL = "data/ilsvrc12/ilsvrc12_val_lmdb"
# Per-channel BGR means of the ILSVRC-2012 training images.
IMAGENET_MEAN_BGR = (104, 117, 123)
IMAGENET_VAL_IMAGES = 50000


# ---------------------------------------------------------------------------
# Text-format writer.


class Enum(str):
    """A protobuf enum value; written without quotes."""


def _scalar(value):
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, Enum):
        return str(value)
    if isinstance(value, str):
        return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'
    if isinstance(value, float):
        text = repr(value)
        return text[:-2] if text.endswith(".0") else text
    return str(value)


def _emit(fields, indent, out):
    """Appends the text format of `fields` (a dict) to the list `out`.

    A list value is a repeated field; a dict value is a sub-message.
    """
    pad = "  " * indent
    for key, value in fields.items():
        values = value if isinstance(value, list) else [value]
        for item in values:
            if isinstance(item, dict):
                out.append("%s%s {" % (pad, key))
                _emit(item, indent + 1, out)
                out.append("%s}" % pad)
            else:
                out.append("%s%s: %s" % (pad, key, _scalar(item)))


def to_text(fields, header=None):
    out = []
    if header:
        out.extend("# " + line if line else "#" for line in header)
    _emit(fields, 0, out)
    return "\n".join(out) + "\n"


# ---------------------------------------------------------------------------
# Network builder.

WEIGHT_AND_BIAS = [
    {"lr_mult": 1, "decay_mult": 1},
    {"lr_mult": 2, "decay_mult": 0},
]
WEIGHT_ONLY = [{"lr_mult": 1, "decay_mult": 1}]
# BatchNorm's three blobs (mean, variance, moving-average factor) are
# statistics, never updated by the solver.
BN_STATS = [{"lr_mult": 0, "decay_mult": 0}] * 3
# Scale after BatchNorm: gamma and beta learn at the base rate, no decay.
SCALE_PARAMS = [{"lr_mult": 1, "decay_mult": 0}] * 2


def constant(value=0):
    return {"type": "constant", "value": value}


def gaussian(std):
    return {"type": "gaussian", "std": std}


XAVIER = {"type": "xavier"}
MSRA = {"type": "msra"}


def _pair(value):
    """(height, width) of an int or a pair."""
    if isinstance(value, tuple):
        return value
    return value, value


def conv_out(size, kernel, stride, pad):
    return (size + 2 * pad - kernel) // stride + 1


def pool_out(size, kernel, stride, pad):
    out = int(math.ceil(float(size + 2 * pad - kernel) / stride)) + 1
    # The last window must start inside the image (or its left padding).
    if pad > 0 and (out - 1) * stride >= size + pad:
        out -= 1
    return out


class NetBuilder(object):
    """Accumulates the layers of one variant of a network.

    Variants:
      "train_val": Data layers for TRAIN and TEST, fillers and learning-rate
          multipliers, losses, TEST-phase accuracies.
      "deploy": an Input layer; no multipliers, fillers or anything used only
          in training (dropout, auxiliary losses, accuracy); ends in a Softmax
          named "prob".
      "time": as train_val, but fed by an Input layer of `time_batch` images
          and a DummyData label of zeros, without accuracies.
    """

    def __init__(self, name, variant, time_batch=None):
        assert variant in ("train_val", "deploy", "time"), variant
        self.name = name
        self.variant = variant
        self.deploy = variant == "deploy"
        self.time_batch = time_batch
        self.layers = []
        self.shapes = {}  # blob name -> (channels, height, width)
        self.learnable = 0  # weights, biases, Scale gamma/beta
        self.statistics = 0  # BatchNorm mean/variance/factor

    def _add(self, layer):
        self.layers.append(layer)

    # Data.

    def time_inputs(self, image_shape):
        """Input "data" of time_batch images, DummyData "label" of zeros."""
        batch = self.time_batch
        self._add(
            {
                "name": "data",
                "type": "Input",
                "top": "data",
                "input_param": {"shape": {"dim": [batch] + list(image_shape)}},
            }
        )
        self._add(
            {
                "name": "label",
                "type": "DummyData",
                "top": "label",
                "dummy_data_param": {
                    "data_filler": constant(0),
                    "shape": {"dim": [batch]},
                },
            }
        )

    def imagenet_data(
        self,
        train_batch,
        test_batch,
        crop,
        mean_file=None,
        sources=(IMAGENET_TRAIN, IMAGENET_VAL),
    ):
        if self.deploy:
            self._add(
                {
                    "name": "data",
                    "type": "Input",
                    "top": "data",
                    "input_param": {"shape": {"dim": [10, 3, crop, crop]}},
                }
            )
        elif self.variant == "time":
            self.time_inputs((3, crop, crop))
        else:
            # Random crops and mirroring in TRAIN; the centre crop in TEST.
            for phase, source, batch in (
                ("TRAIN", sources[0], train_batch),
                ("TEST", sources[1], test_batch),
            ):
                transform = {"mirror": True} if phase == "TRAIN" else {}
                transform["crop_size"] = crop
                if mean_file:
                    transform["mean_file"] = mean_file
                else:
                    transform["mean_value"] = list(IMAGENET_MEAN_BGR)
                self._add(
                    {
                        "name": "data",
                        "type": "Data",
                        "top": ["data", "label"],
                        "include": {"phase": Enum(phase)},
                        "transform_param": transform,
                        "data_param": {
                            "source": source,
                            "batch_size": batch,
                            "backend": Enum("LMDB"),
                        },
                    }
                )
        self.shapes["data"] = (3, crop, crop)
        return "data"

    # Layers with parameters.

    def conv(
        self,
        name,
        bottom,
        num_output,
        kernel,
        stride=1,
        pad=0,
        group=1,
        bias=True,
        weight_filler=XAVIER,
        bias_filler=None,
        top=None,
    ):
        top = top or name
        param = {"num_output": num_output}
        if not bias:
            param["bias_term"] = False
        # An int is a square kernel (or pad); a (height, width) pair is not.
        kernel_h, kernel_w = _pair(kernel)
        pad_h, pad_w = _pair(pad)
        if pad_h == pad_w:
            if pad_h:
                param["pad"] = pad_h
        else:
            param["pad_h"] = pad_h
            param["pad_w"] = pad_w
        if kernel_h == kernel_w:
            param["kernel_size"] = kernel_h
        else:
            param["kernel_h"] = kernel_h
            param["kernel_w"] = kernel_w
        if stride != 1:
            param["stride"] = stride
        if group != 1:
            param["group"] = group
        layer = {
            "name": name,
            "type": "Convolution",
            "bottom": bottom,
            "top": top,
        }
        if not self.deploy:
            layer["param"] = WEIGHT_AND_BIAS if bias else WEIGHT_ONLY
            param["weight_filler"] = weight_filler
            if bias:
                param["bias_filler"] = bias_filler or constant(0)
        layer["convolution_param"] = param
        self._add(layer)
        channels, height, width = self.shapes[bottom]
        assert channels % group == 0 and num_output % group == 0, name
        self.learnable += (
            num_output * (channels // group) * kernel_h * kernel_w
        )
        if bias:
            self.learnable += num_output
        self.shapes[top] = (
            num_output,
            conv_out(height, kernel_h, stride, pad_h),
            conv_out(width, kernel_w, stride, pad_w),
        )
        return top

    def fc(
        self,
        name,
        bottom,
        num_output,
        weight_filler=XAVIER,
        bias_filler=None,
        top=None,
    ):
        top = top or name
        layer = {
            "name": name,
            "type": "InnerProduct",
            "bottom": bottom,
            "top": top,
        }
        param = {"num_output": num_output}
        if not self.deploy:
            layer["param"] = WEIGHT_AND_BIAS
            param["weight_filler"] = weight_filler
            param["bias_filler"] = bias_filler or constant(0)
        layer["inner_product_param"] = param
        self._add(layer)
        channels, height, width = self.shapes[bottom]
        self.learnable += num_output * channels * height * width + num_output
        self.shapes[top] = (num_output, 1, 1)
        return top

    def batch_norm_scale(self, bn_name, scale_name, blob, eps=None):
        """BatchNorm then Scale (with bias), both in place on `blob`.

        use_global_stats is left unset: it follows the phase (mini-batch
        statistics in TRAIN, the accumulated ones in TEST). `eps` overrides
        BatchNorm's default of 1e-5.
        """
        bn = {
            "name": bn_name,
            "type": "BatchNorm",
            "bottom": blob,
            "top": blob,
        }
        if eps is not None:
            bn["batch_norm_param"] = {"eps": eps}
        scale = {
            "name": scale_name,
            "type": "Scale",
            "bottom": blob,
            "top": blob,
        }
        if not self.deploy:
            bn["param"] = BN_STATS
            scale["param"] = SCALE_PARAMS
        scale["scale_param"] = {"bias_term": True}
        self._add(bn)
        self._add(scale)
        channels = self.shapes[blob][0]
        self.statistics += 2 * channels + 1
        self.learnable += 2 * channels
        return blob

    # Layers without parameters.

    def relu(self, name, blob):
        self._add({"name": name, "type": "ReLU", "bottom": blob, "top": blob})
        return blob

    def dropout(self, name, blob, ratio):
        if self.deploy:
            return blob
        self._add(
            {
                "name": name,
                "type": "Dropout",
                "bottom": blob,
                "top": blob,
                "dropout_param": {"dropout_ratio": ratio},
            }
        )
        return blob

    def lrn(
        self, name, bottom, local_size=5, alpha=0.0001, beta=0.75, top=None
    ):
        top = top or name
        self._add(
            {
                "name": name,
                "type": "LRN",
                "bottom": bottom,
                "top": top,
                "lrn_param": {
                    "local_size": local_size,
                    "alpha": alpha,
                    "beta": beta,
                },
            }
        )
        self.shapes[top] = self.shapes[bottom]
        return top

    def pool(
        self,
        name,
        bottom,
        method,
        kernel=None,
        stride=1,
        pad=0,
        global_pooling=False,
        top=None,
    ):
        top = top or name
        param = {"pool": Enum(method)}
        channels, height, width = self.shapes[bottom]
        if global_pooling:
            param["global_pooling"] = True
            self.shapes[top] = (channels, 1, 1)
        else:
            param["kernel_size"] = kernel
            if stride != 1:
                param["stride"] = stride
            if pad:
                param["pad"] = pad
            self.shapes[top] = (
                channels,
                pool_out(height, kernel, stride, pad),
                pool_out(width, kernel, stride, pad),
            )
        self._add(
            {
                "name": name,
                "type": "Pooling",
                "bottom": bottom,
                "top": top,
                "pooling_param": param,
            }
        )
        return top

    def concat(self, name, bottoms, top=None):
        top = top or name
        self._add(
            {
                "name": name,
                "type": "Concat",
                "bottom": list(bottoms),
                "top": top,
            }
        )
        shapes = [self.shapes[b] for b in bottoms]
        assert all(s[1:] == shapes[0][1:] for s in shapes), (name, shapes)
        self.shapes[top] = (sum(s[0] for s in shapes),) + shapes[0][1:]
        return top

    def eltwise_sum(self, name, bottoms, top=None):
        top = top or name
        self._add(
            {
                "name": name,
                "type": "Eltwise",
                "bottom": list(bottoms),
                "top": top,
            }
        )
        shapes = [self.shapes[b] for b in bottoms]
        assert all(s == shapes[0] for s in shapes), (name, shapes)
        self.shapes[top] = shapes[0]
        return top

    # Heads.

    def loss(self, name, bottom, loss_weight=None):
        """A softmax loss (train_val only)."""
        if self.deploy:
            return
        layer = {
            "name": name,
            "type": "SoftmaxWithLoss",
            "bottom": [bottom, "label"],
            "top": name,
        }
        if loss_weight is not None:
            layer["loss_weight"] = loss_weight
        self._add(layer)

    def accuracy(self, name, bottom, top_k=1):
        """Top-k accuracy in the TEST phase (train_val only)."""
        if self.variant != "train_val":
            return
        layer = {
            "name": name,
            "type": "Accuracy",
            "bottom": [bottom, "label"],
            "top": name,
            "include": {"phase": Enum("TEST")},
        }
        if top_k != 1:
            layer["accuracy_param"] = {"top_k": top_k}
        self._add(layer)

    def classifier_head(self, bottom, loss_name, prefix=""):
        """Main loss + top-1/top-5 accuracy, or the deploy Softmax."""
        if self.deploy:
            self._add(
                {
                    "name": "prob",
                    "type": "Softmax",
                    "bottom": bottom,
                    "top": "prob",
                }
            )
            return
        self.accuracy(prefix + "top-1", bottom)
        self.accuracy(prefix + "top-5", bottom, top_k=5)
        self.loss(loss_name, bottom)

    def text(self, header):
        return to_text({"name": self.name, "layer": self.layers}, header)


# ---------------------------------------------------------------------------
# AlexNet (Krizhevsky et al., 2012), the original two-tower layout: conv2,
# conv4 and conv5 split their inputs into two groups; LRN follows the ReLUs
# of conv1 and conv2, before pooling. CaffeNet, the BVLC reference variant,
# pools before normalising (same parameters, smaller LRN inputs).

ALEXNET_MEAN_FILE = "data/ilsvrc12/imagenet_mean.binaryproto"


def build_alexnet(variant, time_batch=None):
    return alexnet_like("AlexNet", variant, time_batch, pool_first=False)


def build_caffenet(variant, time_batch=None):
    """CaffeNet: AlexNet with each LRN moved after its max pooling."""
    return alexnet_like("CaffeNet", variant, time_batch, pool_first=True)


def alexnet_like(name, variant, time_batch, pool_first):
    net = NetBuilder(name, variant, time_batch)

    def norm_and_pool(index, blob):
        if pool_first:
            blob = net.pool("pool%d" % index, blob, "MAX", 3, stride=2)
            return net.lrn("norm%d" % index, blob)
        blob = net.lrn("norm%d" % index, blob)
        return net.pool("pool%d" % index, blob, "MAX", 3, stride=2)

    blob = net.imagenet_data(
        train_batch=256, test_batch=50, crop=227, mean_file=ALEXNET_MEAN_FILE
    )
    one_tenth = constant(0.1)
    blob = net.conv(
        "conv1", blob, 96, 11, stride=4, weight_filler=gaussian(0.01)
    )
    net.relu("relu1", blob)
    blob = norm_and_pool(1, blob)
    blob = net.conv(
        "conv2",
        blob,
        256,
        5,
        pad=2,
        group=2,
        weight_filler=gaussian(0.01),
        bias_filler=one_tenth,
    )
    net.relu("relu2", blob)
    blob = norm_and_pool(2, blob)
    blob = net.conv("conv3", blob, 384, 3, pad=1, weight_filler=gaussian(0.01))
    net.relu("relu3", blob)
    blob = net.conv(
        "conv4",
        blob,
        384,
        3,
        pad=1,
        group=2,
        weight_filler=gaussian(0.01),
        bias_filler=one_tenth,
    )
    net.relu("relu4", blob)
    blob = net.conv(
        "conv5",
        blob,
        256,
        3,
        pad=1,
        group=2,
        weight_filler=gaussian(0.01),
        bias_filler=one_tenth,
    )
    net.relu("relu5", blob)
    blob = net.pool("pool5", blob, "MAX", 3, stride=2)
    for index in (6, 7):
        blob = net.fc(
            "fc%d" % index,
            blob,
            4096,
            weight_filler=gaussian(0.005),
            bias_filler=one_tenth,
        )
        net.relu("relu%d" % index, blob)
        net.dropout("drop%d" % index, blob, 0.5)
    blob = net.fc("fc8", blob, 1000, weight_filler=gaussian(0.01))
    net.classifier_head(blob, "loss")
    return net


# ---------------------------------------------------------------------------
# VGG-16 and VGG-19 (Simonyan & Zisserman, 2014, configurations D and E),
# and VGG-19 with a 21,841-way classifier for the full ImageNet (fall 2011
# release), the VGG19-22K of the Poseidon paper.

VGG16_STAGES = ((64, 2), (128, 2), (256, 3), (512, 3), (512, 3))
VGG19_STAGES = ((64, 2), (128, 2), (256, 4), (512, 4), (512, 4))
IMAGENET22K_TRAIN = "data/imagenet22k/imagenet22k_train_lmdb"
IMAGENET22K_VAL = "data/imagenet22k/imagenet22k_val_lmdb"
IMAGENET22K_CLASSES = 21841
# Images held out of the 22k release for validation (ours; it has no split).
IMAGENET22K_VAL_IMAGES = 50000


def build_vgg16(variant, time_batch=None):
    return vgg("VGG_ILSVRC_16_layers", VGG16_STAGES, variant, time_batch)


def build_vgg19(variant, time_batch=None):
    return vgg("VGG_ILSVRC_19_layers", VGG19_STAGES, variant, time_batch)


def build_vgg19_22k(variant, time_batch=None):
    return vgg(
        "VGG_19_layers_22K",
        VGG19_STAGES,
        variant,
        time_batch,
        classes=IMAGENET22K_CLASSES,
        sources=(IMAGENET22K_TRAIN, IMAGENET22K_VAL),
    )


def vgg(
    name,
    stages,
    variant,
    time_batch,
    classes=1000,
    sources=(IMAGENET_TRAIN, IMAGENET_VAL),
):
    net = NetBuilder(name, variant, time_batch)
    blob = net.imagenet_data(
        train_batch=64, test_batch=50, crop=224, sources=sources
    )
    for stage, (width, depth) in enumerate(stages, start=1):
        for index in range(1, depth + 1):
            suffix = "%d_%d" % (stage, index)
            blob = net.conv("conv" + suffix, blob, width, 3, pad=1)
            net.relu("relu" + suffix, blob)
        blob = net.pool("pool%d" % stage, blob, "MAX", 2, stride=2)
    for index in (6, 7):
        blob = net.fc("fc%d" % index, blob, 4096)
        net.relu("relu%d" % index, blob)
        net.dropout("drop%d" % index, blob, 0.5)
    blob = net.fc("fc8", blob, classes)
    net.classifier_head(blob, "loss")
    return net


# ---------------------------------------------------------------------------
# GoogLeNet (Szegedy et al., 2014, "Going deeper with convolutions").

# name: (1x1, 3x3 reduce, 3x3, 5x5 reduce, 5x5, pool projection)
INCEPTION = (
    ("3a", (64, 96, 128, 16, 32, 32)),
    ("3b", (128, 128, 192, 32, 96, 64)),
    ("4a", (192, 96, 208, 16, 48, 64)),
    ("4b", (160, 112, 224, 24, 64, 64)),
    ("4c", (128, 128, 256, 24, 64, 64)),
    ("4d", (112, 144, 288, 32, 64, 64)),
    ("4e", (256, 160, 320, 32, 128, 128)),
    ("5a", (256, 160, 320, 32, 128, 128)),
    ("5b", (384, 192, 384, 48, 128, 128)),
)
GOOGLENET_BIAS = constant(0.2)


def inception(net, module, bottom, widths):
    n1, n3r, n3, n5r, n5, npool = widths
    prefix = "inception_%s/" % module

    def conv_relu(name, src, num_output, kernel, pad=0):
        out = net.conv(
            prefix + name,
            src,
            num_output,
            kernel,
            pad=pad,
            bias_filler=GOOGLENET_BIAS,
        )
        net.relu(prefix + "relu_" + name, out)
        return out

    branch1 = conv_relu("1x1", bottom, n1, 1)
    branch3 = conv_relu("3x3_reduce", bottom, n3r, 1)
    branch3 = conv_relu("3x3", branch3, n3, 3, pad=1)
    branch5 = conv_relu("5x5_reduce", bottom, n5r, 1)
    branch5 = conv_relu("5x5", branch5, n5, 5, pad=2)
    pooled = net.pool(prefix + "pool", bottom, "MAX", 3, stride=1, pad=1)
    branch_pool = conv_relu("pool_proj", pooled, npool, 1)
    return net.concat(
        prefix + "output", [branch1, branch3, branch5, branch_pool]
    )


def auxiliary_classifier(net, index, bottom):
    """The paper's side classifier; only in train_val (weight 0.3)."""
    prefix = "loss%d/" % index
    blob = net.pool(prefix + "ave_pool", bottom, "AVE", 5, stride=3)
    blob = net.conv(prefix + "conv", blob, 128, 1, bias_filler=GOOGLENET_BIAS)
    net.relu(prefix + "relu_conv", blob)
    blob = net.fc(prefix + "fc", blob, 1024, bias_filler=GOOGLENET_BIAS)
    net.relu(prefix + "relu_fc", blob)
    net.dropout(prefix + "drop_fc", blob, 0.7)
    blob = net.fc(prefix + "classifier", blob, 1000)
    net.loss(prefix + "loss", blob, loss_weight=0.3)


def build_googlenet(variant, time_batch=None):
    net = NetBuilder("GoogLeNet", variant, time_batch)
    blob = net.imagenet_data(train_batch=32, test_batch=50, crop=224)
    blob = net.conv(
        "conv1/7x7_s2",
        blob,
        64,
        7,
        stride=2,
        pad=3,
        bias_filler=GOOGLENET_BIAS,
    )
    net.relu("conv1/relu_7x7", blob)
    blob = net.pool("pool1/3x3_s2", blob, "MAX", 3, stride=2)
    blob = net.lrn("pool1/norm1", blob)
    blob = net.conv(
        "conv2/3x3_reduce", blob, 64, 1, bias_filler=GOOGLENET_BIAS
    )
    net.relu("conv2/relu_3x3_reduce", blob)
    blob = net.conv(
        "conv2/3x3", blob, 192, 3, pad=1, bias_filler=GOOGLENET_BIAS
    )
    net.relu("conv2/relu_3x3", blob)
    blob = net.lrn("conv2/norm2", blob)
    blob = net.pool("pool2/3x3_s2", blob, "MAX", 3, stride=2)
    for module, widths in INCEPTION:
        if module == "4a":
            blob = net.pool("pool3/3x3_s2", blob, "MAX", 3, stride=2)
        if module == "5a":
            blob = net.pool("pool4/3x3_s2", blob, "MAX", 3, stride=2)
        blob = inception(net, module, blob, widths)
        if not net.deploy and module == "4a":
            auxiliary_classifier(net, 1, blob)
        if not net.deploy and module == "4d":
            auxiliary_classifier(net, 2, blob)
    blob = net.pool("pool5/7x7_s1", blob, "AVE", 7, stride=1)
    net.dropout("pool5/drop_7x7_s1", blob, 0.4)
    blob = net.fc("loss3/classifier", blob, 1000)
    net.classifier_head(blob, "loss3/loss3", prefix="loss3/")
    return net


# ---------------------------------------------------------------------------
# ResNet-50 and ResNet-152 (He et al., 2015, "Deep residual learning"),
# bottleneck blocks. Layer names follow the authors' released Caffe models,
# so their weights load: blocks a, b, c, ... in ResNet-50; a, b1, b2, ... in
# the stages of ResNet-152 that have more than six blocks.

# (stage, bottleneck width, blocks)
RESNET50_STAGES = ((2, 64, 3), (3, 128, 4), (4, 256, 6), (5, 512, 3))
RESNET152_STAGES = ((2, 64, 3), (3, 128, 8), (4, 256, 36), (5, 512, 3))


def resnet_conv_bn(
    net, name, bottom, num_output, kernel, stride=1, pad=0, relu=True
):
    """Convolution without bias, BatchNorm + Scale, optional ReLU."""
    suffix = name[len("res") :]  # "2a_branch2a"
    blob = net.conv(
        name,
        bottom,
        num_output,
        kernel,
        stride=stride,
        pad=pad,
        bias=False,
        weight_filler=MSRA,
    )
    net.batch_norm_scale("bn" + suffix, "scale" + suffix, blob)
    if relu:
        net.relu(name + "_relu", blob)
    return blob


def bottleneck(net, stage, block, bottom, width, stride, project):
    prefix = "res%d%s" % (stage, block)
    if project:
        shortcut = resnet_conv_bn(
            net,
            prefix + "_branch1",
            bottom,
            4 * width,
            1,
            stride=stride,
            relu=False,
        )
    else:
        shortcut = bottom
    blob = resnet_conv_bn(
        net, prefix + "_branch2a", bottom, width, 1, stride=stride
    )
    blob = resnet_conv_bn(net, prefix + "_branch2b", blob, width, 3, pad=1)
    blob = resnet_conv_bn(
        net, prefix + "_branch2c", blob, 4 * width, 1, relu=False
    )
    out = net.eltwise_sum(prefix, [shortcut, blob])
    net.relu(prefix + "_relu", out)
    return out


def build_resnet50(variant, time_batch=None):
    return resnet("ResNet-50", RESNET50_STAGES, variant, time_batch)


def build_resnet152(variant, time_batch=None):
    return resnet("ResNet-152", RESNET152_STAGES, variant, time_batch)


def block_name(index, blocks):
    if blocks <= 6:
        return "abcdef"[index]
    return "a" if index == 0 else "b%d" % index


def resnet(name, stages, variant, time_batch):
    net = NetBuilder(name, variant, time_batch)
    blob = net.imagenet_data(train_batch=32, test_batch=50, crop=224)
    # The authors' conv1 keeps its bias; every later convolution has none.
    blob = net.conv("conv1", blob, 64, 7, stride=2, pad=3, weight_filler=MSRA)
    net.batch_norm_scale("bn_conv1", "scale_conv1", blob)
    net.relu("conv1_relu", blob)
    blob = net.pool("pool1", blob, "MAX", 3, stride=2)
    for stage, width, blocks in stages:
        for index in range(blocks):
            stride = 2 if (index == 0 and stage > 2) else 1
            blob = bottleneck(
                net,
                stage,
                block_name(index, blocks),
                blob,
                width,
                stride,
                project=(index == 0),
            )
    blob = net.pool("pool5", blob, "AVE", 7, stride=1)
    blob = net.fc("fc1000", blob, 1000, weight_filler=gaussian(0.01))
    net.classifier_head(blob, "loss")
    return net


# ---------------------------------------------------------------------------
# Inception-V3 (Szegedy et al., 2015, "Rethinking the Inception architecture
# for computer vision"): 299x299 inputs, every convolution without bias and
# followed by BatchNorm (eps 0.001) + Scale + ReLU; 5x5 convolutions factorised
# into two 3x3, 7x7 into 1x7 and 7x1, and the 8x8 stage's 3x3 split into
# parallel 1x3 and 3x1 branches. The auxiliary classifier on the 17x17 grid is
# in train_val only (loss weight 0.4).

# Images of at least 299x299 (e.g. resized to 320x320) in their own LMDBs.
INCEPTION3_TRAIN = "data/ilsvrc12_320/ilsvrc12_train_lmdb"
INCEPTION3_VAL = "data/ilsvrc12_320/ilsvrc12_val_lmdb"
INCEPTION3_BN_EPS = 0.001


def conv_bn(net, name, bottom, num_output, kernel, stride=1, pad=0):
    """Convolution (no bias), BatchNorm, Scale and ReLU: "<name>/..."."""
    blob = net.conv(
        name + "/conv",
        bottom,
        num_output,
        kernel,
        stride=stride,
        pad=pad,
        bias=False,
        weight_filler=MSRA,
        top=name,
    )
    net.batch_norm_scale(
        name + "/bn", name + "/scale", blob, eps=INCEPTION3_BN_EPS
    )
    net.relu(name + "/relu", blob)
    return blob


def factorised_7x7(net, name, bottom, width, num_output, double):
    """A 1x7 then 7x1 pair (two pairs when `double`), ending at num_output."""
    kernels = [((1, 7), (0, 3)), ((7, 1), (3, 0))]
    if double:
        kernels = [((7, 1), (3, 0)), ((1, 7), (0, 3))] * 2
    blob = bottom
    for index, (kernel, pad) in enumerate(kernels):
        last = index == len(kernels) - 1
        blob = conv_bn(
            net,
            "%s_%dx%d_%d" % (name, kernel[0], kernel[1], index + 1),
            blob,
            num_output if last else width,
            kernel,
            pad=pad,
        )
    return blob


def avg_pool_branch(net, prefix, bottom, num_output):
    pooled = net.pool(prefix + "pool", bottom, "AVE", 3, stride=1, pad=1)
    return conv_bn(net, prefix + "pool_proj", pooled, num_output, 1)


def inception3_a(net, prefix, bottom, pool_features):
    """35x35: 1x1, 5x5, double 3x3 and pooled branches."""
    branch1 = conv_bn(net, prefix + "1x1", bottom, 64, 1)
    branch5 = conv_bn(net, prefix + "5x5_reduce", bottom, 48, 1)
    branch5 = conv_bn(net, prefix + "5x5", branch5, 64, 5, pad=2)
    branch3 = conv_bn(net, prefix + "3x3dbl_reduce", bottom, 64, 1)
    branch3 = conv_bn(net, prefix + "3x3dbl_1", branch3, 96, 3, pad=1)
    branch3 = conv_bn(net, prefix + "3x3dbl_2", branch3, 96, 3, pad=1)
    pooled = avg_pool_branch(net, prefix, bottom, pool_features)
    return net.concat(prefix + "output", [branch1, branch5, branch3, pooled])


def inception3_b(net, prefix, bottom):
    """35x35 -> 17x17 grid reduction."""
    branch3 = conv_bn(net, prefix + "3x3", bottom, 384, 3, stride=2)
    double = conv_bn(net, prefix + "3x3dbl_reduce", bottom, 64, 1)
    double = conv_bn(net, prefix + "3x3dbl_1", double, 96, 3, pad=1)
    double = conv_bn(net, prefix + "3x3dbl_2", double, 96, 3, stride=2)
    pooled = net.pool(prefix + "pool", bottom, "MAX", 3, stride=2)
    return net.concat(prefix + "output", [branch3, double, pooled])


def inception3_c(net, prefix, bottom, width):
    """17x17: 1x1, factorised 7x7, double factorised 7x7, pooled."""
    branch1 = conv_bn(net, prefix + "1x1", bottom, 192, 1)
    branch7 = conv_bn(net, prefix + "7x7_reduce", bottom, width, 1)
    branch7 = factorised_7x7(net, prefix + "7x7", branch7, width, 192, False)
    double = conv_bn(net, prefix + "7x7dbl_reduce", bottom, width, 1)
    double = factorised_7x7(net, prefix + "7x7dbl", double, width, 192, True)
    pooled = avg_pool_branch(net, prefix, bottom, 192)
    return net.concat(prefix + "output", [branch1, branch7, double, pooled])


def inception3_d(net, prefix, bottom):
    """17x17 -> 8x8 grid reduction."""
    branch3 = conv_bn(net, prefix + "3x3_reduce", bottom, 192, 1)
    branch3 = conv_bn(net, prefix + "3x3", branch3, 320, 3, stride=2)
    branch7 = conv_bn(net, prefix + "7x7x3_reduce", bottom, 192, 1)
    branch7 = factorised_7x7(net, prefix + "7x7x3", branch7, 192, 192, False)
    branch7 = conv_bn(net, prefix + "7x7x3_3x3", branch7, 192, 3, stride=2)
    pooled = net.pool(prefix + "pool", bottom, "MAX", 3, stride=2)
    return net.concat(prefix + "output", [branch3, branch7, pooled])


def inception3_e(net, prefix, bottom):
    """8x8: 1x1, 3x3 and double 3x3 branches ending in parallel 1x3 / 3x1."""

    def split(name, blob):
        wide = conv_bn(net, name + "_1x3", blob, 384, (1, 3), pad=(0, 1))
        tall = conv_bn(net, name + "_3x1", blob, 384, (3, 1), pad=(1, 0))
        return [wide, tall]

    branch1 = conv_bn(net, prefix + "1x1", bottom, 320, 1)
    branch3 = conv_bn(net, prefix + "3x3_reduce", bottom, 384, 1)
    double = conv_bn(net, prefix + "3x3dbl_reduce", bottom, 448, 1)
    double = conv_bn(net, prefix + "3x3dbl_1", double, 384, 3, pad=1)
    pooled = avg_pool_branch(net, prefix, bottom, 192)
    branches = (
        [branch1]
        + split(prefix + "3x3", branch3)
        + split(prefix + "3x3dbl_2", double)
        + [pooled]
    )
    return net.concat(prefix + "output", branches)


def inception3_auxiliary(net, bottom):
    """Side classifier on the 17x17 grid; only in train_val."""
    prefix = "aux/"
    blob = net.pool(prefix + "pool", bottom, "AVE", 5, stride=3)
    blob = conv_bn(net, prefix + "conv1", blob, 128, 1)
    blob = conv_bn(net, prefix + "conv2", blob, 768, 5)
    blob = net.fc(prefix + "classifier", blob, 1000)
    net.loss(prefix + "loss", blob, loss_weight=0.4)


def build_inception_v3(variant, time_batch=None):
    net = NetBuilder("Inception-V3", variant, time_batch)
    blob = net.imagenet_data(
        train_batch=32,
        test_batch=50,
        crop=299,
        sources=(INCEPTION3_TRAIN, INCEPTION3_VAL),
    )
    blob = conv_bn(net, "conv1_3x3_s2", blob, 32, 3, stride=2)
    blob = conv_bn(net, "conv2_3x3", blob, 32, 3)
    blob = conv_bn(net, "conv3_3x3", blob, 64, 3, pad=1)
    blob = net.pool("pool1_3x3_s2", blob, "MAX", 3, stride=2)
    blob = conv_bn(net, "conv4_1x1", blob, 80, 1)
    blob = conv_bn(net, "conv5_3x3", blob, 192, 3)
    blob = net.pool("pool2_3x3_s2", blob, "MAX", 3, stride=2)
    for module, pool_features in (("5b", 32), ("5c", 64), ("5d", 64)):
        blob = inception3_a(net, "mixed_%s/" % module, blob, pool_features)
    blob = inception3_b(net, "mixed_6a/", blob)
    for module, width in (("6b", 128), ("6c", 160), ("6d", 160), ("6e", 192)):
        blob = inception3_c(net, "mixed_%s/" % module, blob, width)
    if not net.deploy:
        inception3_auxiliary(net, blob)
    blob = inception3_d(net, "mixed_7a/", blob)
    for module in ("7b", "7c"):
        blob = inception3_e(net, "mixed_%s/" % module, blob)
    assert net.shapes[blob] == (2048, 8, 8), net.shapes[blob]
    blob = net.pool("pool3_8x8", blob, "AVE", 8, stride=1)
    net.dropout("drop", blob, 0.2)
    blob = net.fc("classifier", blob, 1000)
    net.classifier_head(blob, "loss")
    return net


# ---------------------------------------------------------------------------
# Solvers.


def solver(net_dir, fields):
    base = {
        "net": "models/%s/train_val.prototxt" % net_dir,
        "test_iter": None,
        "test_interval": 10000,
        "test_initialization": False,
        "display": 20,
        "average_loss": 20,
    }
    base.update(fields)
    base.update(
        {
            "snapshot": 10000,
            "snapshot_prefix": "models/%s/%s" % (net_dir, net_dir),
            "solver_mode": Enum("CPU"),
        }
    )
    return {k: v for k, v in base.items() if v is not None}


def alexnet_solver():
    # Paper: batch 128, momentum 0.9, weight decay 5e-4, lr 0.01 divided by 10
    # three times over ~90 epochs. Here batch 256, lr / 10 every ~20 epochs.
    return solver(
        "alexnet",
        {
            "test_iter": IMAGENET_VAL_IMAGES // 50,
            "base_lr": 0.01,
            "lr_policy": "step",
            "gamma": 0.1,
            "stepsize": 100000,
            "max_iter": 450000,
            "momentum": 0.9,
            "weight_decay": 0.0005,
        },
    )


def vgg16_solver():
    # Paper: batch 256, momentum 0.9, weight decay 5e-4, lr 0.01 divided by 10
    # when validation accuracy stops improving (three times, ~74 epochs).
    return solver(
        "vgg16",
        {
            "test_iter": IMAGENET_VAL_IMAGES // 50,
            "iter_size": 4,  # 4 x 64 = 256 images per update
            "base_lr": 0.01,
            "lr_policy": "multistep",
            "gamma": 0.1,
            "stepvalue": [100000, 200000, 300000],
            "max_iter": 370000,
            "momentum": 0.9,
            "weight_decay": 0.0005,
        },
    )


def googlenet_solver():
    # Paper: momentum 0.9, learning rate lowered by 4% every 8 epochs.
    # At 32 images per update, 8 epochs of ILSVRC-2012 are ~320,000 steps.
    # The paper gives no total length nor weight decay; these are ours.
    return solver(
        "googlenet",
        {
            "test_iter": IMAGENET_VAL_IMAGES // 50,
            "base_lr": 0.01,
            "lr_policy": "step",
            "gamma": 0.96,
            "stepsize": 320000,
            "max_iter": 2400000,  # ~60 epochs
            "momentum": 0.9,
            "weight_decay": 0.0002,
        },
    )


def resnet50_solver():
    # Paper: batch 256, lr 0.1 divided by 10 at plateaus, 60e4 iterations,
    # weight decay 1e-4, momentum 0.9.
    return solver(
        "resnet50",
        {
            "test_iter": IMAGENET_VAL_IMAGES // 50,
            "iter_size": 8,  # 8 x 32 = 256 images per update
            "base_lr": 0.1,
            "lr_policy": "multistep",
            "gamma": 0.1,
            "stepvalue": [150000, 300000, 450000],
            "max_iter": 600000,
            "momentum": 0.9,
            "weight_decay": 0.0001,
        },
    )


def caffenet_solver():
    # The BVLC reference schedule: batch 256, lr 0.01 / 10 every 100,000
    # iterations, 450,000 iterations.
    fields = alexnet_solver()
    fields.update(
        {
            "net": "models/caffenet/train_val.prototxt",
            "snapshot_prefix": "models/caffenet/caffenet",
        }
    )
    return fields


def vgg19_solver():
    # As VGG-16 (the paper trains both with the same schedule).
    fields = vgg16_solver()
    fields.update(
        {
            "net": "models/vgg19/train_val.prototxt",
            "snapshot_prefix": "models/vgg19/vgg19",
        }
    )
    return fields


def vgg19_22k_solver():
    # ~14.2M images: 4 x 64 = 256 per update is ~55,500 updates per epoch;
    # lr / 10 every ~4 epochs, ~16 epochs in all (ours).
    return solver(
        "vgg19_22k",
        {
            "test_iter": IMAGENET22K_VAL_IMAGES // 50,
            "iter_size": 4,
            "base_lr": 0.01,
            "lr_policy": "multistep",
            "gamma": 0.1,
            "stepvalue": [220000, 440000, 660000],
            "max_iter": 880000,
            "momentum": 0.9,
            "weight_decay": 0.0005,
        },
    )


def inception_v3_solver():
    # Paper: RMSProp with decay 0.9 and epsilon 1.0, lr 0.045 multiplied by
    # 0.94 every two epochs (two epochs of 1.28M images at 32 per update are
    # ~80,000 steps). Weight decay 4e-5 as in the authors' release.
    return solver(
        "inception_v3",
        {
            "test_iter": IMAGENET_VAL_IMAGES // 50,
            "type": "RMSProp",
            "base_lr": 0.045,
            "lr_policy": "step",
            "gamma": 0.94,
            "stepsize": 80000,
            "max_iter": 4000000,  # ~100 epochs
            "rms_decay": 0.9,
            "delta": 1.0,
            "weight_decay": 0.00004,
        },
    )


def resnet152_solver():
    # As ResNet-50, at 16 x 16 = 256 images per update.
    fields = resnet50_solver()
    fields.update(
        {
            "net": "models/resnet152/train_val.prototxt",
            "iter_size": 16,
            "snapshot_prefix": "models/resnet152/resnet152",
        }
    )
    return fields


# (directory, builder, solver, title, batch of the timing net)
MODELS = (
    ("alexnet", build_alexnet, alexnet_solver, "AlexNet", 16),
    ("caffenet", build_caffenet, caffenet_solver, "CaffeNet", 16),
    ("vgg16", build_vgg16, vgg16_solver, "VGG-16", 16),
    ("vgg19", build_vgg19, vgg19_solver, "VGG-19", 16),
    (
        "vgg19_22k",
        build_vgg19_22k,
        vgg19_22k_solver,
        "VGG-19 with a 21,841-way classifier (VGG19-22K)",
        16,
    ),
    ("googlenet", build_googlenet, googlenet_solver, "GoogLeNet", 32),
    (
        "inception_v3",
        build_inception_v3,
        inception_v3_solver,
        "Inception-V3",
        32,
    ),
    ("resnet50", build_resnet50, resnet50_solver, "ResNet-50", 32),
    ("resnet152", build_resnet152, resnet152_solver, "ResNet-152", 16),
)


def header(title, what):
    return [
        "%s %s." % (title, what),
        "Generated by scripts/gen_models.py; edit that script, not this "
        "file.",
        "",
    ]


def render(net_dir, build, make_solver, title, time_batch):
    """Returns ({path under the repository: text}, {variant: builder})."""
    train = build("train_val")
    deploy = build("deploy")
    timing = build("time", time_batch)
    model_dir = "models/%s/" % net_dir
    timing_what = "timing net (batch %d) for `poseidon_train time`"
    files = {}
    files[model_dir + "train_val.prototxt"] = train.text(
        header(title, "training/validation net")
    )
    files[model_dir + "deploy.prototxt"] = deploy.text(
        header(title, "deployment net")
    )
    files[model_dir + "solver.prototxt"] = to_text(
        make_solver(), header(title, "solver")
    )
    files[TIMING_DIR + "%s_time.prototxt" % net_dir] = timing.text(
        header(title, timing_what % time_batch)
    )
    return files, {"train_val": train, "deploy": deploy}


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument(
        "--out",
        default=REPO_ROOT,
        help="root to write under (default: the repository)",
    )
    parser.add_argument(
        "--check",
        action="store_true",
        help="compare models/ with the files on disk, write nothing",
    )
    parser.add_argument(
        "--timing-only",
        action="store_true",
        help="write only the timing nets (scripts/bench/nets), quietly",
    )
    args = parser.parse_args()

    stale = []
    if not args.timing_only:
        print("%-12s %-9s %14s %12s"
              % ("net", "variant", "learnable", "bn stats"))
    for net_dir, build, make_solver, title, time_batch in MODELS:
        files, builders = render(
            net_dir, build, make_solver, title, time_batch
        )
        for variant, builder in sorted(builders.items()):
            if args.timing_only:
                break
            print(
                "%-12s %-9s %14s %12s"
                % (
                    net_dir,
                    variant,
                    "{:,}".format(builder.learnable),
                    "{:,}".format(builder.statistics),
                )
            )
        for name, text in sorted(files.items()):
            timing = name.startswith(TIMING_DIR)
            if (args.timing_only and not timing) or (args.check and timing):
                continue
            path = os.path.join(args.out, name)
            directory = os.path.dirname(path)
            if args.check:
                try:
                    with open(path) as handle:
                        current = handle.read()
                except IOError:
                    current = None
                if current != text:
                    stale.append(path)
                continue
            if not os.path.isdir(directory):
                os.makedirs(directory)
            with open(path, "w") as handle:
                handle.write(text)
    if stale:
        print(
            "stale (rerun scripts/gen_models.py): " + ", ".join(stale),
            file=sys.stderr,
        )
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
