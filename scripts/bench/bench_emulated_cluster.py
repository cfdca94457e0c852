#!/usr/bin/env python3
"""Wait-free + hybrid communication vs the naive scheme on an emulated cluster.

Hosts are emulated with network namespaces behind rate-capped links
(scripts/netns_cluster; mpirun through scripts/netns_rsh), with one or more
ranks per namespace. The compute of every rank is replaced by sleeping each
layer's measured time (`poseidon_train time --profile` on this machine, then
`train --emulate_compute`), so many ranks fit on two cores and only the
communication is real: real bytes through real TCP over capped links.

For each topology (hosts x ranks per host, --topologies), net (shapes from
scripts/bench/nets: alexnet, vgg16, vgg19_22k, inception_v3, ... at --batch
per rank) and link rate (--rates) it runs

  naive     --comm=PS --wait_free=false --host_level=false: every gradient
            goes through the parameter server after the whole backward, and
            the next iteration starts after all of it is back (Poseidon's
            Caffe release without WFBP and SFB);
  flat      wait-free backprop, transport per layer from the cost model,
            without the host level (only with several ranks per host);
  wfbp      the defaults: wait-free backprop, the cost model's transport per
            layer, and the host level when hosts run several ranks;
  ps        wait-free, every layer through the parameter server, its shards
            colocated with the workers (--comm=PS);
  servers   wait-free, every layer through the parameter server, its shards
            on --server-hosts hosts of their own, one server rank each
            (--comm=PS --servers=N; the workers' hosts as in the topology);
  ring      wait-free, every layer through the ring allreduce
            (--comm=ALLREDUCE);

and prints seconds per iteration (median of the display intervals after the
first; with --repeats, the median over the runs), the speed-up against one host (ranks x compute / iteration time,
ideal = ranks) and against naive, the bytes per iteration through the hosts'
links (tc counters, all hosts, sent), and rank 0's bytes per transport beside
the cost model's prediction. Needs root (namespaces).

Large clusters on a small machine (Note [Time dilation] and Note [Shared
emulated parameters] in the C++ sources):
  --dilation K   runs the cluster K times slower than the one it stands for:
                 links capped at rate / K, layer times times K, the ranks'
                 real compute (sums, SFB rebuild, update) stretched to K times
                 its CPU time. Seconds are reported undilated (divided by K);
                 ratios are unchanged. Each run logs how much real compute
                 could not be stretched ("overrun"): near 0 means the machine
                 kept up; otherwise raise K.
  shared params  every rank keeps its parameters, gradients and history in
                 one shared-memory mapping (on by default; --own-params to
                 give each rank its own), so 32 ranks of VGG19-22K fit.

Settings side by side: --variants 'LABEL=FLAGS;LABEL=FLAGS' runs every mode
once per variant (the flags added to every rank's poseidon_train), the
variants taking turns, --repeats times each, on the same links and profile;
the table has a row per variant. A word NAME=VALUE among the flags (no
leading dashes) is set in every rank's environment instead, e.g.
  --variants 'per exchange=POSEIDON_PS_WINDOWS=exchange;shared='

Dedicated server hosts: --server-hosts N adds N namespaces after the
topology's hosts, used by the servers mode only (default modes then: ps,
servers, ring), e.g. 8 workers colocated vs 8 workers + 4 server hosts vs
the ring:
  sudo scripts/bench/bench_emulated_cluster.py --nets vgg16 --rates 1gbit \
      --server-hosts 4

Link use: --sample-links SECONDS samples the byte counters of the link of
the host that holds shard 0 (host 0; in the servers mode the first server
host) every SECONDS while each run trains, and prints, for each exchange
(a span with traffic both ways, each above a tenth of the link's rate,
quieter stretches of up to a second inside it included), its length and
how busy the link was: the larger direction's bytes over what the capped
link carries in that time, and the shares of the exchange in which both
directions, or only one, ran at 85% of the rate or more.

What MPI alone moves: --alltoall DEPTHS (e.g. 1,4,8) runs, on each
cluster before the nets, bench_alltoall (plain non-blocking MPI, no
Poseidon) once per depth: every rank sends --alltoall-rounds rounds of a
--alltoall-message message to every other rank, DEPTH rounds in flight,
with shard 0's link sampled as above (--sample-links, 0.1 s if unset).
The defaults move what a naive VGG-16 exchange moves on 8 hosts (33 rounds
of 4 MiB: 2 x 553 MB / 8 hosts each way), in the parameter server's
block size.
Example:
  sudo scripts/bench/bench_emulated_cluster.py --build build \
      --topologies 4x2,8x1 --nets alexnet,vgg16 --rates 1gbit
  sudo scripts/bench/bench_emulated_cluster.py --nets vgg16 --rates 1gbit \
      --modes naive --repeats 3 \
      --variants 'one block=--bytes_in_flight=1;default='
"""

