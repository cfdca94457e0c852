"""The pythonic half of caffe.Net and caffe.Solver.

The C++ classes (caffe._caffe) expose indices and raw calls; this module adds,
as attributes of those same classes, the interface pycaffe scripts use: ordered
dicts of blobs and params, ``forward(**inputs)``, ``backward(**top_diffs)``,
``forward_all``, ``forward_backward_all`` and ``set_input_arrays``. It also
defines ``caffe.Layer``, the base class of layers written in Python.
"""
import time
from collections import OrderedDict

import numpy as np

from . import _caffe
from ._caffe import (Net, Solver, SGDSolver, NesterovSolver, AdaGradSolver,
                     RMSPropSolver, AdaDeltaSolver, AdamSolver, get_solver)

__all__ = ['Net', 'Layer', 'Solver', 'SGDSolver', 'NesterovSolver',
           'AdaGradSolver', 'RMSPropSolver', 'AdaDeltaSolver', 'AdamSolver',
           'get_solver', 'solver_from_param', 'NCCL', 'Timer', 'has_nccl',
           'set_multiprocess']


class _LayerType(type):
    """Metaclass of caffe.Layer: in pycaffe, caffe.Layer is the class of
    every layer, so isinstance(net.layers[i], caffe.Layer) holds for the
    net's C++ layers too, not only for layers written in Python."""

    def __instancecheck__(cls, obj):
        if cls is Layer and isinstance(obj, _caffe.CppLayer):
            return True
        return type.__instancecheck__(cls, obj)


class Layer(object, metaclass=_LayerType):
    """Base class of layers written in Python (prototxt type "Python").

    Subclasses implement ``setup(bottom, top)`` (once; read
    ``self.param_str``), ``reshape(bottom, top)`` (size the tops, before every
    forward), ``forward(bottom, top)`` and, when gradients must flow,
    ``backward(top, propagate_down, bottom)``. ``bottom`` and ``top`` are
    lists of caffe.Blob; write results through ``top[i].data[...]``.
    Learnable parameters are created with ``self.blobs.add_blob(*shape)``.
    Before setup() the net sets ``param_str``, ``phase`` and ``blobs``.
    """

    type = 'Python'

    def __init__(self, *args, **kwargs):
        # The net creates the instance with no arguments; accepting any keeps
        # classes that pass their own arguments to the base working.
        pass

    def setup(self, bottom, top):
        pass

    def reshape(self, bottom, top):
        raise NotImplementedError(
            '{} must implement reshape(bottom, top)'.format(
                type(self).__name__))

    def forward(self, bottom, top):
        raise NotImplementedError(
            '{} must implement forward(bottom, top)'.format(
                type(self).__name__))

    def backward(self, top, propagate_down, bottom):
        raise NotImplementedError(
            '{} has no backward(top, propagate_down, bottom)'.format(
                type(self).__name__))


class _NamedDict(OrderedDict):
    """An OrderedDict whose missing keys raise a KeyError that lists the
    names available."""

    def __init__(self, items, what):
        super(_NamedDict, self).__init__(items)
        self._what = what

    def __missing__(self, key):
        raise KeyError('no {} named {!r}; the net has: {}'.format(
            self._what, key, ', '.join(self.keys())))

    def __reduce__(self):
        return (OrderedDict, (list(self.items()),))

    def __repr__(self):
        return 'OrderedDict({!r})'.format(list(self.items()))


def _cached(fn):
    """A read-only property computed once per net: the structure of a net
    never changes after construction (blob contents and shapes do, and are
    always read through the Blob objects)."""
    key = '_cache_' + fn.__name__

    def get(self):
        try:
            return self.__dict__[key]
        except KeyError:
            value = self.__dict__[key] = fn(self)
            return value
    get.__doc__ = fn.__doc__
    return property(get)


@_cached
def _net_blobs(self):
    """OrderedDict of blob name -> caffe.Blob, in the order blobs appear."""
    return _NamedDict(zip(self._blob_names, self._blobs), 'blob')


@_cached
def _net_blob_loss_weights(self):
    """OrderedDict of blob name -> its weight in the loss (0 for non-loss)."""
    return _NamedDict(zip(self._blob_names, self._blob_loss_weights), 'blob')


