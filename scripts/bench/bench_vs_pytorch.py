#!/usr/bin/env python3
"""Times training iterations of Poseidon and PyTorch on the same nets (CPU).

Seven nets, each from its timing prototxt scripts/bench/nets/<net>_time
.prototxt (the reference net of models/ fed by an Input layer and a
constant DummyData label), at a batch that keeps a run short on a small
machine (--batch changes it):

  lenet 64, cifar10_quick 100, alexnet 32, resnet50 8, vgg16 8,
  googlenet 8 (its two auxiliary loss heads included), inception_v3 8
  (its auxiliary head included)

Each side times one forward + backward pass (no solver update) per
iteration:

  Poseidon  `<build>/tools/poseidon_train time --model=NET --iterations=N`
            on the batch-adjusted prototxt, parsing its "Average
            Forward-Backward: X ms." line (one untimed pass first);
  PyTorch   the same prototxt translated layer by layer by caffe_net.py
            (Caffe's ceil-rounded pooling via ceil_mode, LRN via
            LocalResponseNorm, grouped convolutions, BatchNorm + Scale as
            BatchNorm2d with affine, Eltwise, Concat, each SoftmaxWithLoss
            with its loss_weight; ResNet's stride sits on the first 1x1 of
            a projection block because the prototxt puts it there), timed
            the same way after --warmup passes, in a fresh Python process.
            --handwritten times the hand-written LeNet, CIFAR-10 quick and
            AlexNet of handwritten_nets.py instead.

Each side runs --repeats times, interleaved over sides and thread counts
(Poseidon T1, PyTorch T1, Poseidon T2, PyTorch T2, Poseidon T1, ...) so that
slow drifts of the machine hit all alike; each figure is the median over the
runs of the mean time per iteration. The ratio is PyTorch / Poseidon: above
1 means Poseidon is faster. Reported beside the times:

  GFLOP/s    the net's FLOPs per iteration (net_cost.py, Note [FLOP
             convention]: Convolution and InnerProduct multiply-adds x 2;
             backward = the weight gradient + the bottom gradient where one
             is needed, so 2x forward except the first convolution's 1x)
             divided by the median time; the same count for both sides.
  % of peak  that rate over the best single-precision GEMM this machine ran
             at the same thread count: large square products in PyTorch
             (torch.mm), in the OpenBLAS poseidon_train links (cblas_sgemm),
             in numpy and in Poseidon's own kernel, AVX-512 or AVX2 (bench_gemm;
             cpu_peak.py), each named in the output.
  peak RSS   the largest resident set of each timed process (ru_maxrss from
             wait4, Note [Peak RSS of a child]), the median over the runs;
             PyTorch's includes the interpreter and torch's libraries (the
             JSON output also has its resident set right after `import
             torch`).

Both sides run with the same thread count (--threads, a list: 1,2 times
every net at 1 and at 2 threads) and with glibc's allocator pinned:
MALLOC_MMAP_THRESHOLD_ (--mmap-threshold) and MALLOC_TRIM_THRESHOLD_
(--trim-threshold). Left to itself glibc moves its mmap threshold as large
blocks are freed, so whether a big activation buffer comes from mmap (and is
page-faulted anew on every iteration) depends on the allocation history.
Pinning the mmap threshold high serves every buffer from the heap; but
setting it also freezes the trim threshold at 128 KiB, so freed buffers at
the top of the heap would still be handed back to the kernel and faulted in
again next iteration: hence both are pinned. (PyTorch's AlexNet at batch 16:
~57,000 minor page faults per iteration with neither, ~52,000 with the mmap
threshold alone, ~4,800 with both.) The variables are read when a process
starts, so every timed process is a child started with them set.

--profile-layers NET runs one net once per side and thread count with
per-layer timing (Poseidon's `time --profile`, torch.profiler on PyTorch's
side: layer_profile.py) and prints both sides layer by layer and summed by
layer type, to show where the time goes.

PyTorch is not installed by the project's scripts (a download of gigabytes,
kept out of CI); install it with
  python3 -m pip install torch
or time Poseidon alone with --skip-pytorch.

Examples:
  scripts/bench/bench_vs_pytorch.py --threads 1,2 --markdown
  scripts/bench/bench_vs_pytorch.py --nets lenet,alexnet --json r.json
  scripts/bench/bench_vs_pytorch.py --profile-layers resnet50 --threads 2
  scripts/bench/bench_vs_pytorch.py --dry-run
"""