import argparse
import collections
import os
import re
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import timing_nets

HERE = os.path.dirname(os.path.abspath(__file__))
REPO_ROOT = os.path.dirname(os.path.dirname(HERE))
CLUSTER = os.path.join(REPO_ROOT, "scripts", "netns_cluster")
RSH = os.path.join(REPO_ROOT, "scripts", "netns_rsh")
PREFIX = "psdbench"
SUBNET = "10.77.0.0/24"

# The modes (above) and their flags.
MODES = {"naive": ["--comm=PS", "--wait_free=false", "--host_level=false"],
         "flat": ["--host_level=false"],
         "wfbp": [],
         "ps": ["--comm=PS"],
         "servers": ["--comm=PS"],
         "ring": ["--comm=ALLREDUCE"]}

SOLVER = """net: "{net}"
base_lr: 0.000001
lr_policy: "fixed"
display: 1
max_iter: {iters}
snapshot: 0
snapshot_after_train: false
"""

OVERRUN_RE = re.compile(r"Time dilation [0-9.]+x: ([0-9.]+) (us|ms|s) of "
                        r"real compute could not be stretched")
# Poseidon's published speed-ups (Zhang et al., USENIX ATC 2017), GPU
# clusters over 40 GbE unless noted, for the rows that match.
PUBLISHED = {("inception_v3", 32): "31.5x (32 nodes)",
             ("vgg19_22k", 16): "15.5x (16 nodes, 10 GbE)"}

ITER_RE = re.compile(r"Iteration (\d+) \(([0-9.]+) iter/s")
TOTAL_RE = re.compile(r"Traffic of rank 0: (.*) per iteration measured, "
                      r"(.*) predicted")
PART_RE = re.compile(r"\]   (PS|SFB|ALLREDUCE): (.*) per iteration measured, "
                     r"(.*) predicted")


def sh(cmd, **kw):
    return subprocess.run(cmd, stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, text=True, **kw)


def profile(train, net, batch, iters, out_dir, reuse):
    """Writes the net at `batch` and its per-layer profile into out_dir;
    with `reuse`, an existing profile there is kept (profile once on a
    quiet machine, then run the clusters)."""
    src = timing_nets.path(net)
    text = open(src).read()
    # The time nets use batch 16 for the data and the label.
    text = re.sub(r"dim: 16\n", "dim: %d\n" % batch, text)
    model = os.path.join(out_dir, "%s_b%d.prototxt" % (net, batch))
    with open(model, "w") as f:
        f.write(text)
    prof = model + ".profile"
    if reuse and os.path.exists(prof):
        with open(prof) as f:
            total = sum(float(x) for line in f if not line.startswith("#")
                        for x in line.split()[1:3])
        print("reusing %s" % prof, flush=True)
        return model, prof, total
    print("profiling %s at batch %d ..." % (net, batch), flush=True)
    r = sh([train, "time", "--model=" + model, "--iterations=%d" % iters,
            "--profile=" + prof])
    if r.returncode != 0:
        sys.exit("profiling failed:\n" + r.stdout[-3000:])
    m = re.search(r"Average Forward-Backward: ([0-9.]+) ms", r.stdout)
    return model, prof, float(m.group(1)) if m else float("nan")


