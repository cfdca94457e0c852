"""Blob shapes and floating-point operations of a Caffe net, from its prototxt.

Pure Python (no caffe_pb2, no torch): reads the dicts of
`caffe_net.read_prototxt` and follows Caffe's shape rules for the layer types
of the reference nets (Convolution and its asymmetric kernel_h/kernel_w,
pad_h/pad_w forms; Pooling rounding up, Caffe's clipping of a last window
that would start in the padding, global pooling; InnerProduct flattening from
`axis`; Concat; the shape-preserving layers).

FLOP convention (Note [FLOP convention]): only Convolution and InnerProduct
count, a multiply-add as 2 FLOPs, biases left out:

  forward   conv  2 * N * C_out * H_out * W_out * (C_in / group) * k_h * k_w
            fc    2 * (rows) * num_output * K
  backward  the weight gradient (the same count as forward) when the weight
            has a non-zero lr_mult, plus the bottom gradient (the same count
            again) when the bottom blob needs one, i.e. when some layer with
            a learnable parameter lies below it. The first convolution reads
            the data, which needs no gradient, so its backward is 1x forward;
            every other weighted layer's is 2x. Both frameworks skip the same
            work (Caffe's propagate_down and PyTorch's requires_grad agree).

Pooling, ReLU, LRN, BatchNorm, Scale, Eltwise, Concat, Dropout and the loss
are not counted: they are a few operations per element, memory-bound, and
well under 2% of the counted work in the seven benchmark nets.
"""

import math

import caffe_net

one = caffe_net.one


class ShapeError(ValueError):
    """A layer whose shapes cannot be worked out (names the layer)."""


def _conv_geometry(p):
    k = caffe_net._pair(p, "kernel", 1)
    pad = caffe_net._pair(p, "pad", 0)
    stride = caffe_net._pair(p, "stride", 1)
    dil = p.get("dilation") or [1]
    dil = (dil[0], dil[-1])
    return k, pad, stride, dil


def _pool_out(size, k, pad, stride):
    """Caffe's PoolingLayer::Reshape for one spatial axis."""
    out = int(math.ceil(float(size + 2 * pad - k) / stride)) + 1
    if pad > 0 and (out - 1) * stride >= size + pad:
        out -= 1  # the last window would start inside the padding
    return out


def _count(shape):
    n = 1
    for d in shape:
        n *= d
    return n


def _learnable(layer, index):
    """Whether the layer's param `index` has a non-zero lr_mult."""
    specs = layer.get("param", [])
    if index < len(specs):
        return one(specs[index], "lr_mult", 1.0) != 0
    return True


