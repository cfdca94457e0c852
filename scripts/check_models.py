#!/usr/bin/env python3
"""Checks the prototxt files shipped with Poseidon against our schema.

Every *.prototxt under models/, examples/ and scripts/bench/nets/ is parsed
with protobuf's text format against src/poseidon/proto/caffe.proto (compiled
with protoc into a temporary directory; nothing is written to the tree):
solver files (name contains "solver") as SolverParameter, the others as
NetParameter. For each net in the current (non-V1) format it then

  - walks the layers of each phase (include/exclude rules), checking that
    every bottom exists and inferring blob shapes with Caffe's rules
    (convolution rounds down, pooling rounds up),
  - counts the parameters (learnable weights, biases and Scale factors;
    BatchNorm statistics separately),
  - checks that solvers point at nets that exist and that deploy nets end in
    a Softmax "prob".

Needs protoc and the protobuf Python package of a matching version (protoc
3.21 goes with `pip install protobuf==4.21.12`).

Usage: scripts/check_models.py [FILE.prototxt ...]
Exit status 0 when every file passes.
"""

import argparse
import glob
import importlib
import math
import os
import subprocess
import sys
import tempfile

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PROTO = "src/poseidon/proto/caffe.proto"
SEARCHED = (
    "models/**/*.prototxt",
    "examples/**/*.prototxt",
    "scripts/bench/nets/*.prototxt",
)

# Image shape (channels, height, width) stored in each data set's LMDB.
DATA_SHAPES = {
    "data/fashion_mnist/": (1, 28, 28),
    "data/cifar10/": (3, 32, 32),
    "examples/cifar10/": (3, 32, 32),
    "data/ilsvrc12/": (3, 256, 256),
    "data/ilsvrc12_320/": (3, 320, 320),
    "data/imagenet22k/": (3, 256, 256),
}

# The layer types that the reference models may use.
STANDARD_TYPES = {
    "Data",
    "Input",
    "Convolution",
    "Pooling",
    "InnerProduct",
    "ReLU",
    "LRN",
    "Dropout",
    "BatchNorm",
    "Scale",
    "Eltwise",
    "Concat",
    "Softmax",
    "SoftmaxWithLoss",
    "Accuracy",
}
# Timing nets may also use DummyData for their labels.
TIMING_TYPES = STANDARD_TYPES | {"DummyData"}


def load_schema(workdir):
    """Compiles caffe.proto with protoc and imports the generated module."""
    subprocess.check_call(
        [
            "protoc",
            "--proto_path=" + os.path.dirname(PROTO),
            "--python_out=" + workdir,
            os.path.basename(PROTO),
        ],
        cwd=REPO_ROOT,
    )
    sys.path.insert(0, workdir)
    return importlib.import_module("caffe_pb2")


class CheckError(Exception):
    pass


def conv_out(size, kernel, stride, pad, dilation=1):
    extent = dilation * (kernel - 1) + 1
    return (size + 2 * pad - extent) // stride + 1


def pool_out(size, kernel, stride, pad):
    out = int(math.ceil(float(size + 2 * pad - kernel) / stride)) + 1
    if pad > 0 and (out - 1) * stride >= size + pad:
        out -= 1
    return out


def first(repeated, default):
    return repeated[0] if len(repeated) else default


def included(layer, phase):
    """Caffe's NetStateRule filtering, for phase only (no levels/stages)."""
    if layer.HasField("phase") and layer.phase != phase:
        return False
    if len(layer.include):
        return any(
            not r.HasField("phase") or r.phase == phase for r in layer.include
        )
    return not any(
        not r.HasField("phase") or r.phase == phase for r in layer.exclude
    )