def run_cluster(ranks_per_host, hosts, cmd, timeout, server_hosts=(),
                env_vars=()):
    """mpirun over `hosts` (ranks_per_host each) and then `server_hosts`
    (one rank each, the job's last ranks: --servers places its servers
    there), with `env_vars` ("NAME=VALUE") in every rank's environment."""
    ranks = ranks_per_host * len(hosts) + len(server_hosts)
    hostlist = ",".join(["%s:%d" % (h, ranks_per_host) for h in hosts] +
                        ["%s:1" % h for h in server_hosts])
    mpi = ["mpirun", "--allow-run-as-root", "--mca", "plm_rsh_agent", RSH,
           "--mca", "plm_rsh_no_tree_spawn", "1", "--mca", "btl", "tcp,self",
           "--mca", "btl_tcp_if_include", SUBNET, "--mca",
           "oob_tcp_if_include", SUBNET, "--mca", "btl_tcp_progress_thread",
           os.environ.get("BENCH_TCP_PROGRESS_THREAD", "0"),
           "--bind-to", "none", "--map-by",
           "slot" if server_hosts else "node", "-x", "PATH", "-x", "POSEIDON_NUM_THREADS", "-x",
           "OPENBLAS_NUM_THREADS"]
    for var in env_vars:
        mpi += ["-x", var]
    mpi += ["-H", hostlist, "-np", str(ranks)] + cmd
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


def overrun_seconds(log):
    """Largest unstretched real compute any rank reported (seconds)."""
    scale = {"us": 1e-6, "ms": 1e-3, "s": 1.0}
    return max([float(m.group(1)) * scale[m.group(2)]
                for m in OVERRUN_RE.finditer(log)] or [0.0])


def link_bytes_sent():
    """Bytes sent through all hosts' capped links so far (tc counters)."""
    out = sh([CLUSTER, "stats", "--prefix", PREFIX]).stdout.splitlines()[1:]
    return sum(int(line.split()[2]) for line in out if line.split())


def namespaces():
    """The cluster's host namespaces, in host order."""
    return sh([CLUSTER, "hosts", "--names", "--prefix", PREFIX]).stdout.split()


class LinkSampler(threading.Thread):
    """(seconds, rx bytes, tx bytes) of eth0 in namespace `ns`, every
    `interval` seconds until stop()."""

    def __init__(self, ns, interval):
        super().__init__(daemon=True)
        self.ns, self.interval, self.samples = ns, interval, []
        self.done = threading.Event()

    def run(self):
        stats = "/sys/class/net/eth0/statistics/"
        while not self.done.is_set():
            r = sh(["ip", "netns", "exec", self.ns, "cat",
                    stats + "rx_bytes", stats + "tx_bytes"])
            words = r.stdout.split()
            if r.returncode == 0 and len(words) == 2:
                self.samples.append((time.monotonic(), int(words[0]),
                                     int(words[1])))
            self.done.wait(self.interval)

    def stop(self):
        self.done.set()
        self.join()
        return self.samples


Span = collections.namedtuple(
    "Span", "seconds rx tx busy full_both full_one")