import argparse
import importlib.util
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import caffe_net  # noqa: E402
import cpu_peak  # noqa: E402
import layer_profile  # noqa: E402
import net_cost  # noqa: E402
import timing_nets  # noqa: E402

REPO_ROOT = os.path.dirname(os.path.dirname(HERE))

# name: (title, default batch, iterations per run, PyTorch warm-up passes).
# The iteration counts aim at 10-25 s of timed work per run at two threads
# on a 2-core AVX-512 machine, estimated from the FLOPs per iteration at
# these batches (AlexNet 132 G, ResNet-50 183 G, VGG-16 741 G, GoogLeNet
# 74 G, Inception-V3 274 G) and ~100 GFLOP/s, about what AlexNet ran at
# batch 16 (the small nets run faster than that estimate says).
NETS = {
    "lenet": ("LeNet", 64, 50, 2),
    "cifar10_quick": ("CIFAR-10 quick", 100, 50, 2),
    "alexnet": ("AlexNet", 32, 10, 1),
    "resnet50": ("ResNet-50", 8, 6, 1),
    "vgg16": ("VGG-16", 8, 3, 1),
    "googlenet": ("GoogLeNet", 8, 10, 1),
    "inception_v3": ("Inception-V3", 8, 5, 1),
}

# Above any single allocation of these nets, so that glibc serves every
# buffer from its heap and keeps freed memory for reuse. Values above 32 MiB
# are honoured when given through the environment (checked on glibc 2.36);
# older glibc caps mallopt() at 32 MiB on 64-bit systems.
DEFAULT_MMAP_THRESHOLD = 10000000000
DEFAULT_TRIM_THRESHOLD = 10000000000

TORCH_MISSING = (
    "PyTorch is not installed for %s. The project's scripts leave it out "
    "(gigabytes, not needed to build or test Poseidon); install it "
    "with\n  %s -m pip install torch\nor time Poseidon alone with "
    "--skip-pytorch." % (sys.executable, sys.executable))

TOTAL_RE = re.compile(r"Average Forward-Backward:\s*([0-9.eE+-]+)\s*ms")
FORWARD_RE = re.compile(r"Average Forward pass:\s*([0-9.eE+-]+)\s*ms")
BACKWARD_RE = re.compile(r"Average Backward pass:\s*([0-9.eE+-]+)\s*ms")
SHAPE_RE = re.compile(r"(shape\s*\{\s*dim\s*:\s*)(\d+)")


# ---------------------------------------------------------------------------
# PyTorch side: runs in a child process started with --torch-worker.


def _vm_kib(field):
    try:
        with open("/proc/self/status") as handle:
            for line in handle:
                if line.startswith(field + ":"):
                    return int(line.split()[1])
    except OSError:
        pass
    return None


def torch_worker(spec):
    """Times spec["iterations"] forward+backward passes; prints JSON."""
    import torch
    import torch.nn.functional as F

    rss_import_kib = _vm_kib("VmRSS")
    torch.set_num_threads(spec["threads"])
    torch.manual_seed(0)
    if spec.get("handwritten"):
        import handwritten_nets

        net = handwritten_nets.build(spec["handwritten"]).train()
        shapes = caffe_net.input_shapes(caffe_net.read_prototxt(spec["model"]))
        data = torch.randn(*shapes["data"])
        labels = torch.zeros(shapes["data"][0], dtype=torch.long)

        def model(_):
            return F.cross_entropy(net(data), labels)
        blobs = None
    else:
        net_def = caffe_net.read_prototxt(spec["model"])
        # As `poseidon_train time`: TRAIN phase, dropout and batch
        # statistics on.
        model = caffe_net.build_torch_net(net_def).train()
        blobs = {name: (torch.zeros(shape, dtype=torch.long)
                        if len(shape) == 1 else torch.randn(*shape))
                 for name, shape in caffe_net.input_shapes(net_def).items()}
        with torch.no_grad():
            model(blobs)  # materialises the LazyLinear layers

    # Parameter gradients accumulate across iterations and are never
    # applied, as in `poseidon_train time`.
    step = layer_profile.timed_step(model, blobs)
    for _ in range(spec["warmup"]):
        step()
    result = {
        "torch": torch.__version__,
        "threads": torch.get_num_threads(),
        "mmap_threshold": os.environ.get("MALLOC_MMAP_THRESHOLD_"),
        "trim_threshold": os.environ.get("MALLOC_TRIM_THRESHOLD_"),
        "rss_after_import_mib": (rss_import_kib / 1024.0
                                 if rss_import_kib else None),
    }
    n = spec["iterations"]
    if spec.get("profile"):
        result.update(layer_profile.torch_layer_times(model, step, n))
        result["total_ms"] = result["forward_ms"] + result["backward_ms"]
    else:
        forward = backward = 0.0
        for _ in range(n):
            f, b = step()
            forward += f
            backward += b
        result.update({"forward_ms": 1e3 * forward / n,
                       "backward_ms": 1e3 * backward / n,
                       "total_ms": 1e3 * (forward + backward) / n})
    print("RESULT " + json.dumps(result))


