"""The same net in PyTorch as in a Caffe prototxt, for side-by-side benchmarks.

`read_prototxt(path)` parses protobuf text format into nested dicts (repeated
fields become lists) without needing the generated caffe_pb2, and
`TorchNet(net)` builds a torch.nn.Module that runs the TRAIN-phase layers in
file order over named blobs, as Caffe does:

  Input, DummyData      -> inputs made by the caller (`input_shapes()`)
  Convolution           -> nn.Conv2d (pad/stride/dilation/group/bias_term)
  Pooling MAX/AVE       -> max_pool2d / avg_pool2d with ceil_mode=True
                           (Caffe rounds output sizes up) or global pooling
  LRN (ACROSS_CHANNELS) -> nn.LocalResponseNorm (alpha/size as Caffe)
  ReLU, Sigmoid, TanH, Dropout, Softmax, Flatten, Concat, Eltwise (SUM with
  coeff, PROD, MAX), Split (implicit)
  InnerProduct          -> nn.Linear on the blob flattened from axis 1
  BatchNorm + Scale     -> nn.BatchNorm2d(affine=True) when the Scale (with
                           bias) follows the BatchNorm in place, as in Caffe's
                           ResNets; a lone Scale is a per-channel affine
  SoftmaxWithLoss       -> cross_entropy (mean over the batch) times the
                           layer's loss_weight
  Accuracy, Silence     -> skipped (no part of a training step)

In-place layers (top == bottom) stay in place where PyTorch allows it
(ReLU(inplace=True)), so both sides keep similar activations alive. The
forward returns the sum of the losses (`forward_blobs` also returns every
blob). A layer it cannot translate raises ValueError naming the layer.

Used by bench_gpu.py and bench_vs_pytorch.py; the shapes and FLOPs of the
same parsed nets come from net_cost.py.
"""

import re

_TOKEN = re.compile(r'\s*(?:(#[^\n]*)|("(?:[^"\\]|\\.)*")|([{}:])|([^\s{}:"#]+))')


def _tokens(text):
    pos = 0
    while True:
        m = _TOKEN.match(text, pos)
        if not m or m.end() == pos:
            rest = text[pos:].strip()
            if rest:
                raise ValueError("cannot parse prototxt near: " + rest[:40])
            return
        pos = m.end()
        if m.group(1):
            continue
        yield m.group(2) or m.group(3) or m.group(4)


def _value(tok):
    if tok.startswith('"'):
        return bytes(tok[1:-1], "utf-8").decode("unicode_escape")
    if tok in ("true", "false"):
        return tok == "true"
    try:
        return int(tok)
    except ValueError:
        pass
    try:
        return float(tok)
    except ValueError:
        return tok  # an enum name


def _parse(tokens, closing):
    msg = {}
    for tok in tokens:
        if tok == "}":
            if not closing:
                raise ValueError("unbalanced '}' in prototxt")
            return msg
        key = tok
        nxt = next(tokens)
        if nxt == ":":
            nxt = next(tokens)
            val = _parse(tokens, True) if nxt == "{" else _value(nxt)
        elif nxt == "{":
            val = _parse(tokens, True)
        else:
            raise ValueError("expected ':' or '{' after " + key)
        msg.setdefault(key, []).append(val)
    if closing:
        raise ValueError("missing '}' in prototxt")
    return msg


def read_prototxt(path):
    with open(path) as f:
        return _parse(_tokens(f.read()), False)


def one(msg, key, default=None):
    """The single value of `key` in `msg` (the last if repeated)."""
    vals = msg.get(key)
    return vals[-1] if vals else default


def _pair(p, key, default):
    """Caffe's kernel/pad/stride: repeated `key`, or key_h/key_w."""
    if key + "_h" in p or key + "_w" in p:
        return (one(p, key + "_h", default), one(p, key + "_w", default))
    vals = p.get(key + "_size" if key == "kernel" else key, [])
    if not vals:
        return (default, default)
    return (vals[0], vals[-1]) if len(vals) <= 2 else tuple(vals)


def _in_phase(layer, phase="TRAIN"):
    for rule in layer.get("include", []):
        if one(rule, "phase") not in (None, phase):
            return False
    for rule in layer.get("exclude", []):
        if one(rule, "phase") == phase:
            return False
    return True


def train_layers(net):
    return [l for l in net.get("layer", []) if _in_phase(l)]


def input_shapes(net):
    """{blob: shape} of the Input and DummyData tops."""
    shapes = {}
    for layer in train_layers(net):
        kind = one(layer, "type")
        if kind == "Input":
            params = layer["input_param"][0]["shape"]
        elif kind == "DummyData":
            params = layer["dummy_data_param"][0]["shape"]
        else:
            continue
        for top, shape in zip(layer["top"], params):
            shapes[top] = tuple(shape["dim"])
    return shapes