def exchange_spans(samples, capacity, share=0.1, gap=1.0, shortest=0.5,
                   full=0.85):
    """Exchanges in link samples [(seconds, rx bytes, tx bytes)]: stretches
    of intervals in which both directions moved more than `share` of what
    `capacity` (bytes/s) allows, joined across quieter stretches of up to
    `gap` seconds (the quiet time counts as part of the exchange), at least
    `shortest` seconds long. Returns Spans: busy = the larger direction's
    bytes over capacity x seconds; full_both and full_one = the shares of
    the span's time in which both directions, or exactly one, ran at
    `full` of capacity or more (a link busy one way at a time shows as a
    large full_one beside a small full_both)."""
    spans, run, quiet = [], [], []
    for a, b in zip(samples, samples[1:]):
        dt, rx, tx = b[0] - a[0], b[1] - a[1], b[2] - a[2]
        if dt > 0 and min(rx, tx) > share * capacity * dt:
            run.extend(quiet)
            run.append((dt, rx, tx))
            quiet = []
        elif run:
            quiet.append((dt, rx, tx))
            if sum(i[0] for i in quiet) > gap:
                spans.append(run)
                run, quiet = [], []
    if run:
        spans.append(run)
    out = []
    for span in spans:
        seconds = sum(i[0] for i in span)
        if seconds < shortest:
            continue
        rx, tx = sum(i[1] for i in span), sum(i[2] for i in span)
        full_time = [0.0, 0.0, 0.0]  # by how many directions ran full
        for dt, d_rx, d_tx in span:
            limit = full * capacity * dt
            full_time[(d_rx >= limit) + (d_tx >= limit)] += dt
        out.append(Span(seconds, rx, tx, max(rx, tx) / (capacity * seconds),
                        full_time[2] / seconds, full_time[1] / seconds))
    return out


def split_env(words):
    """Variant words -> (flags, "NAME=VALUE" environment settings)."""
    env = [w for w in words if not w.startswith("-") and "=" in w]
    return [w for w in words if w not in env], env


def run_mode(args, per_host, hosts, cmd, net, mode, server_hosts=(),
             env_vars=(), capacity=0.0):
    """One run of the cluster: seconds per iteration (undilated), bytes
    through the links per iteration, overrun and rank 0's traffic; with
    --sample-links, the exchanges on shard 0's link (`capacity` bytes/s)."""
    sampler = None
    if args.sample_links > 0:
        ns = namespaces()[len(hosts) if server_hosts else 0]
        sampler = LinkSampler(ns, args.sample_links)
        sampler.start()
    before = link_bytes_sent()
    r = run_cluster(per_host, hosts, cmd, args.timeout, server_hosts,
                    env_vars)
    sent = link_bytes_sent() - before
    spans = exchange_spans(sampler.stop(), capacity) if sampler else []
    if r.returncode != 0:
        print(r.stdout[-4000:])
        sys.exit("%s %s failed" % (net, mode))
    parts = ["%s %s (model %s)" % m.groups() for m in PART_RE.finditer(r.stdout)]
    return {"s": seconds_per_iter(r.stdout) / args.dilation,
            "link": sent / max(args.iters, 1),
            "overrun": overrun_seconds(r.stdout),
            "traffic": "; ".join(parts),
            "spans": spans}


def run_alltoall(args, hosts, depth, capacity):
    """bench_alltoall at `depth` over `hosts`, shard 0's link sampled: its
    printed line and the exchange spans."""
    probe = os.path.join(args.build, "tools", "bench_alltoall")
    if not os.access(probe, os.X_OK):
        sys.exit("%s not found: build the bench_alltoall target" % probe)
    sampler = LinkSampler(namespaces()[0], args.sample_links or 0.1)
    sampler.start()
    r = run_cluster(1, hosts, [probe, "--rounds=%d" % args.alltoall_rounds,
                               "--message=%d" % args.alltoall_message,
                               "--depth=%d" % depth], args.timeout)
    spans = exchange_spans(sampler.stop(), capacity)
    if r.returncode != 0:
        print(r.stdout[-4000:])
        sys.exit("bench_alltoall at depth %d failed" % depth)
    line = [l for l in r.stdout.splitlines() if l.startswith("alltoall:")]
    return (line[0] if line else "alltoall: no result line"), spans