# ---------------------------------------------------------------------------
# Driver.


def child_env(args, threads):
    env = cpu_peak.thread_env(os.environ, threads)
    env["MALLOC_MMAP_THRESHOLD_"] = str(args.mmap_threshold)
    env["MALLOC_TRIM_THRESHOLD_"] = str(args.trim_threshold)
    return env


def write_net(name, batch, workdir):
    """Copies the timing net with its batch dimension set to `batch`."""
    with open(timing_nets.path(name)) as handle:
        text = handle.read()
    # The first dim of every shape (the Input data and the DummyData label)
    # is the batch.
    text, count = SHAPE_RE.subn(lambda m: m.group(1) + str(batch), text)
    if count == 0:
        raise SystemExit("%s_time.prototxt: no shape to set the batch of"
                         % name)
    path = os.path.join(workdir, "%s_b%d.prototxt" % (name, batch))
    with open(path, "w") as handle:
        handle.write(text)
    return path


def poseidon_command(args, model, iterations, profile=None, build=None):
    command = [
        os.path.join(build or args.build, "tools", "poseidon_train"),
        "time",
        "--model=" + model,
        "--iterations=%d" % iterations,
    ]
    if profile:
        command.append("--profile=" + profile)
    return command + args.poseidon_arg


def torch_command(spec):
    return [sys.executable, os.path.abspath(__file__), "--torch-worker",
            json.dumps(spec)]


def run_child(command, env, what):
    """Runs a timed child; returns (its output, its peak RSS in MiB or None).

    Note [Peak RSS of a child]: wait4's ru_maxrss is the largest resident
    set the process ever had, and Linux carries the address space it was
    forked (or vforked) with into that figure across exec: so it reads
    max(this driver's peak, the child's own peak). The driver stays small
    (no torch, no numpy), so the figure is the child's own whenever it is
    above the driver's peak; when it is not, the child's cannot be told
    apart and None is returned.
    """
    own_peak_kib = _vm_kib("VmHWM") or 0
    process = subprocess.Popen(command, env=env, stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT,
                               universal_newlines=True)
    output = process.stdout.read()
    process.stdout.close()
    _, status, usage = os.wait4(process.pid, 0)
    process.returncode = os.waitstatus_to_exitcode(status)
    if process.returncode != 0:
        tail = "\n".join(output.splitlines()[-20:])
        raise SystemExit("%s failed (exit %d):\n%s"
                         % (what, process.returncode, tail))
    own_peak_kib = max(own_peak_kib, _vm_kib("VmHWM") or 0)
    if usage.ru_maxrss <= own_peak_kib:
        return output, None
    return output, usage.ru_maxrss / 1024.0  # Linux: KiB


def parse_poseidon(output):
    """Reads the averages that `poseidon_train time` prints (Caffe's form)."""
    totals = TOTAL_RE.findall(output)
    if not totals:
        tail = "\n".join(output.splitlines()[-20:])
        raise SystemExit("no 'Average Forward-Backward: X ms.' line in the "
                         "output of poseidon_train time:\n" + tail)
    result = {"total_ms": float(totals[-1])}
    for key, pattern in (("forward_ms", FORWARD_RE),
                         ("backward_ms", BACKWARD_RE)):
        found = pattern.findall(output)
        if found:
            result[key] = float(found[-1])
    return result


def parse_torch(output):
    for line in output.splitlines():
        if line.startswith("RESULT "):
            return json.loads(line[len("RESULT "):])
    raise SystemExit("the PyTorch worker printed no result:\n" + output)


def fmt(value, digits=2):
    return "-" if value is None else "%.*f" % (digits, value)


def median_of(runs, key):
    values = [r[key] for r in runs if r.get(key) is not None]
    return statistics.median(values) if values else None


