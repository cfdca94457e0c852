#!/usr/bin/env python3
"""Scaling of distributed training on one machine: 1 rank vs 2 ranks.

For each net (LeNet batch 64, CIFAR-10 quick batch 100, from
scripts/bench/nets/<net>_time.prototxt) it trains with `poseidon_train train`

  1 rank   pinned to core 0 (taskset), one compute thread;
  2 ranks  under mpirun, each bound to its own core (--bind-to core), one
           compute thread each, the same batch per rank (weak scaling),

and reads the throughput from the solver's display lines ("Iteration N (X
iter/s, ..."), one every --display iterations; the first interval (warm-up)
is dropped and the median of the rest kept. Scaling efficiency is

    throughput(2 ranks) / (2 x throughput(1 rank)) = iter/s(2) / iter/s(1),

since each of the two ranks processes a full batch per iteration. The runs
alternate (1, 2, 1, 2, ...) --repeats times and the medians are reported, as
the machine is noisy. Rank 0's measured bytes per iteration and the cost
model's prediction are printed beside each 2-rank figure.

The communication threads of a rank share its core with the compute: on a
2-core machine nothing else is free.

A third run per repeat measures what the machine itself allows: two
independent 1-rank trainings at once, one per core, no communication. On
machines whose cores share a memory system (or are hyperthreads of one
physical core) these slow each other down; "ceiling" is their iter/s over
the lone 1-rank run, and "of ceiling" is the 2-rank efficiency divided by it,
the part of the loss that the distributed trainer is responsible for.

Example:
  scripts/bench/bench_scaling.py --build build --repeats 3
"""

import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile
import timing_nets

HERE = os.path.dirname(os.path.abspath(__file__))
REPO_ROOT = os.path.dirname(os.path.dirname(HERE))
NETS = ("lenet", "cifar10_quick")

SOLVER = """net: "{net}"
base_lr: 0.0001
momentum: 0.9
lr_policy: "fixed"
display: {display}
max_iter: {iters}
snapshot: 0
snapshot_after_train: false
random_seed: 1
"""

ITER_RE = re.compile(r"Iteration (\d+) \(([0-9.]+) iter/s")
TRAFFIC_RE = re.compile(r"Traffic of rank 0: (.*) per iteration measured, "
                        r"(.*) predicted")


def run(cmd, env):
    proc = subprocess.run(cmd, env=env, stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, text=True)
    if proc.returncode != 0:
        sys.exit("command failed (%d): %s\n%s" % (
            proc.returncode, " ".join(cmd), proc.stdout[-3000:]))
    return proc.stdout


def run_pair(cmds, env):
    """Runs the commands at once; returns their logs."""
    procs = [subprocess.Popen(c, env=env, stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True)
             for c in cmds]
    logs = [p.communicate()[0] for p in procs]
    for c, p, log in zip(cmds, procs, logs):
        if p.returncode != 0:
            sys.exit("command failed (%d): %s\n%s" % (
                p.returncode, " ".join(c), log[-3000:]))
    return logs


def iter_rate(log):
    rates = [float(m.group(2)) for m in ITER_RE.finditer(log)
             if int(m.group(1)) > 0]
    if len(rates) < 2:
        sys.exit("too few display lines to measure:\n" + log[-2000:])
    return statistics.median(rates[1:])


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--build", default=os.path.join(REPO_ROOT, "build"))
    ap.add_argument("--nets", default=",".join(NETS))
    ap.add_argument("--iters", type=int, default=60)
    ap.add_argument("--display", type=int, default=10)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--comm", default="AUTO",
                    help="transport for every layer (AUTO, PS, SFB, ALLREDUCE)")
    ap.add_argument("--mpirun", default="mpirun")
    ap.add_argument("--shared-memory", default="true",
                    choices=("true", "false"),
                    help="false: exchange through MPI messages even though "
                         "both ranks share this host")
    args = ap.parse_args()

    train = os.path.join(args.build, "tools", "poseidon_train")
    if not os.access(train, os.X_OK):
        sys.exit("%s not found: build Poseidon first" % train)
    env = dict(os.environ, POSEIDON_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1",
               GLOG_minloglevel="0")
    results = []
    with tempfile.TemporaryDirectory() as tmp:
        for net in args.nets.split(","):
            solver = os.path.join(tmp, net + "_solver.prototxt")
            with open(solver, "w") as f:
                f.write(SOLVER.format(
                    net=timing_nets.path(net),
                    display=args.display, iters=args.iters))
            one, two, pair, traffic = [], [], [], ""
            for rep in range(args.repeats):
                log1 = run(["taskset", "-c", "0", train, "train",
                            "--solver=" + solver], env)
                one.append(iter_rate(log1))
                log2 = run([args.mpirun, "--allow-run-as-root", "-np", "2",
                            "--bind-to", "core", "--map-by", "core",
                            "-x", "POSEIDON_NUM_THREADS", "-x",
                            "OPENBLAS_NUM_THREADS", train, "train",
                            "--solver=" + solver, "--comm=" + args.comm,
                            "--shared_memory=" + args.shared_memory], env)
                two.append(iter_rate(log2))
                logs = run_pair([["taskset", "-c", str(core), train, "train",
                                  "--solver=" + solver] for core in (0, 1)],
                                env)
                pair.append(statistics.mean(iter_rate(l) for l in logs))
                m = TRAFFIC_RE.search(log2)
                if m:
                    traffic = "%s measured, %s predicted" % m.groups()
                print("%s repeat %d: 1 rank %.2f iter/s, 2 ranks %.2f iter/s, "
                      "2 lone ranks at once %.2f iter/s each"
                      % (net, rep + 1, one[-1], two[-1], pair[-1]), flush=True)
            r1, r2 = statistics.median(one), statistics.median(two)
            rp = statistics.median(pair)
            results.append((net, r1, r2, r2 / r1, rp / r1, traffic))
    print()
    print("%-14s %11s %12s %10s %8s %9s   %s" % (
        "net", "1 rank it/s", "2 ranks it/s", "efficiency", "ceiling",
        "of ceil.", "traffic per iteration (rank 0)"))
    for net, r1, r2, eff, ceil, traffic in results:
        print("%-14s %11.2f %12.2f %10.3f %8.3f %9.3f   %s" % (
            net, r1, r2, eff, ceil, eff / ceil, traffic))


if __name__ == "__main__":
    main()