@_cached
def _net_layers(self):
    """The layers in order (Python layers are their Python objects)."""
    return self._layers


@_cached
def _net_layer_dict(self):
    """OrderedDict of layer name -> layer."""
    return _NamedDict(zip(self._layer_names, self.layers), 'layer')


@_cached
def _net_params(self):
    """OrderedDict of layer name -> its parameter blobs (weights, bias, ...),
    for the layers that have any."""
    return _NamedDict(
        [(name, layer.blobs) for name, layer
         in zip(self._layer_names, self.layers) if len(layer.blobs) > 0],
        'layer with parameters')


@_cached
def _net_inputs(self):
    """Names of the net's input blobs (the tops of Input layers)."""
    names = self._blob_names
    return [names[i] for i in self._inputs]


@_cached
def _net_outputs(self):
    """Names of the net's output blobs (tops no layer consumes)."""
    names = self._blob_names
    return [names[i] for i in self._outputs]


@_cached
def _net_top_names(self):
    """OrderedDict of layer name -> names of its top blobs."""
    names = self._blob_names
    return _NamedDict(
        [(layer, [names[i] for i in self._top_ids(li)])
         for li, layer in enumerate(self._layer_names)], 'layer')


@_cached
def _net_bottom_names(self):
    """OrderedDict of layer name -> names of its bottom blobs."""
    names = self._blob_names
    return _NamedDict(
        [(layer, [names[i] for i in self._bottom_ids(li)])
         for li, layer in enumerate(self._layer_names)], 'layer')


class _MissingLayer(KeyError, ValueError):
    """No layer of that name. pycaffe's list(...).index() raises ValueError
    here; being a KeyError too matches the dicts (layer_dict, top_names)."""

    def __str__(self):
        return str(self.args[0]) if self.args else ''


def _layer_index(net, name):
    """The index of the first layer named `name`, as pycaffe finds it."""
    try:
        return list(net._layer_names).index(name)
    except ValueError:
        raise _MissingLayer('no layer named {!r}; the net has: {}'.format(
            name, ', '.join(net._layer_names)))


def _fill(net, values, field):
    """Copies named arrays into the blobs' data or diff. The batch size
    (first axis) must be the blob's; an array of the blob's size but another
    shape is reshaped, anything else must broadcast."""
    caffe_words = {'data': 'Input is not batch sized',
                   'diff': 'Diff is not batch sized'}[field]
    for name, value in values.items():
        blob = net.blobs[name]
        value = np.asarray(value)
        target = getattr(blob, field)
        if value.shape != target.shape:
            if (value.ndim == 0 or target.ndim == 0 or
                    value.shape[0] != target.shape[0]):
                raise ValueError(
                    '{}: {} for blob {!r} has shape {}; the blob is {} '
                    '(reshape the blob and call net.reshape() to change the '
                    'batch size)'.format(caffe_words, field, name,
                                         value.shape, target.shape))
            if value.size == target.size:
                value = value.reshape(target.shape)
        target[...] = value


def _net_forward(self, blobs=None, start=None, end=None, **kwargs):
    """Runs the net forward, from layer `start` to layer `end` (names,
    inclusive; default the whole net).

    kwargs: blob name -> array, copied into the blob first (normally the
    net's inputs; the batch size must match the blob's).
    blobs: names of further blobs to return.
    Returns {blob name: data array} for the net's outputs, or for the tops
    of layer `end` when it is given, plus `blobs`. The arrays view the
    blobs: copy them to keep them past the next forward.
    """
    blobs = list(blobs or [])
    start_ind = _layer_index(self, start) if start is not None else 0
    if end is not None:
        end_ind = _layer_index(self, end)
        outputs = set(self.top_names[end] + blobs)
    else:
        end_ind = len(self.layers) - 1
        outputs = set(self.outputs + blobs)
    _fill(self, kwargs, 'data')
    self._forward(start_ind, end_ind)
    return {out: self.blobs[out].data for out in outputs}