def parse_batches(args, names):
    """{net: batch} from the defaults, --alexnet-batch and --batch."""
    batches = {name: NETS[name][1] for name in names}
    if args.alexnet_batch:
        batches["alexnet"] = args.alexnet_batch
    for item in (args.batch or "").split(","):
        item = item.strip()
        if not item:
            continue
        net, _, value = item.rpartition("=")
        if not value.isdigit() or int(value) < 1:
            raise SystemExit("--batch: '%s' is not NET=BATCH or BATCH" % item)
        if net and net not in NETS:
            raise SystemExit("--batch: unknown net '%s'" % net)
        for name in ([net] if net else names):
            batches[name] = int(value)
    return batches


def parse_threads(text):
    try:
        threads = [int(t) for t in text.split(",") if t.strip()]
    except ValueError:
        threads = []
    if not threads or min(threads) < 1:
        raise SystemExit("--threads: '%s' is not a list of positive counts "
                         "such as 1,2" % text)
    return threads


def measure_peaks(args, threads):
    """{threads: {"gflops", "what", "all": [...], "errors": [...]}}."""
    libraries = [l for l in cpu_peak.LIBRARIES
                 if not (l == "torch" and args.skip_pytorch)]
    blas = cpu_peak.blas_of_executable(args.poseidon_train)
    bench_gemm = cpu_peak.bench_gemm_of_executable(args.poseidon_train)
    peaks = {}
    for t in threads:
        results, errors = cpu_peak.measure(
            libraries, args.peak_size, t, args.peak_repeats,
            child_env(args, t), blas, bench_gemm)
        best = max(results, key=lambda r: r["gflops"]) if results else None
        peaks[t] = {"gflops": best["gflops"] if best else None,
                    "what": best["what"] if best else None,
                    "all": results, "errors": errors}
        print("peak at %d thread%s: %s" % (
            t, "" if t == 1 else "s", "; ".join(
                "%.1f GFLOP/s %s" % (r["gflops"], r["what"])
                for r in results) or "not measured"), flush=True)
        for e in errors:
            print("  (not measured: %s)" % e, file=sys.stderr)
    return peaks


def summarise(entry, flops, peak):
    """Adds the medians, rates and fractions to one (net, threads) entry."""
    for side in ("poseidon", "pytorch", "base"):
        runs = entry.get(side + "_runs")
        if runs is None:
            continue
        ms = median_of(runs, "total_ms")
        entry[side + "_ms"] = ms
        entry[side + "_forward_ms"] = median_of(runs, "forward_ms")
        entry[side + "_backward_ms"] = median_of(runs, "backward_ms")
        entry[side + "_peak_rss_mib"] = median_of(runs, "peak_rss_mib")
        rate = flops / ms / 1e6 if ms else None
        entry[side + "_gflops"] = rate
        entry[side + "_fraction_of_peak"] = (
            rate / peak if rate and peak else None)
    p, t = entry["poseidon_ms"], entry["pytorch_ms"]
    entry["ratio"] = t / p if p and t else None
    if "base_runs" in entry:
        b = entry["base_ms"]
        entry["base_ratio"] = t / b if b and t else None
        entry["base_over_poseidon"] = b / p if b and p else None
        # Each run's pair ran back to back: the median of their ratios is
        # less moved by a slow stretch of the machine that hit some runs.
        pairs = [x["total_ms"] / y["total_ms"]
                 for x, y in zip(entry["base_runs"], entry["poseidon_runs"])
                 if x.get("total_ms") and y.get("total_ms")]
        entry["paired_base_over_poseidon"] = (
            statistics.median(pairs) if pairs else None)


def print_base_table(results, threads, base_build):
    """The base build beside this one (--base-build)."""
    print()
    print("base build: %s" % base_build)
    print("%-14s %7s %5s %9s %9s %9s %11s %11s %9s %7s" % (
        "net", "threads", "batch", "base", "poseidon", "pytorch",
        "ratio base", "ratio now", "base/now", "paired"))
    for t in threads:
        for r in (r for r in results if r["threads"] == t):
            print("%-14s %7d %5d %9s %9s %9s %11s %11s %9s %7s" % (
                r["net"], t, r["batch"], fmt(r["base_ms"]),
                fmt(r["poseidon_ms"]), fmt(r["pytorch_ms"]),
                fmt(r["base_ratio"]), fmt(r["ratio"]),
                fmt(r["base_over_poseidon"], 3),
                fmt(r["paired_base_over_poseidon"], 3)))
    print("(ratio = pytorch / that build; base/now > 1: this build is "
          "faster than the base; paired: the median of each run's base / "
          "now, the two timed back to back)")


