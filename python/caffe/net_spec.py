"""Writing nets in Python: caffe.NetSpec, caffe.layers (L) and caffe.params
(P).

    n = caffe.NetSpec()
    n.data, n.label = L.DummyData(shape=[dict(dim=[8, 1, 28, 28]),
                                         dict(dim=[8])], ntop=2)
    n.ip = L.InnerProduct(n.data, num_output=10,
                          weight_filler=dict(type='xavier'))
    n.loss = L.SoftmaxWithLoss(n.ip, n.label)
    print(n.to_proto())      # prototxt text that caffe.Net parses

``L.<Type>(*bottoms, **kwargs)`` makes a layer of that prototxt type. Keyword
arguments ending in "param" (param, transform_param, a whole
convolution_param dict, ...) go into LayerParameter; others into the layer's
``<type>_param`` message when it has such a field, else into LayerParameter
(name, loss_weight, include, ...). Lists fill repeated fields, dicts fill
messages. Special keywords: ``ntop`` (number of tops, default 1; 0 for none,
when the call returns the layer itself, which can still be assigned to a
NetSpec) and ``in_place`` (the tops reuse the bottoms' names).
``P.<Type>.<VALUE>`` reads an enum value of <Type>Parameter, e.g.
``P.Pooling.MAX``.

Names: a top assigned to a NetSpec attribute takes that name; its layer is
named after its first top. Unnamed tops get "<Type><k>".
"""
from collections import Counter, OrderedDict

from .proto import caffe_pb2

# Layer types whose parameter message is named after another type.
_PARAM_ALIASES = {'Deconvolution': 'convolution', 'ReLU6': 'relu'}


def _param_field_names():
    """{message type name without 'Parameter': LayerParameter field}, e.g.
    {'Convolution': 'convolution_param', 'InnerProduct': ...}."""
    names = {}
    for field in caffe_pb2.LayerParameter.DESCRIPTOR.fields:
        if field.name.endswith('_param') and field.message_type is not None:
            type_name = field.message_type.name
            if type_name.endswith('Parameter'):
                names[type_name[:-len('Parameter')]] = field.name
    return names


_PARAM_FIELDS = _param_field_names()


def param_name_dict():
    """{layer type: its parameter field without "_param"}, as pycaffe gives
    it, e.g. {'Convolution': 'convolution', 'Pooling': 'pooling', ...}
    (from the *Parameter message types of LayerParameter's fields)."""
    return {type_name: field[:-len('_param')]
            for type_name, field in _PARAM_FIELDS.items()}


def _param_field(type_name):
    if type_name in _PARAM_ALIASES:
        return _PARAM_ALIASES[type_name] + '_param'
    return _PARAM_FIELDS.get(type_name)


def assign_proto(proto, name, value):
    """Sets proto.<name> from a Python value: a dict fills a message, a list
    fills a repeated field (dicts in it add messages), a scalar sets a
    field (or appends to a repeated one)."""
    field = proto.DESCRIPTOR.fields_by_name.get(name)
    if field is None:
        raise AttributeError('{} has no field {!r}'.format(
            proto.DESCRIPTOR.name, name))
    repeated = field.label == field.LABEL_REPEATED
    is_message = field.message_type is not None
    if repeated:
        values = value if isinstance(value, (list, tuple)) else [value]
        target = getattr(proto, name)
        for v in values:
            if is_message:
                item = target.add()
                for k, kv in v.items():
                    assign_proto(item, k, kv)
            else:
                target.append(v)
    elif is_message:
        if not isinstance(value, dict):
            raise TypeError('field {!r} of {} is a message: give a dict, not '
                            '{!r}'.format(name, proto.DESCRIPTOR.name, value))
        message = getattr(proto, name)
        message.SetInParent()
        for k, v in value.items():
            assign_proto(message, k, v)
    else:
        setattr(proto, name, value)


class Top(object):
    """One output of a layer function; pass it as a bottom of another."""

    def __init__(self, fn, n):
        self.fn = fn
        self.n = n

    def to_proto(self):
        """A NetParameter with this top and everything it depends on."""
        return to_proto(self)

    def _update(self, params):
        self.fn._update(params)

    def _to_proto(self, layers, names, autonames):
        return self.fn._to_proto(layers, names, autonames)