def analyse(net):
    """Walks the TRAIN-phase layers of a parsed net.

    Returns a dict:
      shapes   {blob: shape tuple} (the last shape written to each blob)
      layers   [{name, type, tops: [shapes], forward_flops,
                 backward_flops}] in file order
      forward_flops, backward_flops  totals per iteration
    Raises ShapeError naming the layer on anything it cannot follow.
    """
    shapes = dict(caffe_net.input_shapes(net))
    need_grad = {blob: False for blob in shapes}
    out_layers = []
    fwd_total = bwd_total = 0
    for layer in caffe_net.train_layers(net):
        kind = one(layer, "type")
        name = one(layer, "name")
        bottoms = layer.get("bottom", [])
        tops = layer.get("top", [])
        try:
            ins = [shapes[b] for b in bottoms]
        except KeyError as e:
            raise ShapeError("layer %s (%s): bottom %s is no earlier top"
                             % (name, kind, e))
        fwd = 0
        weight_learnable = False
        try:
            if kind in ("Input", "DummyData"):
                outs = [shapes[t] for t in tops]
            elif kind == "Convolution":
                p = layer["convolution_param"][0]
                (kh, kw), (ph, pw), (sh, sw), (dh, dw) = _conv_geometry(p)
                n, c, h, w = ins[0]
                cout = one(p, "num_output")
                group = one(p, "group", 1)
                if c % group or cout % group:
                    raise ShapeError("channels %d -> %d not divisible by "
                                     "group %d" % (c, cout, group))
                ho = (h + 2 * ph - (dh * (kh - 1) + 1)) // sh + 1
                wo = (w + 2 * pw - (dw * (kw - 1) + 1)) // sw + 1
                if ho < 1 or wo < 1:
                    raise ShapeError("output %dx%d from input %dx%d"
                                     % (ho, wo, h, w))
                outs = [(n, cout, ho, wo)]
                fwd = 2 * n * cout * ho * wo * (c // group) * kh * kw
                weight_learnable = _learnable(layer, 0)
            elif kind == "InnerProduct":
                p = layer["inner_product_param"][0]
                axis = one(p, "axis", 1)
                rows = _count(ins[0][:axis])
                k = _count(ins[0][axis:])
                out = one(p, "num_output")
                outs = [tuple(ins[0][:axis]) + (out,)]
                fwd = 2 * rows * out * k
                weight_learnable = _learnable(layer, 0)
            elif kind == "Pooling":
                p = layer.get("pooling_param", [{}])[0]
                n, c, h, w = ins[0]
                if one(p, "global_pooling", False):
                    outs = [(n, c, 1, 1)]
                else:
                    (kh, kw), (ph, pw), (sh, sw) = (
                        caffe_net._pair(p, "kernel", 1),
                        caffe_net._pair(p, "pad", 0),
                        caffe_net._pair(p, "stride", 1))
                    outs = [(n, c, _pool_out(h, kh, ph, sh),
                             _pool_out(w, kw, pw, sw))]
            elif kind == "Concat":
                p = layer.get("concat_param", [{}])[0]
                axis = one(p, "axis", 1)
                first = list(ins[0])
                for s in ins[1:]:
                    if (len(s) != len(first) or
                            s[:axis] != tuple(first[:axis]) or
                            s[axis + 1:] != tuple(first[axis + 1:])):
                        raise ShapeError("cannot concatenate %s and %s on "
                                         "axis %d" % (ins[0], s, axis))
                first[axis] = sum(s[axis] for s in ins)
                outs = [tuple(first)]
            elif kind == "Eltwise":
                if any(s != ins[0] for s in ins[1:]):
                    raise ShapeError("bottom shapes differ: %s" % ins)
                outs = [ins[0]]
            elif kind == "Flatten":
                outs = [(ins[0][0], _count(ins[0][1:]))]
            elif kind in ("SoftmaxWithLoss", "Accuracy", "EuclideanLoss"):
                outs = [()] * len(tops)
            elif kind == "Silence":
                outs = []
            elif kind in ("ReLU", "Sigmoid", "TanH", "Dropout", "LRN",
                          "BatchNorm", "Scale", "Softmax", "Split"):
                outs = [ins[0]] * len(tops)
            else:
                raise ShapeError("type %s is not modelled here" % kind)
        except (KeyError, IndexError, ValueError) as e:
            if isinstance(e, ShapeError):
                raise ShapeError("layer %s (%s): %s" % (name, kind, e))
            raise ShapeError("layer %s (%s): cannot read its parameters "
                             "(%s: %s)" % (name, kind, type(e).__name__, e))
        bottom_grad = any(need_grad.get(b, False) for b in bottoms)
        bwd = 0
        if fwd:
            bwd = (fwd if weight_learnable else 0) + (fwd if bottom_grad
                                                      else 0)
        has_learnable = (kind in ("Convolution", "InnerProduct", "Scale") and
                         any(_learnable(layer, i) for i in range(2)))
        for top, shape in zip(tops, outs):
            shapes[top] = shape
            if kind not in ("Input", "DummyData"):
                need_grad[top] = bottom_grad or has_learnable
        out_layers.append({"name": name, "type": kind, "tops": outs,
                           "forward_flops": fwd, "backward_flops": bwd})
        fwd_total += fwd
        bwd_total += bwd
    return {"shapes": shapes, "layers": out_layers,
            "forward_flops": fwd_total, "backward_flops": bwd_total}


def analyse_file(path):
    return analyse(caffe_net.read_prototxt(path))