def pct(value):
    return "-" if value is None else "%.0f%%" % (100 * value)


def print_tables(results, peaks, threads, repeats):
    for t in threads:
        peak = peaks.get(t, {})
        print()
        print("%d thread%s; peak %s GFLOP/s (%s)" % (
            t, "" if t == 1 else "s", fmt(peak.get("gflops"), 1),
            peak.get("what") or "not measured"))
        print("%-14s %5s %8s %9s %9s %6s %13s %11s %13s   %s" % (
            "net", "batch", "GFLOP/it", "poseidon", "pytorch", "ratio",
            "GFLOP/s p|t", "peak p|t", "RSS MiB p|t",
            "fwd/bwd ms: poseidon | pytorch"))
        for r in (r for r in results if r["threads"] == t):
            print("%-14s %5d %8.2f %9s %9s %6s %13s %11s %13s   %s/%s | %s/%s"
                  % (r["net"], r["batch"], r["flops"] / 1e9,
                     fmt(r["poseidon_ms"]), fmt(r["pytorch_ms"]),
                     fmt(r["ratio"]),
                     "%s|%s" % (fmt(r["poseidon_gflops"], 1),
                                fmt(r["pytorch_gflops"], 1)),
                     "%s|%s" % (pct(r["poseidon_fraction_of_peak"]),
                                pct(r["pytorch_fraction_of_peak"])),
                     "%s|%s" % (fmt(r["poseidon_peak_rss_mib"], 0),
                                fmt(r["pytorch_peak_rss_mib"], 0)),
                     fmt(r["poseidon_forward_ms"]),
                     fmt(r["poseidon_backward_ms"]),
                     fmt(r["pytorch_forward_ms"]),
                     fmt(r["pytorch_backward_ms"])))
    print("(ms per forward+backward iteration, median of %d runs per side; "
          "ratio = pytorch / poseidon, > 1: Poseidon faster; GFLOP/s from "
          "the prototxt's convolution and inner-product FLOPs; peak = best "
          "SGEMM at that thread count)" % repeats)


def print_markdown(results, peaks, threads, repeats):
    print()
    print("| net | batch | threads | Poseidon ms | PyTorch ms | PyTorch / "
          "Poseidon | GFLOP/s Poseidon / PyTorch | % of peak Poseidon / "
          "PyTorch | peak RSS MiB Poseidon / PyTorch |")
    print("|---|---|---|---|---|---|---|---|---|")
    for t in threads:
        for r in (r for r in results if r["threads"] == t):
            print("| %s | %d | %d | %s | %s | %s | %s / %s | %s / %s | "
                  "%s / %s |" % (
                      NETS[r["net"]][0], r["batch"], t, fmt(r["poseidon_ms"]),
                      fmt(r["pytorch_ms"]), fmt(r["ratio"]),
                      fmt(r["poseidon_gflops"], 1),
                      fmt(r["pytorch_gflops"], 1),
                      pct(r["poseidon_fraction_of_peak"]),
                      pct(r["pytorch_fraction_of_peak"]),
                      fmt(r["poseidon_peak_rss_mib"], 0),
                      fmt(r["pytorch_peak_rss_mib"], 0)))
    print()
    print("Medians of %d interleaved runs per side. Peak: the best "
          "single-precision GEMM measured at that thread count (%s)." % (
              repeats, "; ".join(
                  "%d thread%s: %s GFLOP/s, %s" % (
                      t, "" if t == 1 else "s",
                      fmt(peaks.get(t, {}).get("gflops"), 1),
                      peaks.get(t, {}).get("what") or "not measured")
                  for t in threads)))


