#!/usr/bin/env python3
"""Times training iterations of Poseidon against PyTorch on the same nets.

For LeNet (batch 64, 1x28x28), CIFAR-10 quick (batch 100, 3x32x32) and
AlexNet (batch 16 by default, 3x227x227) it measures one forward + backward
pass (no solver update) on the CPU:

  Poseidon  `<build>/tools/poseidon_train time --model=NET --iterations=N`
            on scripts/bench/nets/<net>_time.prototxt, parsing its
            "Average Forward-Backward: X ms." line;
  PyTorch   the same layers (Caffe's ceil-rounded pooling via ceil_mode,
            LRN via LocalResponseNorm, AlexNet's two groups), timed the same
            way after a warm-up, in a fresh Python process.

Each side runs --repeats times, alternating (Poseidon, PyTorch, Poseidon,
...) so that slow drifts of the machine hit both alike, and each side's
figure is the median over its runs of the mean time per iteration. The ratio
is PyTorch / Poseidon: above 1 means Poseidon is faster.

Both sides run with the same thread count (--threads, default: all cores)
and with glibc's allocator pinned: MALLOC_MMAP_THRESHOLD_ (--mmap-threshold)
and MALLOC_TRIM_THRESHOLD_ (--trim-threshold). Left to itself glibc moves
its mmap threshold as large blocks are freed, so whether a big activation
buffer comes from mmap (and is page-faulted anew on every iteration) depends
on the allocation history. Pinning the mmap threshold high serves every
buffer from the heap; but setting it also freezes the trim threshold at
128 KiB, so freed buffers at the top of the heap would still be handed back
to the kernel and faulted in again next iteration: hence both are pinned.
(PyTorch's AlexNet at batch 16: ~57,000 minor page faults per iteration with
neither, ~52,000 with the mmap threshold alone, ~4,800 with both.) The
variables are read when a process starts, so every timed process is a child
started with them set.

Examples:
  scripts/bench/bench_vs_pytorch.py --build build
  scripts/bench/bench_vs_pytorch.py --skip-poseidon --nets lenet,alexnet
  scripts/bench/bench_vs_pytorch.py --dry-run
"""

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO_ROOT = os.path.dirname(os.path.dirname(HERE))
NET_DIR = os.path.join(HERE, "nets")

# name: (image shape, default batch, default iterations per run)
NETS = {
    "lenet": ((1, 28, 28), 64, 50),
    "cifar10_quick": ((3, 32, 32), 100, 50),
    "alexnet": ((3, 227, 227), 16, 10),
}
DEFAULT_NETS = ("lenet", "cifar10_quick", "alexnet")

# Above any single allocation of these nets, so that glibc serves every
# buffer from its heap and keeps freed memory for reuse. Values above 32 MiB
# are honoured when given through the environment (checked on glibc 2.36);
# older glibc caps mallopt() at 32 MiB on 64-bit systems.
DEFAULT_MMAP_THRESHOLD = 10000000000
DEFAULT_TRIM_THRESHOLD = 10000000000

TOTAL_RE = re.compile(r"Average Forward-Backward:\s*([0-9.eE+-]+)\s*ms")
FORWARD_RE = re.compile(r"Average Forward pass:\s*([0-9.eE+-]+)\s*ms")
BACKWARD_RE = re.compile(r"Average Backward pass:\s*([0-9.eE+-]+)\s*ms")
SHAPE_RE = re.compile(r"(shape\s*\{\s*dim\s*:\s*)(\d+)")


# ---------------------------------------------------------------------------
# PyTorch side. Runs in a child process (see torch_worker).


