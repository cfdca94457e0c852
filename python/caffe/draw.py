"""Drawing a net's graph (a caffe_pb2.NetParameter) with Graphviz.

get_dot_source(net, ...) writes DOT text with no dependencies; the other
functions render it through pydot (and Graphviz's `dot`), as pycaffe's
caffe.draw does:

    net = caffe_pb2.NetParameter()
    text_format.Merge(open('train_val.prototxt').read(), net)
    caffe.draw.draw_net_to_file(net, 'net.png', 'LR')

Layers are boxes (labelled with name, type and the main parameters), blobs
are octagons; an in-place layer's top is drawn as a separate node.
"""
from .proto import caffe_pb2

_LAYER_STYLE = {'shape': 'record', 'fillcolor': '#6495ED', 'style': 'filled'}
_NEURON_STYLE = {'shape': 'record', 'fillcolor': '#90EE90', 'style': 'filled'}
_BLOB_STYLE = {'shape': 'octagon', 'fillcolor': '#E0E0E0', 'style': 'filled'}


def _layer_label(layer, rankdir):
    sep = ' ' if rankdir in ('TB', 'BT') else '\\n'
    parts = [layer.name, '(' + layer.type + ')']
    if layer.type in ('Convolution', 'Deconvolution'):
        p = layer.convolution_param
        kernel = list(p.kernel_size) or [p.kernel_h, p.kernel_w]
        parts.append('kernel {} stride {} pad {}'.format(
            'x'.join(str(k) for k in kernel),
            'x'.join(str(s) for s in p.stride) or 1,
            'x'.join(str(s) for s in p.pad) or 0))
        parts.append('out {}'.format(p.num_output))
    elif layer.type == 'Pooling':
        p = layer.pooling_param
        parts.append('{} kernel {} stride {}'.format(
            caffe_pb2.PoolingParameter.PoolMethod.Name(p.pool),
            p.kernel_size, p.stride))
    elif layer.type == 'InnerProduct':
        parts.append('out {}'.format(layer.inner_product_param.num_output))
    return sep.join(parts)


def _phase_ok(layer, phase):
    if phase is None:
        return True
    included = not layer.include or any(
        r.HasField('phase') and r.phase == phase for r in layer.include)
    excluded = any(r.HasField('phase') and r.phase == phase
                   for r in layer.exclude)
    return included and not excluded


def _quote(text):
    return '"' + str(text).replace('"', '\\"') + '"'


def _attrs(style, label):
    items = dict(style, label=label)
    return '[' + ', '.join('{}={}'.format(k, _quote(v))
                           for k, v in sorted(items.items())) + ']'


def get_dot_source(caffe_net, rankdir='LR', label_edges=True, phase=None):
    """DOT text of the net's graph. phase: caffe.TRAIN / caffe.TEST keeps
    only that phase's layers (None: all)."""
    if rankdir not in ('LR', 'TB', 'BT', 'RL'):
        raise ValueError('rankdir must be LR, TB, BT or RL')
    lines = ['digraph {} {{'.format(_quote(caffe_net.name or 'net')),
             '  rankdir={};'.format(rankdir)]
    blob_nodes = {}

    def blob_node(name, owner):
        key = (name, owner)
        if key not in blob_nodes:
            node = 'blob_{}'.format(len(blob_nodes))
            blob_nodes[key] = node
            lines.append('  {} {};'.format(node, _attrs(_BLOB_STYLE, name)))
        return blob_nodes[key]

    latest = {}  # blob name -> node of its latest producer's version
    for i, layer in enumerate(caffe_net.layer):
        if not _phase_ok(layer, phase):
            continue
        node = 'layer_{}'.format(i)
        in_place = list(layer.bottom) == list(layer.top) and layer.top
        style = _NEURON_STYLE if in_place else _LAYER_STYLE
        lines.append('  {} {};'.format(node, _attrs(
            style, _layer_label(layer, rankdir))))
        for bottom in layer.bottom:
            src = latest.get(bottom) or blob_node(bottom, None)
            lines.append('  {} -> {};'.format(src, node))
        for top in layer.top:
            dst = blob_node(top, i)
            latest[top] = dst
            edge = ' [label={}]'.format(_quote(top)) if label_edges else ''
            lines.append('  {} -> {}{};'.format(node, dst, edge))
    lines.append('}')
    return '\n'.join(lines) + '\n'


def get_pydot_graph(caffe_net, rankdir='LR', label_edges=True, phase=None):
    """The net's graph as a pydot.Dot (needs pydot)."""
    try:
        import pydot
    except ImportError:
        raise ImportError('caffe.draw needs pydot (pip install pydot) and '
                          'Graphviz to render; get_dot_source() needs '
                          'neither')
    graphs = pydot.graph_from_dot_data(
        get_dot_source(caffe_net, rankdir, label_edges, phase))
    return graphs[0]


def draw_net(caffe_net, rankdir='LR', ext='png', phase=None):
    """The rendered graph as bytes in format `ext` ('dot' gives the DOT text
    without pydot)."""
    if ext == 'dot':
        return get_dot_source(caffe_net, rankdir, phase=phase).encode()
    return get_pydot_graph(caffe_net, rankdir, phase=phase).create(format=ext)


def draw_net_to_file(caffe_net, filename, rankdir='LR', phase=None):
    """Renders the graph to `filename`, the format taken from its extension
    (.dot needs no pydot)."""
    ext = filename[filename.rfind('.') + 1:] if '.' in filename else 'png'
    with open(filename, 'wb') as f:
        f.write(draw_net(caffe_net, rankdir, ext, phase))