def profile_layers(args, name, batch, threads, workdir):
    """--profile-layers: both sides' per-layer times for one net."""
    model = write_net(name, batch, workdir)
    analysis = net_cost.analyse_file(model)
    iterations = args.iterations or NETS[name][2]
    warmup = args.warmup if args.warmup is not None else NETS[name][3]
    report = []
    for t in threads:
        env = child_env(args, t)
        poseidon = torch_result = None
        if not args.skip_poseidon:
            path = os.path.join(workdir, "%s_t%d.profile" % (name, t))
            run_child(poseidon_command(args, model, iterations, path), env,
                      "poseidon_train time (%s)" % name)
            poseidon = layer_profile.read_poseidon_profile(path)
        if not args.skip_pytorch:
            output, _ = run_child(torch_command({
                "model": model, "threads": t, "iterations": iterations,
                "warmup": warmup, "profile": True}), env,
                "PyTorch worker (%s)" % name)
            torch_result = parse_torch(output)
        rows = layer_profile.merge(analysis, poseidon, torch_result)
        summary = layer_profile.type_summary(rows)
        unattributed = (torch_result or {}).get("unattributed_backward_ms")
        print("\n%s, batch %d, %d thread%s, %d iterations: ms per iteration"
              % (name, batch, t, "" if t == 1 else "s", iterations))
        for line in layer_profile.format_rows(rows, args.profile_top):
            print(line)
        print()
        for line in layer_profile.format_summary(summary, unattributed):
            print(line)
        if poseidon:
            print("Poseidon: sum of layers %.1f ms" % sum(
                f + b for _, f, b in poseidon))
        if torch_result:
            print("PyTorch: sum of layers %.1f ms, %.1f ms with the "
                  "profiler's wall clock (forward %.1f, backward %.1f)" % (
                      sum(s["forward_ms"] + s["backward_ms"]
                          for s in torch_result["steps"]) +
                      (unattributed or 0), torch_result["total_ms"],
                      torch_result["forward_ms"],
                      torch_result["backward_ms"]))
        report.append({"net": name, "batch": batch, "threads": t,
                       "iterations": iterations, "rows": rows,
                       "by_type": summary,
                       "pytorch_unattributed_backward_ms": unattributed})
    return report


def make_parser():
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n")[0],
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog=__doc__.split("\n", 2)[2])
    parser.add_argument(
        "--build", default=os.path.join(REPO_ROOT, "build"),
        help="build tree holding tools/poseidon_train (default: %(default)s)")
    parser.add_argument(
        "--base-build", metavar="BUILD",
        help="also time this build tree's poseidon_train (another commit's "
        "build: the code before a change), interleaved with the other "
        "sides, and report its times and base / poseidon")
    parser.add_argument(
        "--nets", default=",".join(NETS),
        help="comma-separated subset of %s (default: all)" % ", ".join(NETS))
    parser.add_argument(
        "--batch",
        help="batch sizes: BATCH for every net, or NET=BATCH,... (defaults: "
        + ", ".join("%s %d" % (n, v[1]) for n, v in NETS.items()) + ")")
    parser.add_argument("--alexnet-batch", type=int,
                        help="AlexNet's batch (the same as --batch "
                        "alexnet=B)")
    parser.add_argument(
        "--iterations", type=int,
        help="timed iterations per run (default: per net, "
        + ", ".join("%s %d" % (n, v[2]) for n, v in NETS.items()) + ")")
    parser.add_argument(
        "--warmup", type=int,
        help="untimed PyTorch iterations before timing (default: 2 for "
        "LeNet and CIFAR-10 quick, 1 for the others; Poseidon's time runs "
        "one)")
    parser.add_argument("--repeats", type=int, default=5,
                        help="runs of each side; medians are reported "
                        "(default: %(default)s)")
    parser.add_argument(
        "--threads", default=str(os.cpu_count()),
        help="thread counts for both sides, e.g. 1,2 (interleaved; "
        "default: %(default)s)")
    parser.add_argument(
        "--mmap-threshold", type=int, default=DEFAULT_MMAP_THRESHOLD,
        help="MALLOC_MMAP_THRESHOLD_ for the timed processes "
        "(default: %(default)s)")
    parser.add_argument(
        "--trim-threshold", type=int, default=DEFAULT_TRIM_THRESHOLD,
        help="MALLOC_TRIM_THRESHOLD_ for the timed processes "
        "(default: %(default)s)")
    parser.add_argument(
        "--poseidon-arg", action="append", default=[],
        help="extra argument for poseidon_train, written "
        "--poseidon-arg=--flag=value (repeatable)")
    parser.add_argument("--handwritten", action="store_true",
                        help="PyTorch side of LeNet, CIFAR-10 quick and "
                        "AlexNet: the hand-written nets of "
                        "handwritten_nets.py instead of caffe_net.py's "
                        "translation")
    parser.add_argument("--peak-size", type=int, default=2048,
                        help="n of the n x n SGEMMs of the peak "
                        "(default: %(default)s)")
    parser.add_argument("--peak-repeats", type=int, default=5,
                        help="timed SGEMMs per library; the best counts "
                        "(default: %(default)s)")
    parser.add_argument("--no-peak", action="store_true",
                        help="skip the SGEMM peak (no %% of peak)")
    parser.add_argument("--skip-poseidon", action="store_true",
                        help="time PyTorch only")
    parser.add_argument("--skip-pytorch", action="store_true",
                        help="time Poseidon only")
    parser.add_argument(
        "--profile-layers", metavar="NET",
        help="per-layer forward/backward times of NET on both sides "
        "instead of the comparison")
    parser.add_argument(
        "--profile-top", type=int, default=0, metavar="N",
        help="with --profile-layers: only the N layers where Poseidon "
        "spends the most time beyond PyTorch (default: every layer)")
    parser.add_argument("--dry-run", action="store_true",
                        help="print the commands, run nothing")
    parser.add_argument("--json", help="also write all measurements here")
    parser.add_argument("--markdown", action="store_true",
                        help="also print the results as the Markdown "
                        "table of docs/performance.md")
    parser.add_argument(
        "--net-dir",
        help="write the batch-adjusted timing nets (and profiles) here and "
        "keep them (default: a temporary directory, removed at the end)")
    parser.add_argument("--torch-worker", help=argparse.SUPPRESS)
    return parser


