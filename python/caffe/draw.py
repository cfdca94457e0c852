"""Drawing a net's graph (a caffe_pb2.NetParameter) with Graphviz, with the
functions of pycaffe's caffe.draw:

    net = caffe_pb2.NetParameter()
    text_format.Merge(open('train_val.prototxt').read(), net)
    caffe.draw.draw_net_to_file(net, 'net.png', 'LR')

Layers are boxes labelled with name, type and (for convolution and pooling)
kernel size, stride and pad, coloured by type; blobs are octagons; edges out
of a layer carry its output count (or a Data layer's batch size). An
in-place layer's top is drawn as a node of its own.

get_dot_source() writes the DOT text with no dependencies. Rendering
(draw_net, draw_net_to_file for formats other than .dot) runs Graphviz's
`dot` program; get_pydot_graph, for scripts that edit the graph, needs
pydot.
"""
import shutil
import subprocess

from .proto import caffe_pb2

# Graphviz styles of pycaffe's drawings.
LAYER_STYLE_DEFAULT = {'shape': 'record', 'fillcolor': '#6495ED',
                       'style': 'filled'}
NEURON_LAYER_STYLE = {'shape': 'record', 'fillcolor': '#90EE90',
                      'style': 'filled'}
BLOB_STYLE = {'shape': 'octagon', 'fillcolor': '#E0E0E0', 'style': 'filled'}

_LEARNING_TYPES = ('Convolution', 'Deconvolution', 'InnerProduct')


def get_pooling_types_dict():
    """{PoolingParameter.PoolMethod value: its name}, e.g. {0: 'MAX'}."""
    return {value: name for name, value
            in caffe_pb2.PoolingParameter.PoolMethod.items()}


def get_edge_label(layer):
    """The label of the edges out of `layer`: 'Batch N' for a Data layer,
    the number of outputs of a Convolution, Deconvolution or InnerProduct
    layer, else '""' (an empty DOT string)."""
    if layer.type == 'Data':
        return 'Batch ' + str(layer.data_param.batch_size)
    if layer.type in ('Convolution', 'Deconvolution'):
        return str(layer.convolution_param.num_output)
    if layer.type == 'InnerProduct':
        return str(layer.inner_product_param.num_output)
    return '""'


def get_layer_lr_mult(layer):
    """(weights lr_mult, bias lr_mult) of a Convolution, Deconvolution or
    InnerProduct layer, 1.0 where its param specs do not say; ValueError for
    other types or more than two specs."""
    if layer.type not in _LEARNING_TYPES:
        raise ValueError('%s layers do not have a learning rate multiplier'
                         % layer.type)
    specs = list(layer.param)
    if len(specs) > 2:
        raise ValueError('Could not parse the learning rate multiplier')
    mults = [spec.lr_mult for spec in specs] + [1.0] * (2 - len(specs))
    return tuple(mults)


def get_layer_label(layer, rankdir, display_lrm=False):
    """The DOT label (a quoted string) of a layer's node: name, type (with
    the pooling method), kernel size / stride / pad for convolution and
    pooling, and with display_lrm the lr multipliers of learning layers.
    Parts are separated by spaces for vertical graphs (TB, BT) and by line
    breaks otherwise."""
    separator = ' ' if rankdir in ('TB', 'BT') else r'\n'
    parts = [layer.name.replace('\\', '\\\\').replace('"', '\\"')]
    if layer.type == 'Pooling':
        parts.append('(%s %s)' % (layer.type,
                                  get_pooling_types_dict()[
                                      layer.pooling_param.pool]))
    else:
        parts.append('(%s)' % layer.type)
    if layer.type in ('Convolution', 'Deconvolution', 'Pooling'):
        if layer.type == 'Pooling':
            p = layer.pooling_param
            kernel, stride, pad = p.kernel_size, p.stride, p.pad
        else:
            p = layer.convolution_param
            kernel = p.kernel_size[0] if len(p.kernel_size) else 1
            stride = p.stride[0] if len(p.stride) else 1
            pad = p.pad[0] if len(p.pad) else 0
        parts.append(separator.join(['kernel size: %d' % kernel,
                                     'stride: %d' % stride,
                                     'pad: %d' % pad]))
    if display_lrm and layer.type in _LEARNING_TYPES:
        weights_mult, bias_mult = get_layer_lr_mult(layer)
        if weights_mult or bias_mult:
            parts.append('lr mult: %.1f, %.1f' % (weights_mult, bias_mult))
    return '"%s"' % separator.join(parts)


def choose_color_by_layertype(layertype):
    """Fill colour of a layer's node: convolutions red, pooling orange,
    inner products purple, others blue."""
    if layertype in ('Convolution', 'Deconvolution'):
        return '#FF5050'
    if layertype == 'Pooling':
        return '#FF9900'
    if layertype == 'InnerProduct':
        return '#CC33FF'
    return '#6495ED'


