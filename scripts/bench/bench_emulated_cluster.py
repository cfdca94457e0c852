#!/usr/bin/env python3
"""Wait-free + hybrid communication vs the naive scheme on an emulated cluster.

An 8-host cluster is emulated with network namespaces behind rate-capped
links (scripts/netns_cluster, one rank per namespace, mpirun through
scripts/netns_rsh). The compute of every rank is replaced by sleeping each
layer's measured time (`poseidon_train time --profile` on this machine, then
`train --emulate_compute`), so eight ranks fit on two cores and only the
communication is real: real bytes through real TCP over capped links.

For each net (AlexNet, VGG-16 shapes from scripts/bench/nets, at --batch
per rank) and link rate (1 and 10 Gbit/s) it runs

  naive     --comm=PS --wait_free=false: every gradient goes through the
            parameter server after the whole backward, and the next
            iteration starts after all of it is back (Poseidon's Caffe
            release without WFBP and SFB);
  wfbp      the defaults: wait-free backprop, transport per layer from the
            cost model (SFB for the large InnerProduct layers);

and prints seconds per iteration (median of the display intervals after the
first), the speed-up wfbp/naive, and rank 0's bytes per iteration per
transport beside the cost model's prediction. Needs root (namespaces).

Example:
  sudo scripts/bench/bench_emulated_cluster.py --build build
"""

import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
REPO_ROOT = os.path.dirname(os.path.dirname(HERE))
NET_DIR = os.path.join(HERE, "nets")
CLUSTER = os.path.join(REPO_ROOT, "scripts", "netns_cluster")
RSH = os.path.join(REPO_ROOT, "scripts", "netns_rsh")
PREFIX = "psdbench"
SUBNET = "10.77.0.0/24"

SOLVER = """net: "{net}"
base_lr: 0.000001
lr_policy: "fixed"
display: 1
max_iter: {iters}
snapshot: 0
snapshot_after_train: false
"""

ITER_RE = re.compile(r"Iteration (\d+) \(([0-9.]+) iter/s")
TOTAL_RE = re.compile(r"Traffic of rank 0: (.*) per iteration measured, "
                      r"(.*) predicted")
PART_RE = re.compile(r"\]   (PS|SFB|ALLREDUCE): (.*) per iteration measured, "
                     r"(.*) predicted")


def sh(cmd, **kw):
    return subprocess.run(cmd, stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, text=True, **kw)


def profile(train, net, batch, iters, out_dir):
    src = os.path.join(NET_DIR, net + "_time.prototxt")
    text = open(src).read()
    # The time nets use batch 16 for the data and the label.
    text = re.sub(r"dim: 16\n", "dim: %d\n" % batch, text)
    model = os.path.join(out_dir, "%s_b%d.prototxt" % (net, batch))
    with open(model, "w") as f:
        f.write(text)
    prof = model + ".profile"
    print("profiling %s at batch %d ..." % (net, batch), flush=True)
    r = sh([train, "time", "--model=" + model, "--iterations=%d" % iters,
            "--profile=" + prof])
    if r.returncode != 0:
        sys.exit("profiling failed:\n" + r.stdout[-3000:])
    m = re.search(r"Average Forward-Backward: ([0-9.]+) ms", r.stdout)
    return model, prof, float(m.group(1)) if m else float("nan")