def build_torch_net(net):
    import torch
    import torch.nn as nn
    import torch.nn.functional as F

    class _CaffeBatchNorm(nn.BatchNorm2d):
        """BatchNorm2d that, as Caffe's BatchNorm, also normalises one value
        per channel in training (Inception-V3's auxiliary head at batch 1:
        the variance is 0, the output the bias), where F.batch_norm
        refuses; any other input takes BatchNorm2d's own path."""

        def forward(self, x):
            if not (self.training and x.numel() == x.size(1)):
                return super().forward(x)
            return torch.batch_norm(x, self.weight, self.bias, None, None,
                                    True, 0.0, self.eps,
                                    torch.backends.cudnn.enabled)

    layers = train_layers(net)
    blob_channels = {}
    for name, shape in input_shapes(net).items():
        blob_channels[name] = shape[1] if len(shape) > 1 else None
    # InnerProduct's input width comes from the first forward (LazyLinear).
    modules = nn.ModuleDict()
    steps = []
    skip = set()
    for i, layer in enumerate(layers):
        kind = one(layer, "type")
        name = one(layer, "name")
        bottoms = layer.get("bottom", [])
        tops = layer.get("top", [])
        key = "m%d" % i
        if kind in ("Input", "DummyData", "Accuracy", "Silence") or i in skip:
            continue
        if kind == "Convolution":
            p = layer["convolution_param"][0]
            k, pad, stride = _pair(p, "kernel", 1), _pair(p, "pad", 0), _pair(p, "stride", 1)
            dil = tuple(p.get("dilation", [1, 1])) if p.get("dilation") else (1, 1)
            if len(dil) == 1:
                dil = (dil[0], dil[0])
            cin = blob_channels[bottoms[0]]
            cout = one(p, "num_output")
            modules[key] = nn.Conv2d(cin, cout, k, stride, pad, dil,
                                     one(p, "group", 1), one(p, "bias_term", True))
            blob_channels[tops[0]] = cout
            steps.append(("module", key, bottoms, tops, [name]))
        elif kind == "InnerProduct":
            p = layer["inner_product_param"][0]
            if one(p, "axis", 1) != 1 or one(p, "transpose", False):
                raise ValueError("layer %s: InnerProduct with axis %s, "
                                 "transpose %s has no counterpart here"
                                 % (name, one(p, "axis", 1),
                                    one(p, "transpose", False)))
            modules[key] = nn.LazyLinear(one(p, "num_output"),
                                         bias=one(p, "bias_term", True))
            blob_channels[tops[0]] = one(p, "num_output")
            steps.append(("linear", key, bottoms, tops, [name]))
        elif kind == "BatchNorm":
            nxt = layers[i + 1] if i + 1 < len(layers) else None
            affine = (nxt is not None and one(nxt, "type") == "Scale" and
                      nxt.get("bottom") == tops and
                      one(nxt.get("scale_param", [{}])[0], "bias_term", False))
            p = layer.get("batch_norm_param", [{}])[0]
            modules[key] = _CaffeBatchNorm(blob_channels[bottoms[0]],
                                           eps=one(p, "eps", 1e-5),
                                           affine=bool(affine))
            names = [name]
            if affine:
                skip.add(i + 1)
                tops = nxt["top"]
                names.append(one(nxt, "name"))
            blob_channels[tops[0]] = blob_channels[bottoms[0]]
            steps.append(("module", key, bottoms, tops, names))
        elif kind == "Scale":
            c = blob_channels[bottoms[0]]
            m = nn.Module()
            m.weight = nn.Parameter(torch.ones(c))
            m.bias = (nn.Parameter(torch.zeros(c))
                      if one(layer.get("scale_param", [{}])[0], "bias_term",
                             False) else None)
            modules[key] = m
            blob_channels[tops[0]] = c
            steps.append(("affine", key, bottoms, tops, [name]))
        elif kind == "Pooling":
            p = layer.get("pooling_param", [{}])[0]
            if one(p, "pool", "MAX") not in ("MAX", "AVE"):
                raise ValueError("layer %s: pooling method %s has no PyTorch "
                                 "counterpart here" % (name, one(p, "pool")))
            steps.append(("pool", p, bottoms, tops, [name]))
            blob_channels[tops[0]] = blob_channels[bottoms[0]]
        elif kind == "LRN":
            p = layer.get("lrn_param", [{}])[0]
            if one(p, "norm_region", "ACROSS_CHANNELS") != "ACROSS_CHANNELS":
                raise ValueError("layer %s: LRN norm_region %s has no "
                                 "PyTorch counterpart here"
                                 % (name, one(p, "norm_region")))
            modules[key] = nn.LocalResponseNorm(one(p, "local_size", 5),
                                                one(p, "alpha", 1.0),
                                                one(p, "beta", 0.75),
                                                one(p, "k", 1.0))
            blob_channels[tops[0]] = blob_channels[bottoms[0]]
            steps.append(("module", key, bottoms, tops, [name]))
        elif kind in ("ReLU", "Sigmoid", "TanH", "Dropout", "Softmax",
                      "Flatten", "Split"):
            steps.append((kind, layer, bottoms, tops, [name]))
            for t in tops:
                blob_channels[t] = blob_channels.get(bottoms[0])
        elif kind == "Concat":
            steps.append(("concat", layer, bottoms, tops, [name]))
            blob_channels[tops[0]] = sum(blob_channels[b] for b in bottoms)
        elif kind == "Eltwise":
            steps.append(("eltwise", layer, bottoms, tops, [name]))
            blob_channels[tops[0]] = blob_channels[bottoms[0]]
        elif kind == "SoftmaxWithLoss":
            steps.append(("loss", layer, bottoms, tops, [name]))
        else:
            raise ValueError("layer %s: type %s has no PyTorch counterpart "
                             "here" % (name, kind))

    class Net(nn.Module):
        """Runs the steps over a dict of named blobs; returns the loss sum.

        `step_layers` lists, per step, the Caffe layers it computes (a
        BatchNorm and the Scale folded into it are one step). With
        `record_layers` set, each step runs inside a
        torch.profiler.record_function named after its first layer, so a
        profiler can attribute time to layers (see layer_profile.py).
        """

        def __init__(self):
            super().__init__()
            self.layers = modules
            self.step_layers = [s[4] for s in steps]
            self.record_layers = False

        def forward(self, blobs):
            return self.forward_blobs(blobs)[0]

        def forward_blobs(self, blobs):
            """(loss, {blob: tensor}) after one forward pass."""
            blobs = dict(blobs)
            loss = 0
            for step in steps:
                if self.record_layers:
                    with torch.profiler.record_function(step[4][0]):
                        loss = self._step(step, blobs, loss)
                else:
                    loss = self._step(step, blobs, loss)
            return loss, blobs

        def _step(self, step, blobs, loss):
            op, arg, bottoms, tops, _ = step
            x = blobs[bottoms[0]] if bottoms else None
            inplace = bool(tops) and bottoms[:1] == tops[:1]
            if op == "module":
                y = self.layers[arg](x)
            elif op == "linear":
                y = self.layers[arg](torch.flatten(x, 1))
            elif op == "affine":
                m = self.layers[arg]
                y = x * m.weight.view(1, -1, 1, 1)
                if m.bias is not None:
                    y = y + m.bias.view(1, -1, 1, 1)
            elif op == "pool":
                p = arg
                method = one(p, "pool", "MAX")
                if one(p, "global_pooling", False):
                    y = (F.adaptive_max_pool2d(x, 1) if method == "MAX"
                         else F.adaptive_avg_pool2d(x, 1))
                else:
                    k, pad, s = (_pair(p, "kernel", 1), _pair(p, "pad", 0),
                                 _pair(p, "stride", 1))
                    # ceil_mode drops a last window that would start in
                    # the padding, as Caffe does.
                    if method == "MAX":
                        y = F.max_pool2d(x, k, s, pad, ceil_mode=True)
                    else:
                        y = F.avg_pool2d(x, k, s, pad, ceil_mode=True,
                                         count_include_pad=True)
            elif op == "ReLU":
                y = F.relu(x, inplace=inplace)
            elif op == "Sigmoid":
                y = torch.sigmoid(x)
            elif op == "TanH":
                y = torch.tanh(x)
            elif op == "Dropout":
                ratio = one(arg.get("dropout_param", [{}])[0],
                            "dropout_ratio", 0.5)
                # Not in place: the ReLU before it needs its output for
                # backward (torchvision drops out of place too).
                y = F.dropout(x, ratio, self.training)
            elif op == "Softmax":
                y = F.softmax(x, 1)
            elif op == "Flatten":
                y = torch.flatten(x, 1)
            elif op == "Split":
                for t in tops:
                    blobs[t] = x
                return loss
            elif op == "concat":
                axis = one(arg.get("concat_param", [{}])[0], "axis", 1)
                y = torch.cat([blobs[b] for b in bottoms], axis)
            elif op == "eltwise":
                p = arg.get("eltwise_param", [{}])[0]
                how = one(p, "operation", "SUM")
                coeff = p.get("coeff", [])
                y = blobs[bottoms[0]]
                if coeff and coeff[0] != 1:
                    y = coeff[0] * y
                for j, b in enumerate(bottoms[1:], 1):
                    if how == "SUM":
                        c = coeff[j] if coeff else 1
                        y = y + blobs[b] if c == 1 else y + c * blobs[b]
                    elif how == "PROD":
                        y = y * blobs[b]
                    else:
                        y = torch.maximum(y, blobs[b])
            elif op == "loss":
                y = F.cross_entropy(x, blobs[bottoms[1]].long().view(-1))
                loss = loss + one(arg, "loss_weight", 1.0) * y
            blobs[tops[0]] = y
            return loss

    return Net()