def main():
    parser = make_parser()
    args = parser.parse_args()
    if args.torch_worker:
        torch_worker(json.loads(args.torch_worker))
        return 0

    names = [n.strip() for n in args.nets.split(",") if n.strip()]
    if args.profile_layers:
        names = [args.profile_layers]
    for name in names:
        if name not in NETS:
            parser.error("unknown net '%s' (choose from %s)"
                         % (name, ", ".join(NETS)))
    threads = parse_threads(args.threads)
    batches = parse_batches(args, names)
    if args.repeats < 1 or (args.iterations is not None and
                            args.iterations < 1):
        parser.error("--repeats and --iterations must be at least 1")
    if args.skip_poseidon and args.skip_pytorch:
        parser.error("--skip-poseidon and --skip-pytorch leave nothing to "
                     "time")
    args.poseidon_train = os.path.join(args.build, "tools", "poseidon_train")
    if (not args.skip_poseidon and not args.dry_run and
            not os.access(args.poseidon_train, os.X_OK)):
        raise SystemExit("%s not found: build it, point --build at the "
                         "build tree, or pass --skip-poseidon"
                         % args.poseidon_train)
    if args.base_build:
        if args.skip_poseidon or args.profile_layers:
            parser.error("--base-build compares two builds: not with "
                         "--skip-poseidon or --profile-layers")
        base = os.path.join(args.base_build, "tools", "poseidon_train")
        if not args.dry_run and not os.access(base, os.X_OK):
            raise SystemExit("%s not found (--base-build)" % base)
    if (not args.skip_pytorch and not args.dry_run and
            importlib.util.find_spec("torch") is None):
        raise SystemExit(TORCH_MISSING)

    load = os.getloadavg()[0]
    if load > 0.5 * (os.cpu_count() or 1):
        # OpenMP teams that lose their cores to other processes wait at
        # every barrier; small nets then slow down many times over.
        print("warning: load average %.2f on %d cores; other processes will "
              "skew the timings (multi-threaded ones most)"
              % (load, os.cpu_count()), file=sys.stderr)
    print("threads %s, MALLOC_MMAP_THRESHOLD_=%s, MALLOC_TRIM_THRESHOLD_=%s, "
          "OPENBLAS_CORETYPE=%s, %s; load average %.2f" % (
              ",".join(map(str, threads)), args.mmap_threshold,
              args.trim_threshold,
              os.environ.get("OPENBLAS_CORETYPE", "(unset)"),
              "one profiled run per side" if args.profile_layers else
              "%d runs per side, interleaved" % args.repeats, load),
          flush=True)

    with tempfile.TemporaryDirectory(prefix="poseidon_bench_") as tmp:
        workdir = args.net_dir or tmp
        os.makedirs(workdir, exist_ok=True)
        if args.profile_layers:
            name = args.profile_layers
            if args.dry_run:
                model = write_net(name, batches[name], workdir)
                print(" ".join(poseidon_command(
                    args, model, args.iterations or NETS[name][2],
                    os.path.join(workdir, name + ".profile"))))
                return 0
            report = profile_layers(args, name, batches[name], threads,
                                    workdir)
            if args.json:
                with open(args.json, "w") as handle:
                    json.dump({"profile": report}, handle, indent=2)
            return 0
        results = run_comparison(args, names, batches, threads, workdir)
    if results is None:
        return 0
    results, peaks = results
    print_tables(results, peaks, threads, args.repeats)
    if args.base_build:
        print_base_table(results, threads, args.base_build)
    torch_runs = [r for e in results for r in e["pytorch_runs"]]
    if torch_runs:
        print("PyTorch %s" % torch_runs[0]["torch"])
    if args.markdown:
        print_markdown(results, peaks, threads, args.repeats)
    if args.json:
        with open(args.json, "w") as handle:
            json.dump({"threads": threads,
                       "mmap_threshold": args.mmap_threshold,
                       "trim_threshold": args.trim_threshold,
                       "openblas_coretype":
                           os.environ.get("OPENBLAS_CORETYPE"),
                       "load_average": os.getloadavg(),
                       "base_build": args.base_build,
                       "peaks": {str(t): p for t, p in peaks.items()},
                       "results": results}, handle, indent=2)
    return 0