def build_torch_net(name):
    import torch.nn as nn

    if name == "lenet":
        return nn.Sequential(
            nn.Conv2d(1, 20, 5),
            nn.MaxPool2d(2, 2, ceil_mode=True),
            nn.Conv2d(20, 50, 5),
            nn.MaxPool2d(2, 2, ceil_mode=True),
            nn.Flatten(),
            nn.Linear(50 * 4 * 4, 500),
            nn.ReLU(inplace=True),
            nn.Linear(500, 10),
        )
    if name == "cifar10_quick":
        return nn.Sequential(
            nn.Conv2d(3, 32, 5, padding=2),
            nn.MaxPool2d(3, 2, ceil_mode=True),
            nn.ReLU(inplace=True),
            nn.Conv2d(32, 32, 5, padding=2),
            nn.ReLU(inplace=True),
            nn.AvgPool2d(3, 2, ceil_mode=True),
            nn.Conv2d(32, 64, 5, padding=2),
            nn.ReLU(inplace=True),
            nn.AvgPool2d(3, 2, ceil_mode=True),
            nn.Flatten(),
            nn.Linear(64 * 4 * 4, 64),
            nn.Linear(64, 10),
        )
    if name == "alexnet":
        # Caffe's LRN divides alpha by local_size, as LocalResponseNorm does.
        def lrn():
            return nn.LocalResponseNorm(5, alpha=1e-4, beta=0.75, k=1.0)

        return nn.Sequential(
            nn.Conv2d(3, 96, 11, stride=4),
            nn.ReLU(inplace=True),
            lrn(),
            nn.MaxPool2d(3, 2, ceil_mode=True),
            nn.Conv2d(96, 256, 5, padding=2, groups=2),
            nn.ReLU(inplace=True),
            lrn(),
            nn.MaxPool2d(3, 2, ceil_mode=True),
            nn.Conv2d(256, 384, 3, padding=1),
            nn.ReLU(inplace=True),
            nn.Conv2d(384, 384, 3, padding=1, groups=2),
            nn.ReLU(inplace=True),
            nn.Conv2d(384, 256, 3, padding=1, groups=2),
            nn.ReLU(inplace=True),
            nn.MaxPool2d(3, 2, ceil_mode=True),
            nn.Flatten(),
            nn.Linear(256 * 6 * 6, 4096),
            nn.ReLU(inplace=True),
            nn.Dropout(0.5),
            nn.Linear(4096, 4096),
            nn.ReLU(inplace=True),
            nn.Dropout(0.5),
            nn.Linear(4096, 1000),
        )
    raise ValueError("no PyTorch definition for net '%s'" % name)


def torch_worker(spec):
    """Times spec["iterations"] forward+backward passes; prints JSON."""
    import torch
    import torch.nn.functional as F

    torch.set_num_threads(spec["threads"])
    torch.manual_seed(0)
    model = build_torch_net(spec["net"])
    model.train()  # as `poseidon_train time`: TRAIN phase, dropout active
    batch = spec["batch"]
    data = torch.randn(batch, *spec["shape"])
    labels = torch.zeros(batch, dtype=torch.long)

    def step():
        start = time.perf_counter()
        loss = F.cross_entropy(model(data), labels)
        middle = time.perf_counter()
        # Parameter gradients accumulate across iterations and are never
        # applied, as in `poseidon_train time`.
        loss.backward()
        return middle - start, time.perf_counter() - middle

    for _ in range(spec["warmup"]):
        step()
    forward = backward = 0.0
    for _ in range(spec["iterations"]):
        f, b = step()
        forward += f
        backward += b
    n = spec["iterations"]
    print(
        "RESULT "
        + json.dumps(
            {
                "forward_ms": 1e3 * forward / n,
                "backward_ms": 1e3 * backward / n,
                "total_ms": 1e3 * (forward + backward) / n,
                "torch": torch.__version__,
                "threads": torch.get_num_threads(),
                "mmap_threshold": os.environ.get("MALLOC_MMAP_THRESHOLD_"),
                "trim_threshold": os.environ.get("MALLOC_TRIM_THRESHOLD_"),
            }
        )
    )


# ---------------------------------------------------------------------------
# Driver.


def child_env(args):
    env = dict(os.environ)
    threads = str(args.threads)
    env.update(
        {
            "MALLOC_MMAP_THRESHOLD_": str(args.mmap_threshold),
            "MALLOC_TRIM_THRESHOLD_": str(args.trim_threshold),
            "OMP_NUM_THREADS": threads,
            "OPENBLAS_NUM_THREADS": threads,
            "POSEIDON_NUM_THREADS": threads,
            "MKL_NUM_THREADS": threads,
        }
    )
    return env


def write_net(name, batch, workdir):
    """Copies the timing net with its batch dimension set to `batch`."""
    with open(os.path.join(NET_DIR, name + "_time.prototxt")) as handle:
        text = handle.read()
    text, count = SHAPE_RE.subn(lambda m: m.group(1) + str(batch), text)
    if count == 0:
        raise SystemExit(
            "%s_time.prototxt: no shape to set the batch of" % name
        )
    path = os.path.join(workdir, "%s_b%d.prototxt" % (name, batch))
    with open(path, "w") as handle:
        handle.write(text)
    return path


def poseidon_command(args, model, iterations):
    return [
        os.path.join(args.build, "tools", "poseidon_train"),
        "time",
        "--model=" + model,
        "--iterations=%d" % iterations,
    ] + args.poseidon_arg


def torch_command(spec):
    return [
        sys.executable,
        os.path.abspath(__file__),
        "--torch-worker",
        json.dumps(spec),
    ]