def run_cluster(ranks, hosts, cmd, timeout):
    hostlist = ",".join("%s:1" % h for h in hosts[:ranks])
    mpi = ["mpirun", "--allow-run-as-root", "--mca", "plm_rsh_agent", RSH,
           "--mca", "plm_rsh_no_tree_spawn", "1", "--mca", "btl", "tcp,self",
           "--mca", "btl_tcp_if_include", SUBNET, "--mca",
           "oob_tcp_if_include", SUBNET, "--mca", "btl_tcp_progress_thread",
           os.environ.get("BENCH_TCP_PROGRESS_THREAD", "0"),
           "--bind-to", "none", "--map-by",
           "node", "-x", "PATH", "-x", "POSEIDON_NUM_THREADS", "-x",
           "OPENBLAS_NUM_THREADS", "-H", hostlist, "-np", str(ranks)] + cmd
    env = dict(os.environ, NETNS_CLUSTER_PREFIX=PREFIX,
               POSEIDON_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1")
    return sh([CLUSTER, "exec", "--prefix", PREFIX] + mpi, env=env,
              timeout=timeout)


def seconds_per_iter(log):
    rates = [float(m.group(2)) for m in ITER_RE.finditer(log)
             if int(m.group(1)) > 0]
    if len(rates) < 2:
        return float("nan")
    return 1.0 / statistics.median(rates[1:])


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--build", default=os.path.join(REPO_ROOT, "build"))
    ap.add_argument("--nets", default="alexnet,vgg16")
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--ranks", type=int, default=8)
    ap.add_argument("--rates", default="1gbit,10gbit")
    ap.add_argument("--iters", type=int, default=5)
    ap.add_argument("--profile-iters", type=int, default=1)
    ap.add_argument("--timeout", type=int, default=1800)
    args = ap.parse_args()
    if os.geteuid() != 0:
        sys.exit("needs root (network namespaces)")
    train = os.path.join(args.build, "tools", "poseidon_train")
    results = []
    with tempfile.TemporaryDirectory() as tmp:
        nets = {}
        for net in args.nets.split(","):
            nets[net] = profile(train, net, args.batch, args.profile_iters,
                                tmp)
            print("  %s: %.0f ms per forward-backward on this machine"
                  % (net, nets[net][2]), flush=True)
        for rate in args.rates.split(","):
            sh([CLUSTER, "down", "--prefix", PREFIX])
            up = sh([CLUSTER, "up", str(args.ranks), "--rate", rate,
                     "--prefix", PREFIX])
            if up.returncode != 0:
                sys.exit("netns_cluster up failed:\n" + up.stdout)
            hosts = sh([CLUSTER, "hosts", "--prefix", PREFIX]).stdout.split()
            try:
                for net, (model, prof, compute_ms) in nets.items():
                    solver = os.path.join(tmp, net + "_solver.prototxt")
                    with open(solver, "w") as f:
                        f.write(SOLVER.format(net=model, iters=args.iters))
                    row = {"net": net, "rate": rate, "compute": compute_ms}
                    for mode, flags in (("naive", ["--comm=PS",
                                                   "--wait_free=false"]),
                                        ("wfbp", [])):
                        print("%s at %s, %s ..." % (net, rate, mode),
                              flush=True)
                        r = run_cluster(args.ranks, hosts,
                                        [train, "train", "--solver=" + solver,
                                         "--emulate_compute=" + prof] + flags,
                                        args.timeout)
                        if r.returncode != 0:
                            print(r.stdout[-4000:])
                            sys.exit("%s %s failed" % (net, mode))
                        row[mode] = seconds_per_iter(r.stdout)
                        parts = ["%s %s (model %s)" % m.groups()
                                 for m in PART_RE.finditer(r.stdout)]
                        row[mode + "_traffic"] = "; ".join(parts)
                        print("  %.2f s per iteration; %s"
                              % (row[mode], row[mode + "_traffic"]),
                              flush=True)
                    results.append(row)
            finally:
                sh([CLUSTER, "down", "--prefix", PREFIX])
    print()
    print("%d ranks, batch %d per rank, compute emulated from this machine's "
          "per-layer times" % (args.ranks, args.batch))
    print("%-8s %-7s %10s %10s %10s %8s" % ("net", "link", "compute s",
                                             "naive s/it", "wfbp s/it",
                                             "speedup"))
    for r in results:
        print("%-8s %-7s %10.2f %10.2f %10.2f %8.2f" % (
            r["net"], r["rate"], r["compute"] / 1000, r["naive"], r["wfbp"],
            r["naive"] / r["wfbp"]))
    print()
    for r in results:
        print("%s %s naive traffic per iteration (rank 0): %s"
              % (r["net"], r["rate"], r["naive_traffic"]))
        print("%s %s wfbp  traffic per iteration (rank 0): %s"
              % (r["net"], r["rate"], r["wfbp_traffic"]))


if __name__ == "__main__":
    main()
