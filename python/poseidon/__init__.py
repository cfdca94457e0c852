"""Poseidon's Python interface: the same package as ``caffe``.

``import poseidon`` gives the module ``caffe`` itself, and its submodules
under both names, so ``poseidon.Net``, ``poseidon.io`` and
``from poseidon.proto import caffe_pb2`` are caffe's own objects.
"""
import sys

import caffe
import caffe.coord_map  # noqa: F401  (not imported by caffe/__init__)
import caffe.draw  # noqa: F401
import caffe.proto.caffe_pb2  # noqa: F401

for _name, _module in list(sys.modules.items()):
    if _name.startswith('caffe.'):
        sys.modules['poseidon.' + _name[len('caffe.'):]] = _module
sys.modules[__name__] = caffe