class ShapeWalker(object):
    """Infers the shapes of one phase of a net and counts its parameters."""

    def __init__(self, pb, net, phase, path):
        self.pb = pb
        self.net = net
        self.phase = phase
        self.path = path
        self.shapes = {}
        self.learnable = 0
        self.statistics = 0
        self.types = []

    def fail(self, layer, message):
        raise CheckError(
            "%s: layer '%s' (%s): %s"
            % (self.path, layer.name, layer.type, message)
        )

    def run(self):
        for layer in self.net.layer:
            if not included(layer, self.phase):
                continue
            for bottom in layer.bottom:
                if bottom not in self.shapes:
                    self.fail(
                        layer,
                        "bottom '%s' is not produced by an "
                        "earlier layer" % bottom,
                    )
            self.types.append(layer.type)
            handler = getattr(self, "layer_" + layer.type, None)
            if handler is None:
                self.fail(layer, "no shape rule for this type")
            tops = handler(layer, [self.shapes[b] for b in layer.bottom])
            if len(tops) != len(layer.top):
                self.fail(
                    layer,
                    "expected %d tops, got %d" % (len(tops), len(layer.top)),
                )
            for name, shape in zip(layer.top, tops):
                self.shapes[name] = tuple(shape)
        return self

    def _check_params(self, layer, blobs):
        if len(layer.param) > blobs:
            self.fail(
                layer,
                "%d param specs for %d blobs" % (len(layer.param), blobs),
            )

    # Data.

    def layer_Data(self, layer, bottoms):
        source = layer.data_param.source
        for prefix, shape in DATA_SHAPES.items():
            if source.startswith(prefix):
                channels, height, width = shape
                break
        else:
            self.fail(layer, "unknown data source '%s'" % source)
        crop = layer.transform_param.crop_size
        if crop:
            height = width = crop
        batch = layer.data_param.batch_size
        if batch <= 0:
            self.fail(layer, "batch_size must be positive")
        tops = [(batch, channels, height, width), (batch,)]
        return tops[: len(layer.top)]

    def layer_Input(self, layer, bottoms):
        return [tuple(s.dim) for s in layer.input_param.shape]

    def layer_DummyData(self, layer, bottoms):
        return [tuple(s.dim) for s in layer.dummy_data_param.shape]

    # Layers with parameters.

    def layer_Convolution(self, layer, bottoms):
        p = layer.convolution_param
        n, c, h, w = bottoms[0]
        kernel = first(p.kernel_size, 0)
        kh, kw = (p.kernel_h or kernel), (p.kernel_w or kernel)
        pad = first(p.pad, 0)
        ph, pw = (p.pad_h or pad), (p.pad_w or pad)
        stride = first(p.stride, 1)
        sh, sw = (p.stride_h or stride), (p.stride_w or stride)
        dilation = first(p.dilation, 1)
        if not (kh and kw):
            self.fail(layer, "kernel size not set")
        if c % p.group or p.num_output % p.group:
            self.fail(
                layer,
                "group %d does not divide channels %d and "
                "num_output %d" % (p.group, c, p.num_output),
            )
        self._check_params(layer, 2 if p.bias_term else 1)
        self.learnable += p.num_output * (c // p.group) * kh * kw
        if p.bias_term:
            self.learnable += p.num_output
        out = (
            n,
            p.num_output,
            conv_out(h, kh, sh, ph, dilation),
            conv_out(w, kw, sw, pw, dilation),
        )
        if out[2] <= 0 or out[3] <= 0:
            self.fail(layer, "empty output %s" % (out,))
        return [out]

    def layer_InnerProduct(self, layer, bottoms):
        p = layer.inner_product_param
        shape = bottoms[0]
        fan_in = 1
        for d in shape[p.axis :]:
            fan_in *= d
        self._check_params(layer, 2 if p.bias_term else 1)
        self.learnable += p.num_output * fan_in
        if p.bias_term:
            self.learnable += p.num_output
        return [tuple(shape[: p.axis]) + (p.num_output,)]

    def layer_BatchNorm(self, layer, bottoms):
        self._check_params(layer, 3)
        for spec in layer.param:
            if spec.lr_mult != 0:
                self.fail(layer, "BatchNorm statistics need lr_mult 0")
        self.statistics += 2 * bottoms[0][1] + 1
        return [bottoms[0]]

    def layer_Scale(self, layer, bottoms):
        p = layer.scale_param
        if len(bottoms) != 1:
            self.fail(layer, "only the one-bottom form is checked")
        self._check_params(layer, 2 if p.bias_term else 1)
        end = len(bottoms[0]) if p.num_axes == -1 else p.axis + p.num_axes
        size = 1
        for d in bottoms[0][p.axis : end]:
            size *= d
        self.learnable += size * (2 if p.bias_term else 1)
        return [bottoms[0]]

    # Layers without parameters.

    def _same(self, layer, bottoms):
        self._check_params(layer, 0)
        return [bottoms[0]]

    layer_ReLU = _same
    layer_Dropout = _same
    layer_LRN = _same
    layer_Softmax = _same

    def layer_Pooling(self, layer, bottoms):
        p = layer.pooling_param
        n, c, h, w = bottoms[0]
        if p.global_pooling:
            return [(n, c, 1, 1)]
        kh, kw = (p.kernel_h or p.kernel_size), (p.kernel_w or p.kernel_size)
        ph, pw = (p.pad_h or p.pad), (p.pad_w or p.pad)
        sh, sw = (p.stride_h or p.stride), (p.stride_w or p.stride)
        if p.round_mode != self.pb.PoolingParameter.CEIL:
            self.fail(layer, "only round_mode CEIL is checked")
        return [(n, c, pool_out(h, kh, sh, ph), pool_out(w, kw, sw, pw))]

    def layer_Concat(self, layer, bottoms):
        axis = layer.concat_param.axis
        rest = [b[:axis] + b[axis + 1 :] for b in bottoms]
        if any(r != rest[0] for r in rest):
            self.fail(layer, "shapes differ off axis %d: %s" % (axis, bottoms))
        total = sum(b[axis] for b in bottoms)
        return [bottoms[0][:axis] + (total,) + bottoms[0][axis + 1 :]]

    def layer_Eltwise(self, layer, bottoms):
        if any(b != bottoms[0] for b in bottoms):
            self.fail(layer, "shapes differ: %s" % (bottoms,))
        return [bottoms[0]]

    def layer_SoftmaxWithLoss(self, layer, bottoms):
        scores, labels = bottoms
        if scores[0] != labels[0]:
            self.fail(
                layer,
                "batch of scores %s and labels %s differ" % (scores, labels),
            )
        return [()]

    def layer_Accuracy(self, layer, bottoms):
        self.layer_SoftmaxWithLoss(layer, bottoms)
        # An optional second top holds the accuracy of each class.
        return [(), (bottoms[0][1],)][: len(layer.top)]


def parse(pb, path):
    from google.protobuf import text_format

    message = (
        pb.SolverParameter()
        if "solver" in os.path.basename(path)
        else pb.NetParameter()
    )
    with open(path) as handle:
        try:
            text_format.Parse(handle.read(), message)
        except text_format.ParseError as error:
            raise CheckError("%s: %s" % (path, error))
    return message


def check_net(pb, path, net, report):
    relative = os.path.relpath(path, REPO_ROOT)
    if len(net.layers):
        if len(net.layer):
            raise CheckError("%s mixes V1 `layers` and `layer`" % relative)
        report.append((relative, "V1 format", len(net.layers), None, None))
        return
    timing = relative.startswith("scripts/bench/nets/")
    allowed = TIMING_TYPES if timing else STANDARD_TYPES
    for layer in net.layer:
        if layer.type not in allowed:
            raise CheckError(
                "%s: layer '%s' has type %s, not one of the "
                "standard types" % (relative, layer.name, layer.type)
            )
    has_data = any(layer.type == "Data" for layer in net.layer)
    phases = (
        [("TRAIN", pb.TRAIN), ("TEST", pb.TEST)]
        if has_data
        else [("TRAIN" if timing else "TEST", pb.TRAIN if timing else pb.TEST)]
    )
    counts = []
    for label, phase in phases:
        walker = ShapeWalker(pb, net, phase, relative).run()
        counts.append((label, walker))
        if has_data and "Data" not in walker.types:
            raise CheckError(
                "%s: no Data layer in phase %s" % (relative, label)
            )
        if label == "TEST" and has_data and "Accuracy" not in walker.types:
            raise CheckError("%s: no Accuracy layer in TEST" % relative)
    if os.path.basename(path) == "deploy.prototxt":
        last = net.layer[-1]
        if last.type != "Softmax" or list(last.top) != ["prob"]:
            raise CheckError(
                "%s: a deploy net must end in Softmax 'prob'" % relative
            )
    for label, walker in counts:
        report.append(
            (
                relative,
                label,
                len(walker.types),
                walker.learnable,
                walker.statistics,
            )
        )


def check_solver(path, solver, report):
    relative = os.path.relpath(path, REPO_ROOT)
    nets = [solver.net, solver.train_net] + list(solver.test_net)
    nets = [n for n in nets if n]
    if not nets:
        raise CheckError("%s: names no net" % relative)
    for net in nets:
        if not os.path.isfile(os.path.join(REPO_ROOT, net)):
            raise CheckError(
                "%s: net '%s' does not exist (paths are "
                "relative to the repository root)" % (relative, net)
            )
    report.append((relative, "solver", None, None, None))


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("files", nargs="*", help="default: all shipped")
    args = parser.parse_args()
    files = args.files or sorted(
        set(
            f
            for pattern in SEARCHED
            for f in glob.glob(
                os.path.join(REPO_ROOT, pattern), recursive=True
            )
        )
    )
    with tempfile.TemporaryDirectory() as workdir:
        pb = load_schema(workdir)
        report, errors = [], []
        for path in files:
            path = os.path.abspath(path)
            try:
                message = parse(pb, path)
                if isinstance(message, pb.SolverParameter):
                    check_solver(path, message, report)
                else:
                    check_net(pb, path, message, report)
            except CheckError as error:
                errors.append(str(error))
    print(
        "%-50s %-9s %6s %13s %9s"
        % ("file", "phase", "layers", "learnable", "bn stats")
    )
    for name, phase, layers, learnable, stats in report:
        print(
            "%-50s %-9s %6s %13s %9s"
            % (
                name,
                phase,
                "" if layers is None else layers,
                "" if learnable is None else "{:,}".format(learnable),
                "" if stats is None else "{:,}".format(stats),
            )
        )
    for error in errors:
        print("FAIL " + error, file=sys.stderr)
    print("%d files checked, %d failed" % (len(files), len(errors)))
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