def _net_backward(self, diffs=None, start=None, end=None, **kwargs):
    """Runs the net backward, from layer `start` down to layer `end` (names,
    inclusive; default the whole net).

    kwargs: blob name -> array of diffs, copied in first (normally the net's
    outputs).
    diffs: names of further blobs whose diffs to return.
    Returns {blob name: diff array} for the net's inputs, or for the bottoms
    of layer `end` when it is given, plus `diffs`.
    """
    diffs = list(diffs or [])
    start_ind = (_layer_index(self, start) if start is not None
                 else len(self.layers) - 1)
    if end is not None:
        end_ind = _layer_index(self, end)
        outputs = set(self.bottom_names[end] + diffs)
    else:
        end_ind = 0
        outputs = set(self.inputs + diffs)
    _fill(self, kwargs, 'diff')
    self._backward(start_ind, end_ind)
    return {out: self.blobs[out].diff for out in outputs}


def _net_batch(self, arrays):
    """Yields dicts of batch-sized slices of `arrays` (name -> array of N
    items); the last batch is padded with zeros."""
    num = len(next(iter(arrays.values())))
    for name, value in arrays.items():
        if len(value) != num:
            raise ValueError('forward_all: {!r} has {} items, others {}'.format(
                name, len(value), num))
    batch_size = self.blobs[next(iter(arrays))].shape[0]
    for b in range(0, num, batch_size):
        batch = {}
        for name, value in arrays.items():
            part = np.asarray(value[b:b + batch_size])
            if len(part) < batch_size:
                pad = np.zeros((batch_size - len(part),) + part.shape[1:],
                               dtype=part.dtype)
                part = np.concatenate([part, pad])
            batch[name] = part
        yield batch


def _collect(parts, num):
    """Joins per-batch results, dropping the padding; scalar blobs (losses)
    give one value per batch."""
    out = {}
    for name, arrays in parts.items():
        if not arrays:
            out[name] = np.empty(0, dtype=np.float32)
        elif arrays[0].ndim == 0:
            out[name] = np.array(arrays)
        else:
            out[name] = np.concatenate(arrays)[:num]
    return out


def _net_forward_all(self, blobs=None, **kwargs):
    """Runs forward over every item of the input arrays, a batch at a time.

    kwargs: input blob name -> array of N items.
    Returns {blob name: array of N results} for the outputs and `blobs`
    (for a scalar blob such as a loss: one value per batch).
    Without kwargs (a net with its own data layer) it runs forward once.
    """
    names = set(self.outputs + list(blobs or []))
    if not kwargs:
        return {k: v.copy() for k, v in self.forward(blobs=blobs).items()}
    parts = {name: [] for name in names}
    for batch in self._batch(kwargs):
        for name, value in self.forward(blobs=blobs, **batch).items():
            parts[name].append(value.copy())
    return _collect(parts, len(next(iter(kwargs.values()))))


def _net_forward_backward_all(self, blobs=None, diffs=None, **kwargs):
    """forward_all and backward together: kwargs hold input arrays (named by
    net inputs) and top diffs (named by net outputs).

    Returns (forward results, backward results) as two dicts.
    """
    inputs = {k: v for k, v in kwargs.items() if k in self.inputs}
    top_diffs = {k: v for k, v in kwargs.items() if k not in self.inputs}
    for name in top_diffs:
        if name not in self.outputs:
            raise KeyError('{!r} is neither an input ({}) nor an output ({}) '
                           'of the net'.format(name, ', '.join(self.inputs),
                                               ', '.join(self.outputs)))
    out_names = set(self.outputs + list(blobs or []))
    diff_names = set(self.inputs + list(diffs or []))
    fwd = {name: [] for name in out_names}
    bwd = {name: [] for name in diff_names}
    everything = dict(inputs, **top_diffs)
    if not everything:
        raise ValueError('forward_backward_all needs input or diff arrays')
    for batch in self._batch(everything):
        ins = {k: v for k, v in batch.items() if k in inputs}
        tops = {k: v for k, v in batch.items() if k in top_diffs}
        for name, value in self.forward(blobs=blobs, **ins).items():
            fwd[name].append(value.copy())
        for name, value in self.backward(diffs=diffs, **tops).items():
            bwd[name].append(value.copy())
    num = len(next(iter(everything.values())))
    return _collect(fwd, num), _collect(bwd, num)