def _included(layer, phase):
    """pycaffe's phase filter: a layer with include rules is drawn when one
    names `phase`, one with exclude rules unless one names it (a rule that
    sets no phase counts as TRAIN, the field's default)."""
    if phase is None:
        return True
    if len(layer.include) and len(layer.exclude):
        raise ValueError('layer ' + layer.name + ' has both include '
                         'and exclude specified.')
    included = len(layer.include) == 0
    for rule in layer.include:
        included = included or rule.phase == phase
    for rule in layer.exclude:
        included = included and not rule.phase == phase
    return included


def _quote(text):
    """A DOT string literal; labels that are already quoted stay as
    they are."""
    text = str(text)
    if len(text) >= 2 and text[0] == '"' and text[-1] == '"':
        return text
    return '"' + text.replace('\\', '\\\\').replace('"', '\\"') + '"'


def _attrs(style, **extra):
    items = dict(style, **extra)
    return '[' + ', '.join('{}={}'.format(k, _quote(v))
                           for k, v in sorted(items.items())) + ']'


def get_dot_source(caffe_net, rankdir='LR', label_edges=True, phase=None,
                   display_lrm=False):
    """DOT text of the net's graph. phase: caffe.TRAIN / caffe.TEST keeps
    only that phase's layers (None: all)."""
    if rankdir not in ('LR', 'TB', 'BT', 'RL'):
        raise ValueError('rankdir must be LR, TB, BT or RL, not %r'
                         % (rankdir,))
    lines = ['digraph {} {{'.format(_quote(caffe_net.name or 'Net')),
             '  rankdir={};'.format(rankdir)]
    blob_nodes = {}

    def blob_node(name, producer):
        key = (name, producer)
        if key not in blob_nodes:
            node = 'blob_{}'.format(len(blob_nodes))
            blob_nodes[key] = node
            lines.append('  {} {};'.format(node,
                                           _attrs(BLOB_STYLE, label=name)))
        return blob_nodes[key]

    latest = {}  # blob name -> node of its latest version
    for i, layer in enumerate(caffe_net.layer):
        if not _included(layer, phase):
            continue
        node = 'layer_{}'.format(i)
        in_place = (len(layer.bottom) == 1 and len(layer.top) == 1 and
                    layer.bottom[0] == layer.top[0])
        style = NEURON_LAYER_STYLE if in_place else dict(
            LAYER_STYLE_DEFAULT,
            fillcolor=choose_color_by_layertype(layer.type))
        label = get_layer_label(layer, rankdir, display_lrm)
        lines.append('  {} {};'.format(node, _attrs(style, label=label)))
        for bottom in layer.bottom:
            src = latest.get(bottom) or blob_node(bottom, None)
            lines.append('  {} -> {};'.format(src, node))
        edge_label = get_edge_label(layer) if label_edges else '""'
        for top in layer.top:
            dst = blob_node(top, i)
            latest[top] = dst
            lines.append('  {} -> {} [label={}];'.format(node, dst,
                                                         _quote(edge_label)))
    lines.append('}')
    return '\n'.join(lines) + '\n'


def get_pydot_graph(caffe_net, rankdir='LR', label_edges=True, phase=None,
                    display_lrm=False):
    """The net's graph as a pydot.Dot (needs pydot)."""
    try:
        import pydot
    except ImportError:
        raise ImportError('caffe.draw.get_pydot_graph needs pydot (pip '
                          'install pydot); draw_net also works with just '
                          'Graphviz, get_dot_source with neither')
    return pydot.graph_from_dot_data(get_dot_source(
        caffe_net, rankdir, label_edges, phase, display_lrm))[0]


def _render_with_dot(source, ext):
    dot = shutil.which('dot')
    if dot is None:
        raise ImportError("caffe.draw needs Graphviz's dot program "
                          '(apt-get install graphviz) to render .%s; '
                          'get_dot_source() works without it' % ext)
    result = subprocess.run([dot, '-T' + ext], input=source.encode(),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    if result.returncode != 0:
        raise RuntimeError('dot -T%s failed: %s' % (
            ext, result.stderr.decode(errors='replace').strip()))
    return result.stdout


def draw_net(caffe_net, rankdir='LR', ext='png', phase=None,
             display_lrm=False):
    """The rendered graph as bytes in Graphviz format `ext` ('dot' gives the
    DOT text itself)."""
    source = get_dot_source(caffe_net, rankdir, phase=phase,
                            display_lrm=display_lrm)
    if ext == 'dot':
        return source.encode()
    # Straight to Graphviz, which pydot would run too (after re-parsing the
    # graph in Python: seconds for a ResNet-152).
    return _render_with_dot(source, ext)


def draw_net_to_file(caffe_net, filename, rankdir='LR', phase=None,
                     display_lrm=False):
    """Renders the graph to `filename` in the format its extension names."""
    ext = filename[filename.rfind('.') + 1:] if '.' in filename else 'png'
    with open(filename, 'wb') as f:
        f.write(draw_net(caffe_net, rankdir, ext, phase, display_lrm))