def print_spans(spans):
    for span in spans:
        print("  shard 0's link, an exchange: %.1f s dilated, %.0f MB in, "
              "%.0f MB out, %.0f%% busy; both ways full %.0f%% of it, one "
              "way %.0f%%" % (span.seconds, span.rx / 1e6, span.tx / 1e6,
                              100 * span.busy, 100 * span.full_both,
                              100 * span.full_one), flush=True)


def parse_variants(text):
    """'a=--x=1;b=' -> [("a", ["--x=1"]), ("b", [])]; "" -> one unnamed."""
    if not text.strip():
        return [("", [])]
    variants = []
    for item in text.split(";"):
        if "=" not in item:
            sys.exit("--variants: '%s' is not LABEL=FLAGS" % item)
        label, flags = item.split("=", 1)
        if not label.strip():
            sys.exit("--variants: '%s' has no label" % item)
        variants.append((label.strip(), flags.split()))
    if len({v[0] for v in variants}) != len(variants):
        sys.exit("--variants: labels must differ")
    return variants


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--build", default=os.path.join(REPO_ROOT, "build"))
    ap.add_argument("--nets", default="alexnet,vgg16")
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--topologies", default="8x1",
                    help="hosts x ranks per host, comma separated")
    ap.add_argument("--rates", default="1gbit,10gbit")
    ap.add_argument("--iters", type=int, default=5)
    ap.add_argument("--profile-iters", type=int, default=1)
    ap.add_argument("--timeout", type=int, default=1800)
    ap.add_argument("--dilation", type=float, default=1.0,
                    help="time dilation factor K (see above)")
    ap.add_argument("--own-params", action="store_true",
                    help="each rank keeps its own parameters (needs ranks x "
                    "the model's memory)")
    ap.add_argument("--profiles", default="",
                    help="keep the nets and their profiles in this folder "
                    "and reuse them on later runs (default: a temporary "
                    "folder, profiled anew)")
    ap.add_argument("--train-flags", default="",
                    help="more flags for every rank's poseidon_train, "
                    "e.g. '--num_push_threads=4 --timeline=/tmp/t.json'")
    ap.add_argument("--modes", default="",
                    help="which of naive, flat, wfbp, ps, servers, ring to "
                    "run (default naive,flat,wfbp; with --server-hosts "
                    "ps,servers,ring)")
    ap.add_argument("--server-hosts", type=int, default=0,
                    help="hosts of their own for the servers mode's "
                    "parameter servers, one server rank each")
    ap.add_argument("--variants", default="",
                    help="'LABEL=FLAGS;LABEL=FLAGS': settings to compare, "
                    "each run in turn (see above)")
    ap.add_argument("--alltoall", default="",
                    help="depths (rounds in flight) of the MPI all-to-all "
                    "probe to run on each cluster, e.g. 1,4,8 (see above)")
    ap.add_argument("--alltoall-rounds", type=int, default=33)
    ap.add_argument("--alltoall-message", type=int, default=4 << 20)
    ap.add_argument("--sample-links", type=float, default=0.0,
                    help="sample shard 0's link every this many seconds "
                    "and print how busy it was during each exchange")
    ap.add_argument("--repeats", type=int, default=1,
                    help="runs of every mode and variant; the median is "
                    "reported")
    args = ap.parse_args()
    variants = parse_variants(args.variants)
    if args.repeats < 1:
        sys.exit("--repeats must be >= 1")
    if args.dilation < 1:
        sys.exit("--dilation must be >= 1")
    if not re.fullmatch(r"([1-9][0-9]*(,[1-9][0-9]*)*)?", args.alltoall):
        sys.exit("--alltoall: '%s' is not a list of depths such as 1,4,8"
                 % args.alltoall)
    if args.alltoall_rounds < 1 or args.alltoall_message < 1:
        sys.exit("--alltoall-rounds and --alltoall-message must be >= 1")
    if args.server_hosts < 0:
        sys.exit("--server-hosts must be >= 0")
    wanted_modes = set((args.modes or ("ps,servers,ring" if args.server_hosts
                                       else "naive,flat,wfbp")).split(","))
    unknown = wanted_modes - set(MODES)
    if unknown:
        sys.exit("--modes: unknown %s (known: %s)"
                 % (", ".join(sorted(unknown)), ", ".join(MODES)))
    if "servers" in wanted_modes and not args.server_hosts:
        sys.exit("--modes servers needs --server-hosts N")
    if os.geteuid() != 0:
        sys.exit("needs root (network namespaces)")
    train = os.path.join(args.build, "tools", "poseidon_train")
    topologies = [tuple(int(x) for x in t.split("x"))
                  for t in args.topologies.split(",")]
    results = []
    with tempfile.TemporaryDirectory() as tmp:
        nets = {}
        for net in args.nets.split(","):
            where = args.profiles or tmp
            os.makedirs(where, exist_ok=True)
            nets[net] = profile(train, net, args.batch, args.profile_iters,
                                where, bool(args.profiles))
            print("  %s: %.0f ms per forward-backward on this machine"
                  % (net, nets[net][2]), flush=True)
        for (num_hosts, per_host), rate in (
                (t, r) for t in topologies for r in args.rates.split(",")):
            rate_gbits = float(re.sub("[a-z]", "", rate)) * (
                0.001 if rate.endswith("mbit") else 1)
            # The links of the dilated cluster (Note [Time dilation]).
            link_mbit = rate_gbits * 1000 / args.dilation
            sh([CLUSTER, "down", "--prefix", PREFIX])
            up = sh([CLUSTER, "up", str(num_hosts + args.server_hosts),
                     "--rate",
                     "%dmbit" % max(1, round(link_mbit)), "--prefix", PREFIX])
            if up.returncode != 0:
                sys.exit("netns_cluster up failed:\n" + up.stdout)
            all_hosts = sh([CLUSTER, "hosts", "--prefix",
                            PREFIX]).stdout.split()
            hosts = all_hosts[:num_hosts]
            server_hosts = all_hosts[num_hosts:]
            modes = [(m, flags) for m, flags in MODES.items()
                     if m in wanted_modes and (m != "flat" or per_host > 1)]
            for depth in (int(d) for d in args.alltoall.split(",") if d):
                print("%dx1 MPI all-to-all at %s, depth %d ..."
                      % (num_hosts, rate, depth), flush=True)
                line, spans = run_alltoall(args, hosts, depth,
                                           link_mbit * 1e6 / 8)
                print("  " + line, flush=True)
                print_spans(spans)
            emulation = ["--emulate_dilation=%g" % args.dilation,
                         "--comm_timeout=%d" % (600 * args.dilation)]
            if not args.own_params:
                emulation.append("--emulate_shared_params")
            try:
                for net, (model, prof, compute_ms) in nets.items():
                    solver = os.path.join(tmp, net + "_solver.prototxt")
                    with open(solver, "w") as f:
                        f.write(SOLVER.format(net=model, iters=args.iters))
                    rows = {}
                    for label, _ in variants:
                        rows[label] = {
                            "net": net, "rate": rate, "compute": compute_ms,
                            "topology": "%dx%d" % (num_hosts, per_host),
                            "ranks": num_hosts * per_host,
                            "variant": label}
                    for mode, flags in modes:
                        runs = {label: [] for label, _ in variants}
                        for rep in range(args.repeats):
                            for label, words in variants:
                                extra, env_vars = split_env(words)
                                print("%s %s at %s, %s%s%s ..." % (
                                    rows[label]["topology"], net, rate, mode,
                                    ", " + label if label else "",
                                    ", run %d" % (rep + 1)
                                    if args.repeats > 1 else ""), flush=True)
                                run = run_mode(
                                    args, per_host, hosts,
                                    [train, "train", "--solver=" + solver,
                                     "--emulate_compute=" + prof,
                                     "--network_gbits=%g"
                                     % (link_mbit / 1000)]
                                    + emulation + flags + extra
                                    + (["--servers=%d" % len(server_hosts)]
                                       if mode == "servers" else [])
                                    + args.train_flags.split(),
                                    net, mode,
                                    server_hosts if mode == "servers"
                                    else (), env_vars,
                                    link_mbit * 1e6 / 8)
                                runs[label].append(run)
                                print("  %.2f s per iteration; links %.0f MB "
                                      "per iteration; rank 0: %s; overrun "
                                      "%.2f s" % (run["s"], run["link"] / 1e6,
                                                  run["traffic"],
                                                  run["overrun"]),
                                      flush=True)
                                print_spans(run["spans"])
                        for label, _ in variants:
                            row, done = rows[label], runs[label]
                            row[mode] = statistics.median(r["s"] for r in done)
                            row[mode + "_link"] = statistics.median(
                                r["link"] for r in done)
                            row[mode + "_overrun"] = max(r["overrun"]
                                                         for r in done)
                            row[mode + "_traffic"] = done[-1]["traffic"]
                            row[mode + "_runs"] = [r["s"] for r in done]
                    results.extend(rows[label] for label, _ in variants)
            finally:
                sh([CLUSTER, "down", "--prefix", PREFIX])
    print()
    print("batch %d per rank, compute emulated from this machine's per-layer "
          "times; speed-up = ranks x compute / iteration time (ideal = ranks)"
          "; time dilation %g (seconds shown undilated)"
          % (args.batch, args.dilation))
    nan = float("nan")
    width = max([len(v[0]) for v in variants] + [7])
    ran = [m for m in MODES if any(m in r for r in results)]
    head = "%-13s %-*s %-5s %-7s %9s" % ("net", width, "variant", "hosts",
                                        "link", "compute s")
    head += "".join(" %9s" % (m + " s") for m in ran)
    head += " %8s" % "speed-up" + (" %8s" % "vs naive" if "naive" in ran
                                   else "")
    head += "".join(" %10s" % (m + " MB") for m in ran)
    print(head + " %8s  %s" % ("overrun", "published"))
    for r in results:
        # The speed-up of the defaults (wfbp), or else of the fastest mode.
        best = r.get("wfbp", min(r[m] for m in ran if m in r))
        overrun = max(r.get(m + "_overrun", 0.0) for m in ran)
        line = "%-13s %-*s %-5s %-7s %9.2f" % (
            r["net"], width, r["variant"] or "-", r["topology"], r["rate"],
            r["compute"] / 1000)
        line += "".join(" %9.2f" % r.get(m, nan) for m in ran)
        line += " %8.2f" % (r["ranks"] * r["compute"] / 1000 / best)
        if "naive" in ran:
            line += " %8.2f" % (r.get("naive", nan) / best)
        line += "".join(" %10.0f" % (r.get(m + "_link", nan) / 1e6)
                        for m in ran)
        print(line + " %7.2fs  %s" % (
            overrun, PUBLISHED.get((r["net"], r["ranks"]), "")))
    print("(MB: sent through all hosts' links per iteration, start-up "
          "included, divided by the iterations; overrun: real compute the "
          "dilation could not stretch, largest over the modes and ranks, "
          "dilated seconds)")
    print()
    for r in results:
        for mode in MODES:
            if mode in r:
                print("%s %s %s %s%s traffic per iteration (rank 0): %s" % (
                    r["net"], r["topology"], r["rate"], mode,
                    " (" + r["variant"] + ")" if r["variant"] else "",
                    r[mode + "_traffic"]))
                if len(r[mode + "_runs"]) > 1:
                    print("  s per iteration of each run: %s" % ", ".join(
                        "%.2f" % x for x in r[mode + "_runs"]))


if __name__ == "__main__":
    main()
