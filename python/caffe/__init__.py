"""Poseidon's pycaffe-compatible Python interface.

Scripts written for BVLC Caffe's ``caffe`` package run unchanged::

    import caffe
    caffe.set_mode_cpu()
    net = caffe.Net('deploy.prototxt', 'weights.caffemodel', caffe.TEST)
    net.blobs['data'].data[...] = images
    out = net.forward()

The same package is importable as ``poseidon``.
"""
from ._caffe import (TRAIN, TEST, Blob, BlobVec, Error, ConfigError,
                     ShapeError, FileError, NumericError, DistributedError,
                     set_mode_cpu, set_mode_gpu, set_device, set_random_seed,
                     set_num_threads, num_threads, solver_count,
                     set_solver_count, solver_rank, set_solver_rank,
                     layer_type_list, solver_type_list, init_log, log,
                     has_gpu, gpu_device_count, rank, world_size,
                     is_distributed)
# __version__: the Caffe release whose pycaffe API this is ('1.0.0', as
# BVLC's); poseidon_version: Poseidon's own release.
from ._caffe import __version__, poseidon_version
from .pycaffe import (Net, Layer, Solver, SGDSolver, NesterovSolver,
                      AdaGradSolver, RMSPropSolver, AdaDeltaSolver,
                      AdamSolver, get_solver, solver_from_param, NCCL, Timer,
                      has_nccl, set_multiprocess)
from .classifier import Classifier
from .detector import Detector
from . import io
from . import draw
from .net_spec import layers, params, NetSpec, to_proto