def run(command, env, what):
    process = subprocess.run(
        command,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        universal_newlines=True,
    )
    if process.returncode != 0:
        tail = "\n".join(process.stdout.splitlines()[-20:])
        raise SystemExit(
            "%s failed (exit %d):\n%s" % (what, process.returncode, tail)
        )
    return process.stdout


def parse_poseidon(output):
    """Reads the averages that `poseidon_train time` prints (Caffe's form)."""
    totals = TOTAL_RE.findall(output)
    if not totals:
        tail = "\n".join(output.splitlines()[-20:])
        raise SystemExit(
            "no 'Average Forward-Backward: X ms.' line in the "
            "output of poseidon_train time:\n" + tail
        )
    result = {"total_ms": float(totals[-1])}
    for key, pattern in (
        ("forward_ms", FORWARD_RE),
        ("backward_ms", BACKWARD_RE),
    ):
        found = pattern.findall(output)
        if found:
            result[key] = float(found[-1])
    return result


def parse_torch(output):
    for line in output.splitlines():
        if line.startswith("RESULT "):
            return json.loads(line[len("RESULT ") :])
    raise SystemExit("the PyTorch worker printed no result:\n" + output)


def fmt(value, digits=2):
    return "-" if value is None else "%.*f" % (digits, value)


def median_of(runs, key):
    values = [r[key] for r in runs if key in r]
    return statistics.median(values) if values else None


