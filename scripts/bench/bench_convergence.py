#!/usr/bin/env python3
"""Final accuracy of BSP, SSP(s) and ASYNC training, side by side.

Trains LeNet on Fashion-MNIST (examples/fashion_mnist, the LMDBs the demo
makes) under mpirun with every layer on the parameter server, for each
number of workers (--workers) and consistency model (--models), at the
same total batch (--total-batch, split evenly over the workers) and the
same number of iterations, and tests the final weights on the whole test
set (100 x 100 images). With --servers S the job has S dedicated server
ranks after the workers (poseidon_train --servers); otherwise each worker
hosts a shard. One machine runs every rank (mpirun --oversubscribe), so
this measures convergence, not speed.

  python3 scripts/bench/bench_convergence.py --workers 2,4 --servers 2 \\
      --models BSP,SSP:1,SSP:3,ASYNC --iters 1000 --markdown
"""
import argparse
import os
import re
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
EXAMPLE = os.path.join(ROOT, "examples", "fashion_mnist")
ACCURACY_RE = re.compile(r"Test net output #\d+: accuracy = ([0-9.]+)")


def write_inputs(work, batch, iters):
    """The example's net at `batch` per worker and its solver, testing once
    at the end on the whole test set."""
    with open(os.path.join(EXAMPLE, "lenet_train_test.prototxt")) as f:
        net = f.read()
    if "batch_size: 64" not in net:
        sys.exit("examples/fashion_mnist/lenet_train_test.prototxt has no "
                 "training batch_size: 64 to replace")
    net = net.replace("batch_size: 64", "batch_size: %d" % batch, 1)
    net = net.replace('"data/fashion_mnist/',
                      '"%s/' % os.path.join(ROOT, "data", "fashion_mnist"))
    with open(os.path.join(work, "net.prototxt"), "w") as f:
        f.write(net)
    solver = "\n".join([
        'net: "%s"' % os.path.join(work, "net.prototxt"),
        "test_iter: 100", "test_interval: %d" % iters,
        "test_initialization: false", "base_lr: 0.01", "momentum: 0.9",
        "weight_decay: 0.0005", 'lr_policy: "fixed"', "display: 0",
        "max_iter: %d" % iters, "snapshot: 0", "snapshot_after_train: false",
        'snapshot_prefix: "%s"' % os.path.join(work, "lenet"),
        "random_seed: 1", "solver_mode: CPU", ""])
    with open(os.path.join(work, "solver.prototxt"), "w") as f:
        f.write(solver)


def run(args, work, workers, model):
    name, _, s = model.partition(":")
    cmd = [args.mpirun, "--allow-run-as-root", "--oversubscribe",
           "--bind-to", "none", "-x", "POSEIDON_NUM_THREADS=1",
           "-np", str(workers + args.servers),
           os.path.join(args.build, "tools", "poseidon_train"), "train",
           "--solver=" + os.path.join(work, "solver.prototxt"),
           "--comm=PS", "--consistency=" + name, "--staleness=" + (s or "0"),
           "--servers=%d" % args.servers]
    out = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                         universal_newlines=True, timeout=args.timeout)
    if out.returncode != 0:
        sys.stderr.write(out.stdout[-3000:])
        raise SystemExit("%d workers, %s: mpirun exited %d"
                         % (workers, model, out.returncode))
    found = ACCURACY_RE.findall(out.stdout)
    if not found:
        raise SystemExit("%d workers, %s: no test accuracy in the log"
                         % (workers, model))
    return float(found[-1])


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--build", default=os.path.join(ROOT, "build"))
    p.add_argument("--mpirun", default="mpirun")
    p.add_argument("--workers", default="2,4")
    p.add_argument("--servers", type=int, default=0,
                   help="dedicated server ranks (0: shards colocated with "
                        "the workers)")
    p.add_argument("--models", default="BSP,SSP:1,SSP:3,ASYNC")
    p.add_argument("--iters", type=int, default=1000)
    p.add_argument("--total-batch", type=int, default=64)
    p.add_argument("--timeout", type=int, default=1800)
    p.add_argument("--markdown", action="store_true")
    args = p.parse_args()
    if not os.path.isdir(os.path.join(ROOT, "data", "fashion_mnist",
                                      "fashion_mnist_train_lmdb")):
        sys.exit("no data/fashion_mnist LMDBs: run "
                 "examples/fashion_mnist/create_fashion_mnist.sh first")
    models = args.models.split(",")
    rows = []
    for w in (int(x) for x in args.workers.split(",")):
        if args.total_batch % w:
            sys.exit("--total-batch %d does not split over %d workers"
                     % (args.total_batch, w))
        work = tempfile.mkdtemp(prefix="poseidon_convergence.")
        write_inputs(work, args.total_batch // w, args.iters)
        accuracies = []
        for m in models:
            accuracies.append(run(args, work, w, m))
            print("%d workers, %s: accuracy %.4f" % (w, m, accuracies[-1]),
                  flush=True)
        rows.append((w, accuracies))
    names = [m.replace(":", "(") + (")" if ":" in m else "") for m in models]
    print("LeNet on Fashion-MNIST, %d iterations, total batch %d, %s, "
          "accuracy on the 10000 test images"
          % (args.iters, args.total_batch,
             "%d dedicated servers" % args.servers if args.servers
             else "colocated shards"))
    if args.markdown:
        print("| workers | " + " | ".join(names) + " |")
        print("|---|" + "---|" * len(names))
    for w, accuracies in rows:
        cells = ["%.4f" % a for a in accuracies]
        if args.markdown:
            print("| %d (batch %d each) | %s |"
                  % (w, args.total_batch // w, " | ".join(cells)))
        else:
            print("%d workers: %s" % (w, ", ".join(
                "%s %s" % (n, c) for n, c in zip(names, cells))))


if __name__ == "__main__":
    main()
