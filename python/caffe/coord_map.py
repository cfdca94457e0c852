"""Relating the spatial coordinates of NetSpec tops (caffe.coord_map).

A spatial layer maps input coordinates to output coordinates affinely along
its spatial axes. A coordinate map is a triple ``(axis, a, b)``:

- ``axis``: the first spatial axis the map applies to (``None`` for layers
  that act pointwise and so fit any axis),
- ``a``: the scale, ``b``: the shift, so that a position ``x`` of the input
  lands at ``a * x + b`` of the output (numpy arrays, one value per spatial
  axis, or plain numbers for the identity).

For a convolution or pooling of kernel ``k`` (dilated to ``(k - 1) * d + 1``),
stride ``s`` and padding ``p`` that is ``a = 1 / s``, ``b = (p - (k - 1) / 2)
/ s``; a deconvolution is the inverse, ``a = s``, ``b = (k - 1) / 2 - p``;
Crop shifts by ``-offset``.

``coord_map_from_to(top_from, top_to)`` walks back from both tops through
their layers to a common ancestor and composes the maps on the way, giving
the map from ``top_to``'s coordinates to ``top_from``'s. ``crop(top_from,
top_to)`` uses it to spec a Crop layer that cuts ``top_from`` to
``top_to``'s extent (as FCN's score maps are cropped to the image)::

    n.score = crop(n.upscore, n.data)
"""
from __future__ import division

import numpy as np

from .net_spec import layers as L

# Layers whose output position i depends on input position i only.
PASS_THROUGH_LAYERS = ['AbsVal', 'BatchNorm', 'Bias', 'BNLL', 'Dropout',
                       'Eltwise', 'ELU', 'Log', 'LRN', 'Exp', 'MVN', 'Power',
                       'ReLU', 'PReLU', 'Scale', 'Sigmoid', 'Split', 'TanH',
                       'Threshold']


class UndefinedMapException(Exception):
    """The layer has no coordinate map (it is not spatial, e.g.
    InnerProduct)."""


class AxisMismatchException(Exception):
    """Two maps along different axes cannot be composed."""


def _layer_params(fn, message):
    """The parameters of a NetSpec layer function: the dict given as
    `message` (e.g. convolution_param=dict(...)) or else the keyword
    arguments themselves."""
    return fn.params.get(message, fn.params)


def conv_params(fn):
    """(axis, stride, dilated kernel extent, pad) of a Convolution,
    Deconvolution, Im2col or Pooling layer function, each an array with one
    value per spatial axis given (a single value when given once).

    The legacy kernel_h/kernel_w, stride_h/stride_w and pad_h/pad_w fields
    are not supported (AssertionError)."""
    params = _layer_params(fn, 'convolution_param')
    legacy = {'pad_h', 'pad_w', 'kernel_h', 'kernel_w', 'stride_h',
              'stride_w'}
    assert not legacy.intersection(fn.params), \
        'cropping does not support legacy _h/_w params'
    axis = params.get('axis', 1)
    kernel = np.array(params['kernel_size'], ndmin=1)
    dilation = np.array(params.get('dilation', 1), ndmin=1)
    stride = np.array(params.get('stride', 1), ndmin=1)
    pad = np.array(params.get('pad', 0), ndmin=1)
    return axis, stride, (kernel - 1) * dilation + 1, pad


def crop_params(fn):
    """(axis, offset) of a Crop layer function, with Caffe's defaults (axis
    2, offset 0); offset is an array."""
    params = _layer_params(fn, 'crop_param')
    return params.get('axis', 2), np.array(params.get('offset', 0), ndmin=1)


def coord_map(fn):
    """The (axis, scale, shift) map of one layer function; raises
    UndefinedMapException for layers without one."""
    kind = fn.type_name
    if kind in ('Convolution', 'Pooling', 'Im2col'):
        axis, stride, extent, pad = conv_params(fn)
        return axis, 1 / stride, (pad - (extent - 1) / 2) / stride
    if kind == 'Deconvolution':
        axis, stride, extent, pad = conv_params(fn)
        return axis, stride, (extent - 1) / 2 - pad
    if kind in PASS_THROUGH_LAYERS:
        return None, 1, 0
    if kind == 'Crop':
        axis, offset = crop_params(fn)
        # Crop counts axes from N, conv_params from the channel axis.
        return axis - 1, 1, -offset
    raise UndefinedMapException(
        'no coordinate map for a {} layer'.format(kind))


def compose(base_map, next_map):
    """The map of applying `base_map`'s layer after `next_map`'s: scales
    multiply, and next_map's shift is scaled by base_map's scale."""
    axis1, a1, b1 = base_map
    axis2, a2, b2 = next_map
    if axis1 is None:
        axis = axis2
    elif axis2 is None or axis1 == axis2:
        axis = axis1
    else:
        raise AxisMismatchException(
            'cannot compose maps along axes {} and {}'.format(axis1, axis2))
    return axis, a1 * a2, a1 * b2 + b1


def inverse(coord_map):
    """The map that undoes `coord_map` (the mapping of gradients)."""
    axis, a, b = coord_map
    return axis, 1 / a, -b / a


def _mappable_bottoms(top):
    """The bottoms whose coordinates map onto `top`: all of them, except
    that a Crop's second bottom only gives the size to crop to."""
    bottoms = top.fn.inputs
    return bottoms[:1] if top.fn.type_name == 'Crop' else bottoms


def _ancestor_maps(start):
    """{top: map from that top to `start`} for every top reachable from
    `start` through layers with a coordinate map."""
    maps = {start: (None, 1, 0)}
    pending = [start]
    while pending:
        top = pending.pop()
        try:
            layer_map = coord_map(top.fn)
        except UndefinedMapException:
            continue
        for bottom in _mappable_bottoms(top):
            maps[bottom] = compose(maps[top], layer_map)
            pending.append(bottom)
    return maps


def coord_map_from_to(top_from, top_to):
    """The (axis, scale, shift) map from coordinates of `top_to` to those of
    `top_from`, found through their nearest common ancestor. Raises
    RuntimeError when no ancestor links them through spatial layers."""
    from_maps = _ancestor_maps(top_from)
    to_maps = {top_to: (None, 1, 0)}
    pending = [top_to]
    while pending:
        top = pending.pop(0)
        if top in from_maps:
            return compose(to_maps[top], inverse(from_maps[top]))
        try:
            layer_map = coord_map(top.fn)
        except UndefinedMapException:
            continue
        for bottom in _mappable_bottoms(top):
            to_maps[bottom] = compose(to_maps[top], layer_map)
            pending.append(bottom)
    raise RuntimeError('Could not compute map between tops; are they '
                       'connected by spatial layers?')


def crop(top_from, top_to):
    """A Crop layer function (a Top) cutting `top_from` to `top_to`'s
    spatial extent, with the axis and offsets their coordinate map gives.
    AssertionError when the scales differ, or the offset would be negative
    or fractional."""
    axis, a, b = coord_map_from_to(top_from, top_to)
    assert (np.asarray(a) == 1).all(), \
        'scale mismatch on crop (a = {})'.format(a)
    assert (np.asarray(b) <= 0).all(), \
        'cannot crop negative offset (b = {})'.format(b)
    assert (np.round(b) == b).all(), \
        'cannot crop noninteger offset (b = {})'.format(b)
    offset = [int(o) for o in -np.round(np.asarray(b, dtype=float)).ravel()]
    return L.Crop(top_from, top_to,
                  crop_param=dict(axis=axis + 1, offset=offset))