def main():
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n")[0],
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog=__doc__.split("\n", 2)[2],
    )
    parser.add_argument(
        "--build",
        default=os.path.join(REPO_ROOT, "build"),
        help="build tree holding tools/poseidon_train "
        "(default: %(default)s)",
    )
    parser.add_argument(
        "--nets",
        default=",".join(DEFAULT_NETS),
        help="comma-separated subset of %s" % ", ".join(DEFAULT_NETS),
    )
    parser.add_argument(
        "--alexnet-batch",
        type=int,
        default=16,
        help="AlexNet batch size (default: %(default)s)",
    )
    parser.add_argument(
        "--iterations",
        type=int,
        default=None,
        help="timed iterations per run (default: per net, "
        + ", ".join("%s %d" % (n, v[2]) for n, v in NETS.items())
        + ")",
    )
    parser.add_argument(
        "--warmup",
        type=int,
        default=2,
        help="untimed PyTorch iterations before timing",
    )
    parser.add_argument(
        "--repeats",
        type=int,
        default=5,
        help="runs of each side; medians are reported",
    )
    parser.add_argument(
        "--threads",
        type=int,
        default=os.cpu_count(),
        help="threads for both sides (default: %(default)s)",
    )
    parser.add_argument(
        "--mmap-threshold",
        type=int,
        default=DEFAULT_MMAP_THRESHOLD,
        help="MALLOC_MMAP_THRESHOLD_ for the timed "
        "processes (default: %(default)s)",
    )
    parser.add_argument(
        "--trim-threshold",
        type=int,
        default=DEFAULT_TRIM_THRESHOLD,
        help="MALLOC_TRIM_THRESHOLD_ for the timed processes "
        "(default: %(default)s)",
    )
    parser.add_argument(
        "--poseidon-arg",
        action="append",
        default=[],
        help="extra argument for poseidon_train, written "
        "--poseidon-arg=--flag=value (repeatable)",
    )
    parser.add_argument(
        "--skip-poseidon", action="store_true", help="time PyTorch only"
    )
    parser.add_argument(
        "--skip-pytorch", action="store_true", help="time Poseidon only"
    )
    parser.add_argument(
        "--dry-run",
        action="store_true",
        help="print the commands, run nothing",
    )
    parser.add_argument("--json", help="also write all measurements here")
    parser.add_argument(
        "--net-dir",
        help="write the batch-adjusted timing nets here and keep them "
        "(default: a temporary directory, removed at the end)",
    )
    parser.add_argument("--torch-worker", help=argparse.SUPPRESS)
    args = parser.parse_args()

    if args.torch_worker:
        torch_worker(json.loads(args.torch_worker))
        return 0

    names = [n.strip() for n in args.nets.split(",") if n.strip()]
    for name in names:
        if name not in NETS:
            parser.error(
                "unknown net '%s' (choose from %s)" % (name, ", ".join(NETS))
            )
    if args.repeats < 1 or args.threads < 1:
        parser.error("--repeats and --threads must be at least 1")
    poseidon_bin = os.path.join(args.build, "tools", "poseidon_train")
    if (
        not args.skip_poseidon
        and not args.dry_run
        and not os.access(poseidon_bin, os.X_OK)
    ):
        raise SystemExit(
            "%s not found: build it, point --build at the build "
            "tree, or pass --skip-poseidon" % poseidon_bin
        )

    env = child_env(args)
    load = os.getloadavg()[0]
    if load > 0.5 * (os.cpu_count() or 1):
        # OpenMP teams that lose their cores to other processes wait at
        # every barrier; small nets then slow down many times over.
        print(
            "warning: load average %.2f on %d cores; other processes will "
            "skew the timings (multi-threaded ones most)"
            % (load, os.cpu_count()),
            file=sys.stderr,
        )
    print(
        "threads %d, MALLOC_MMAP_THRESHOLD_=%s, MALLOC_TRIM_THRESHOLD_=%s, "
        "%d runs per side, interleaved; load average %.2f"
        % (
            args.threads,
            args.mmap_threshold,
            args.trim_threshold,
            args.repeats,
            os.getloadavg()[0],
        )
    )
    results = []
    with tempfile.TemporaryDirectory(prefix="poseidon_bench_") as tmp:
        workdir = args.net_dir or tmp
        os.makedirs(workdir, exist_ok=True)
        for name in names:
            shape, batch, iterations = NETS[name]
            if name == "alexnet":
                batch = args.alexnet_batch
            iterations = args.iterations or iterations
            model = write_net(name, batch, workdir)
            p_cmd = poseidon_command(args, model, iterations)
            t_cmd = torch_command(
                {
                    "net": name,
                    "batch": batch,
                    "shape": list(shape),
                    "iterations": iterations,
                    "warmup": args.warmup,
                    "threads": args.threads,
                }
            )
            if args.dry_run:
                print("%s batch %d:" % (name, batch))
                if not args.skip_poseidon:
                    print("  " + " ".join(p_cmd))
                if not args.skip_pytorch:
                    print("  " + " ".join(t_cmd[:3]) + " '" + t_cmd[3] + "'")
                continue
            poseidon_runs, torch_runs = [], []
            for repeat in range(args.repeats):
                if not args.skip_poseidon:
                    poseidon_runs.append(
                        parse_poseidon(
                            run(p_cmd, env, "poseidon_train time (%s)" % name)
                        )
                    )
                if not args.skip_pytorch:
                    torch_runs.append(
                        parse_torch(
                            run(t_cmd, env, "PyTorch worker (%s)" % name)
                        )
                    )
                last_p = (
                    poseidon_runs[-1]["total_ms"] if poseidon_runs else None
                )
                last_t = torch_runs[-1]["total_ms"] if torch_runs else None
                print(
                    "  %s run %d/%d: poseidon %s ms, pytorch %s ms"
                    % (
                        name,
                        repeat + 1,
                        args.repeats,
                        fmt(last_p),
                        fmt(last_t),
                    ),
                    flush=True,
                )
            results.append(
                {
                    "net": name,
                    "batch": batch,
                    "iterations": iterations,
                    "poseidon": poseidon_runs,
                    "pytorch": torch_runs,
                    "poseidon_ms": median_of(poseidon_runs, "total_ms"),
                    "pytorch_ms": median_of(torch_runs, "total_ms"),
                }
            )
    if args.dry_run:
        return 0

    print()
    print(
        "%-14s %6s %13s %12s %7s   %s"
        % (
            "net",
            "batch",
            "poseidon ms",
            "pytorch ms",
            "ratio",
            "fwd/bwd ms: poseidon | pytorch",
        )
    )
    for r in results:
        ratio = (
            r["pytorch_ms"] / r["poseidon_ms"]
            if r["pytorch_ms"] and r["poseidon_ms"]
            else None
        )
        print(
            "%-14s %6d %13s %12s %7s   %s/%s | %s/%s"
            % (
                r["net"],
                r["batch"],
                fmt(r["poseidon_ms"]),
                fmt(r["pytorch_ms"]),
                fmt(ratio),
                fmt(median_of(r["poseidon"], "forward_ms")),
                fmt(median_of(r["poseidon"], "backward_ms")),
                fmt(median_of(r["pytorch"], "forward_ms")),
                fmt(median_of(r["pytorch"], "backward_ms")),
            )
        )
    print(
        "(median of %d runs per side; ms per forward+backward iteration; "
        "ratio = pytorch / poseidon, > 1: Poseidon faster)" % args.repeats
    )
    if results and results[0]["pytorch"]:
        print("PyTorch %s" % results[0]["pytorch"][0]["torch"])
    if args.json:
        with open(args.json, "w") as handle:
            json.dump(
                {
                    "threads": args.threads,
                    "mmap_threshold": args.mmap_threshold,
                    "trim_threshold": args.trim_threshold,
                    "load_average": os.getloadavg(),
                    "results": results,
                },
                handle,
                indent=2,
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