def _net_set_input_arrays(self, data, labels, layer=None):
    """Hands arrays to a MemoryData layer (the first one, or the one named
    `layer`): data N x C x H x W, labels N values, N a multiple of the batch
    size. The net keeps references to the arrays, so the layer reads them
    without copying as long as they are float32 and C-contiguous (others are
    converted once)."""
    if layer is None:
        types = [getattr(l, 'type', None) for l in self.layers]
        if 'MemoryData' not in types:
            raise ValueError('set_input_arrays: the net has no MemoryData '
                             'layer')
        index = types.index('MemoryData')
    else:
        index = _layer_index(self, layer)
    data = np.ascontiguousarray(data, dtype=np.float32)
    labels = np.ascontiguousarray(labels, dtype=np.float32).reshape(-1)
    self._set_input_arrays(data, labels, index)
    arrays = self.__dict__.setdefault('_input_arrays', {})
    arrays[index] = (data, labels)


def solver_from_param(param):
    """A solver of the type `param` names, from a caffe_pb2.SolverParameter
    or its prototxt text (paths in it are relative to the working
    directory). Under mpirun, a `distributed` block makes it train as one
    rank of the job, as get_solver does."""
    from .proto import caffe_pb2
    if isinstance(param, str):
        from google.protobuf import text_format
        text = param
        param = caffe_pb2.SolverParameter()
        try:
            text_format.Merge(text, param)
        except text_format.ParseError as e:
            raise _caffe.ConfigError('solver prototxt: {}'.format(e))
    if not isinstance(param, caffe_pb2.SolverParameter):
        raise TypeError('solver_from_param takes a caffe_pb2.SolverParameter '
                        'or prototxt text, not {!r}'.format(type(param)))
    return _caffe._solver_from_bytes(param.SerializeToString())


def _solver_param(self):
    """The solver's settings as a caffe_pb2.SolverParameter (a copy)."""
    from .proto import caffe_pb2
    param = caffe_pb2.SolverParameter()
    param.ParseFromString(self._param_bytes)
    return param


class Timer(object):
    """caffe.Timer: wall-clock milliseconds between start() and stop().

    ms is the time of the last start/stop interval (reading it while the
    timer runs stops it first, as in Caffe; 0 before any start)."""

    def __init__(self):
        self._start = None
        self._ms = 0.0

    def start(self):
        self._start = time.perf_counter()

    def stop(self):
        if self._start is not None:
            self._ms = (time.perf_counter() - self._start) * 1000.0
            self._start = None

    @property
    def ms(self):
        self.stop()
        return self._ms


def has_nccl():
    """Whether caffe.NCCL can be used: never in Poseidon, whose multi-GPU and
    multi-node training runs under mpirun (see docs/python.md)."""
    return False


class NCCL(object):
    """pycaffe's NCCL(solver, uid) joins processes started by Python's
    multiprocessing into one multi-GPU job. Poseidon builds such jobs with
    mpirun instead: a script whose solver has a `distributed {}` block
    trains as one rank of the job. Constructing one raises caffe.Error
    saying so (has_nccl() is False)."""

    def __init__(self, solver, uid):
        raise _caffe.Error(
            'caffe.NCCL is not available in Poseidon (caffe.has_nccl() is '
            'False): run the script under mpirun with a `distributed {}` '
            'block in the solver, or poseidon_train train --gpu=0,1,... '
            '(docs/python.md, docs/distributed.md)')

    @staticmethod
    def new_uid():
        raise _caffe.Error('caffe.NCCL is not available in Poseidon '
                           '(caffe.has_nccl() is False)')


_multiprocess = [False]


def set_multiprocess(multiprocess):
    """Caffe's flag for processes joined by NCCL; recorded and otherwise
    without effect here (there is no caffe.NCCL)."""
    _multiprocess[0] = bool(multiprocess)


Net.blobs = _net_blobs
Net.blob_loss_weights = _net_blob_loss_weights
Net.layers = _net_layers
Net.layer_dict = _net_layer_dict
Net.params = _net_params
Net.inputs = _net_inputs
Net.outputs = _net_outputs
Net.top_names = _net_top_names
Net.bottom_names = _net_bottom_names
Net.forward = _net_forward
Net.backward = _net_backward
Net.forward_all = _net_forward_all
Net.forward_backward_all = _net_forward_backward_all
Net.set_input_arrays = _net_set_input_arrays
Net._batch = _net_batch
Solver.param = property(_solver_param)