def run_comparison(args, names, batches, threads, workdir):
    """The interleaved runs; (results, peaks), or None after --dry-run."""
    plans = []
    for name in names:
        model = write_net(name, batches[name], workdir)
        iterations = args.iterations or NETS[name][2]
        warmup = args.warmup if args.warmup is not None else NETS[name][3]
        spec = {"model": model, "iterations": iterations, "warmup": warmup}
        if args.handwritten and name in ("lenet", "cifar10_quick",
                                         "alexnet"):
            spec["handwritten"] = name
        flops = net_cost.analyse_file(model)
        plans.append((name, model, iterations, spec,
                      flops["forward_flops"] + flops["backward_flops"]))
    if args.dry_run:
        for name, model, iterations, spec, flops in plans:
            print("%s batch %d, %.2f GFLOP per iteration:"
                  % (name, batches[name], flops / 1e9))
            for t in threads:
                print("  %d thread%s:" % (t, "" if t == 1 else "s"))
                if not args.skip_poseidon:
                    print("    " + " ".join(poseidon_command(args, model,
                                                             iterations)))
                if args.base_build:
                    print("    " + " ".join(poseidon_command(
                        args, model, iterations, build=args.base_build)))
                if not args.skip_pytorch:
                    command = torch_command(dict(spec, threads=t))
                    print("    " + " ".join(command[:3]) + " '" + command[3]
                          + "'")
        return None
    peaks = {} if args.no_peak else measure_peaks(args, threads)
    results = []
    for name, model, iterations, spec, flops in plans:
        entries = {t: {"net": name, "batch": batches[name], "threads": t,
                       "iterations": iterations, "flops": flops,
                       "poseidon_runs": [], "pytorch_runs": []}
                   for t in threads}
        if args.base_build:
            for entry in entries.values():
                entry["base_runs"] = []
        for repeat in range(args.repeats):
            for t in threads:
                env = child_env(args, t)
                entry = entries[t]
                started = time.time()
                if args.base_build:
                    output, rss = run_child(
                        poseidon_command(args, model, iterations,
                                         build=args.base_build), env,
                        "base poseidon_train time (%s)" % name)
                    entry["base_runs"].append(
                        dict(parse_poseidon(output), peak_rss_mib=rss))
                if not args.skip_poseidon:
                    output, rss = run_child(
                        poseidon_command(args, model, iterations), env,
                        "poseidon_train time (%s)" % name)
                    entry["poseidon_runs"].append(
                        dict(parse_poseidon(output), peak_rss_mib=rss))
                if not args.skip_pytorch:
                    output, rss = run_child(
                        torch_command(dict(spec, threads=t)), env,
                        "PyTorch worker (%s)" % name)
                    entry["pytorch_runs"].append(
                        dict(parse_torch(output), peak_rss_mib=rss))
                last = {side: entry[side + "_runs"][-1]["total_ms"]
                        if entry.get(side + "_runs") else None
                        for side in ("poseidon", "pytorch", "base")}
                print("  %s, %d thread%s, run %d/%d: %sposeidon %s ms, "
                      "pytorch %s ms (%.0f s)" % (
                          name, t, "" if t == 1 else "s", repeat + 1,
                          args.repeats,
                          "base %s ms, " % fmt(last["base"])
                          if args.base_build else "",
                          fmt(last["poseidon"]),
                          fmt(last["pytorch"]), time.time() - started),
                      flush=True)
        for t in threads:
            summarise(entries[t], flops, peaks.get(t, {}).get("gflops"))
            results.append(entries[t])
    return results, peaks


if __name__ == "__main__":
    sys.exit(main())
