#!/usr/bin/env python3
"""Trains a net from a solver prototxt through the `caffe` Python package,
as `poseidon_train train --solver=...` does, and prints the final test
scores (one "name = value" line per test output).

    python3 python/examples/train.py --solver models/lenet/solver.prototxt
    mpirun -np 2 python3 python/examples/train.py \\
        --solver models/lenet/solver.prototxt --distributed

Run it from the repository root: the models' data paths are relative to it.
Under mpirun with --distributed (or a solver that has a `distributed` block)
every rank trains on its share of the data and the test scores cover the
whole test set; only rank 0 prints them and writes snapshots.
"""
import argparse
import sys

import caffe
from caffe.proto import caffe_pb2
from google.protobuf import text_format


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    p.add_argument('--solver', required=True, help='solver prototxt')
    p.add_argument('--max-iter', type=int, help='override max_iter')
    p.add_argument('--test-iter', type=int,
                   help='override every test_iter (batches per test)')
    p.add_argument('--weights', help='initial weights (.caffemodel)')
    p.add_argument('--snapshot', help='resume from this .solverstate')
    p.add_argument('--snapshot-prefix', help='override snapshot_prefix')
    p.add_argument('--distributed', action='store_true',
                   help='train as one rank of the mpirun job even if the '
                        'solver has no distributed block')
    p.add_argument('--seed', type=int, help='override random_seed')
    return p.parse_args(argv)


def main(argv=None):
    args = parse_args(argv)
    caffe.set_mode_cpu()
    param = caffe_pb2.SolverParameter()
    with open(args.solver) as f:
        text_format.Merge(f.read(), param)
    if args.max_iter is not None:
        param.max_iter = args.max_iter
    if args.test_iter is not None:
        param.test_iter[:] = [args.test_iter] * max(1, len(param.test_iter))
    if args.snapshot_prefix:
        param.snapshot_prefix = args.snapshot_prefix
    if args.seed is not None:
        param.random_seed = args.seed
    if args.distributed:
        param.distributed.SetInParent()
    solver = caffe.solver_from_param(param)
    if args.weights:
        solver.net.copy_from(args.weights)
        for net in solver.test_nets:
            net.copy_from(args.weights)
    solver.solve(args.snapshot)
    # Solve() tests at the end only when max_iter is a test_interval step.
    interval = param.test_interval
    if solver.test_nets and (interval <= 0 or solver.iter % interval != 0):
        solver.test_all()
    if caffe.rank() == 0:
        for net, scores in zip(solver.test_nets, solver.test_scores):
            names = []
            for out in net.outputs:
                names += [out] * net.blobs[out].count
            for name, value in zip(names, scores):
                print('{} = {:.6g}'.format(name, value))
    return 0


if __name__ == '__main__':
    sys.exit(main())
