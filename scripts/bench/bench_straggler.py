#!/usr/bin/env python3
"""Throughput of BSP, SSP(s) and ASYNC with one worker slowed down.

Runs LeNet on Fashion-MNIST under mpirun, every rank a worker with a
colocated parameter-server shard (--comm=PS), with emulated compute
(poseidon_train --emulate_compute: each layer sleeps its profile's time
instead of computing, so the ranks do not compete for this machine's
cores and the straggler is exactly as slow as asked; the weights are
meaningless, the messages and the servers' updates are real). The last
rank's layer times are multiplied by --slow-factor. Each rank logs its
iterations per second at every display, and only rank 0 displays, so each
model runs twice: with the slowed worker last (rank 0's rate is a fast
worker's) and first (rank 0's rate is the slowed worker's). A rate is the
median of rank 0's display intervals after the first; the cluster's is
(W - 1) fast + slowed, in images per second. Each model runs --repeats
times, side by side in one run, and the table gives the medians. With
--servers S the job has S dedicated server ranks after the workers
(poseidon_train --servers) instead of the colocated shards.

  python3 scripts/bench/bench_straggler.py --workers 4 --slow-factor 2 \\
      --models BSP,SSP:2,ASYNC --iters 300 --repeats 3 --markdown
"""
import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
RATE_RE = re.compile(r"^\[1,(\d+)\]<std(?:err|out)>:.*Iteration (\d+) "
                     r"\(([0-9.]+) iter/s")


def write_inputs(work, batch, iters, display, layer_ms, slow_factor):
    data = os.path.join(ROOT, "data", "fashion_mnist")
    with open(os.path.join(ROOT, "examples", "fashion_mnist",
                           "caffe_lenet_train_test.prototxt")) as f:
        net = f.read()
    net = net.replace("batch_size: 64", "batch_size: %d" % batch, 1)
    net = net.replace("data/fashion_mnist", data)
    with open(os.path.join(work, "net.prototxt"), "w") as f:
        f.write(net)
    solver = "\n".join([
        'net: "%s"' % os.path.join(work, "net.prototxt"),
        "test_iter: 1", "test_interval: 100000", "test_initialization: false",
        "base_lr: 0.01", "momentum: 0.9", "weight_decay: 0.0005",
        'lr_policy: "inv"', "gamma: 0.0001", "power: 0.75",
        "display: %d" % display, "max_iter: %d" % iters, "snapshot: 0",
        "snapshot_after_train: false",
        'snapshot_prefix: "%s"' % os.path.join(work, "lenet"),
        "random_seed: 5", "solver_mode: CPU", ""])
    with open(os.path.join(work, "solver.prototxt"), "w") as f:
        f.write(solver)
    for name, k in (("fast", 1.0), ("slow", slow_factor)):
        with open(os.path.join(work, name + ".txt"), "w") as f:
            for layer in ("conv1", "conv2", "ip1"):
                f.write("%s %g %g\n" % (layer, layer_ms * k, layer_ms * k))


def run(args, work, model, slowed_first):
    """Rank 0's median iterations/s: the slowed worker's when slowed_first,
    else a fast worker's (only rank 0 displays its progress)."""
    name, _, s = model.partition(":")
    train = [os.path.join(args.build, "tools", "poseidon_train"), "train",
             "--solver=" + os.path.join(work, "solver.prototxt"),
             "--comm=PS", "--consistency=" + name,
             "--staleness=" + (s or "0"), "--servers=%d" % args.servers]
    fast = ["-np", str(args.workers - 1)] + train + [
        "--emulate_compute=" + os.path.join(work, "fast.txt")]
    slow = ["-np", "1"] + train + [
        "--emulate_compute=" + os.path.join(work, "slow.txt")]
    # The dedicated servers, if any, are the last ranks.
    servers = ([":", "-np", str(args.servers)] + train + [
        "--emulate_compute=" + os.path.join(work, "fast.txt")]
               if args.servers else [])
    cmd = ([args.mpirun, "--allow-run-as-root", "--oversubscribe",
            "--bind-to", "none", "--tag-output", "-x",
            "POSEIDON_NUM_THREADS=1"] +
           (slow + [":"] + fast if slowed_first else fast + [":"] + slow) +
           servers)
    out = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                         universal_newlines=True, timeout=args.timeout)
    if out.returncode != 0:
        sys.stderr.write(out.stdout[-3000:])
        raise SystemExit("%s: mpirun exited %d" % (model, out.returncode))
    rates = []
    for line in out.stdout.splitlines():
        m = RATE_RE.match(line)
        # Rank 0's lines; the first interval warms up.
        if m and m.group(1) == "0" and int(m.group(2)) > args.display:
            rates.append(float(m.group(3)))
    if not rates:
        raise SystemExit("%s: no progress lines from rank 0" % model)
    return statistics.median(rates)


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--build", default=os.path.join(ROOT, "build"))
    p.add_argument("--mpirun", default="mpirun")
    p.add_argument("--workers", type=int, default=4)
    p.add_argument("--servers", type=int, default=0,
                   help="dedicated server ranks (0: shards colocated with "
                        "the workers)")
    p.add_argument("--slow-factor", type=float, default=2.0)
    p.add_argument("--models", default="BSP,SSP:2,ASYNC")
    p.add_argument("--iters", type=int, default=300)
    p.add_argument("--display", type=int, default=25)
    p.add_argument("--batch", type=int, default=16)
    p.add_argument("--layer-ms", type=float, default=5.0,
                   help="forward and backward time of conv1, conv2 and ip1 "
                        "on a fast worker")
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--timeout", type=int, default=600)
    p.add_argument("--markdown", action="store_true")
    args = p.parse_args()
    models = args.models.split(",")
    work = tempfile.mkdtemp(prefix="poseidon_straggler.")
    write_inputs(work, args.batch, args.iters, args.display, args.layer_ms,
                 args.slow_factor)
    fast_rates = {m: [] for m in models}
    slow_rates = {m: [] for m in models}
    for _ in range(args.repeats):
        for m in models:  # side by side in each repeat
            fast_rates[m].append(run(args, work, m, slowed_first=False))
            slow_rates[m].append(run(args, work, m, slowed_first=True))
    rows = []
    for m in models:
        fast = statistics.median(fast_rates[m])
        slow_rate = statistics.median(slow_rates[m])
        total = ((args.workers - 1) * fast + slow_rate) * args.batch
        rows.append((m.replace(":", "(") + (")" if ":" in m else ""),
                     fast, slow_rate, total))
    base = rows[0][3]
    header = ("| model | a fast worker, iter/s | the slowed worker, iter/s "
              "| cluster, images/s | vs %s |" % rows[0][0])
    print("%d workers, one slowed %gx (emulated layers %g ms each way on a "
          "fast worker), batch %d each, %d iterations, median of %d, %s"
          % (args.workers, args.slow_factor, args.layer_ms, args.batch,
             args.iters, args.repeats,
             "%d dedicated servers" % args.servers if args.servers
             else "colocated shards"))
    if args.markdown:
        print(header)
        print("|---|---|---|---|---|")
    for name, fast, slow_rate, total in rows:
        if args.markdown:
            print("| %s | %.1f | %.1f | %.0f | %.2f |"
                  % (name, fast, slow_rate, total, total / base))
        else:
            print("%-8s fast %.1f iter/s, slowed %.1f iter/s, cluster %.0f "
                  "images/s (%.2fx)" % (name, fast, slow_rate, total,
                                        total / base))


if __name__ == "__main__":
    main()