class Function(object):
    """A layer call: type, bottom tops and parameters. Layers of zero tops
    (ntop=0) are used as Functions directly; they can still be assigned to a
    NetSpec, which names the layer."""

    def __init__(self, type_name, inputs, params):
        self.type_name = type_name
        for i, bottom in enumerate(inputs):
            if not isinstance(bottom, Top):
                raise TypeError('%s input %d is not a Top (type is %s)' %
                                (type_name, i, type(bottom)))
        self.inputs = inputs
        self.params = params
        self.ntop = self.params.pop('ntop', 1)
        self.in_place = self.params.pop('in_place', False)
        if self.in_place and not inputs:
            raise ValueError('{}: in_place needs a bottom'.format(type_name))
        self.tops = tuple(Top(self, n) for n in range(self.ntop))

    def _update(self, params):
        self.params.update(params)

    def _top_name(self, top, names, autonames):
        if top not in names:
            autonames[top.fn.type_name] += 1
            names[top] = top.fn.type_name + str(autonames[top.fn.type_name])
        return names[top]

    def _name(self, names, autonames):
        if self not in names:
            if self.ntop > 0:
                names[self] = self._top_name(self.tops[0], names, autonames)
            else:
                autonames[self.type_name] += 1
                names[self] = self.type_name + str(autonames[self.type_name])
        return names[self]

    def _to_proto(self, layers, names, autonames):
        if self in layers:
            return
        bottom_names = []
        for bottom in self.inputs:
            bottom._to_proto(layers, names, autonames)
            bottom_names.append(layers[bottom.fn].top[bottom.n])
        layer = caffe_pb2.LayerParameter()
        layer.type = self.type_name
        layer.bottom.extend(bottom_names)
        if self.in_place:
            # As in Caffe: the tops are the bottoms themselves.
            layer.top.extend(layer.bottom)
        else:
            for top in self.tops:
                layer.top.append(self._top_name(top, names, autonames))
        layer.name = self._name(names, autonames)  # params may override
        param_field = _param_field(self.type_name)
        for key, value in self.params.items():
            # Caffe's routing: "*param" keywords (param, transform_param, a
            # whole convolution_param, ...) belong to LayerParameter; others
            # go to the type's own message when it has that field, else to
            # LayerParameter (name, loss_weight, include, ...).
            if key.endswith('param') or param_field is None:
                assign_proto(layer, key, value)
                continue
            message = getattr(layer, param_field)
            if key in message.DESCRIPTOR.fields_by_name:
                assign_proto(message, key, value)
            elif key in caffe_pb2.LayerParameter.DESCRIPTOR.fields_by_name:
                assign_proto(layer, key, value)
            else:
                raise AttributeError(
                    '{} layer: neither {} nor LayerParameter has a field '
                    '{!r}'.format(self.type_name,
                                  message.DESCRIPTOR.name, key))
        layers[self] = layer


def to_proto(*tops):
    """A NetParameter holding the layers that produce `tops`, in dependency
    order."""
    layers = OrderedDict()
    autonames = Counter()
    names = {}
    for top in tops:
        fn = top if isinstance(top, Function) else top.fn
        fn._to_proto(layers, names, autonames)
    net = caffe_pb2.NetParameter()
    net.layer.extend(layers.values())
    return net


class _MissingTop(AttributeError, KeyError):
    """A NetSpec has no top of that name. Caffe raises KeyError here; being
    an AttributeError too keeps hasattr() and getattr(n, name, default)
    working."""

    def __str__(self):
        return str(self.args[0]) if self.args else ''


class NetSpec(object):
    """Collects named tops (and zero-top layers); to_proto() writes every
    layer they need, named as assigned."""

    def __init__(self):
        super(NetSpec, self).__setattr__('tops', OrderedDict())

    def __setattr__(self, name, value):
        if not isinstance(value, (Top, Function)):
            raise TypeError('NetSpec.{} must be a Top (a layer output) or a '
                            'layer of no tops, not {!r}'.format(name, value))
        self.tops[name] = value

    def __getattr__(self, name):
        try:
            return self.tops[name]
        except KeyError:
            raise _MissingTop('NetSpec has no top {!r}'.format(name))

    def __setitem__(self, name, value):
        self.__setattr__(name, value)

    def __getitem__(self, name):
        return self.__getattr__(name)

    def __delitem__(self, name):
        del self.tops[name]

    def __delattr__(self, name):
        del self.tops[name]

    def keys(self):
        return list(self.tops.keys())

    def vals(self):
        return list(self.tops.values())

    def update(self, name, params):
        """Merges `params` into the parameters of the layer making top
        `name`."""
        self.tops[name]._update(params)

    def to_proto(self):
        """The NetParameter of every named top (names as assigned)."""
        names = {top: name for name, top in self.tops.items()}
        autonames = Counter()
        layers = OrderedDict()
        for top in self.tops.values():
            top._to_proto(layers, names, autonames)
        net = caffe_pb2.NetParameter()
        net.layer.extend(layers.values())
        return net


class Layers(object):
    """caffe.layers: ``layers.<Type>(*bottoms, **params)`` makes a layer."""

    def __getattr__(self, name):
        if name.startswith('__'):
            raise AttributeError(name)

        def layer_fn(*args, **kwargs):
            fn = Function(name, args, kwargs)
            if fn.ntop == 0:
                return fn
            if fn.ntop == 1:
                return fn.tops[0]
            return fn.tops
        layer_fn.__name__ = name
        return layer_fn


class Parameters(object):
    """caffe.params: ``params.<Type>.<ENUM_VALUE>``, e.g. params.Pooling.MAX."""

    def __getattr__(self, name):
        if name.startswith('__'):
            raise AttributeError(name)
        message = getattr(caffe_pb2, name + 'Parameter', None)
        if message is None:
            raise AttributeError('caffe_pb2 has no {}Parameter'.format(name))

        class EnumValues(object):
            def __getattr__(self, value):
                return getattr(message, value)
        return EnumValues()


layers = Layers()
params = Parameters()
