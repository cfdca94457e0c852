#!/usr/bin/env python3
"""Times one net's layers in two builds of Poseidon, side by side.

Runs `<build>/tools/poseidon_train time --model=NET` of a base build and
of this one, alternating (base, this, base, ...) --repeats times so that
slow drifts of the machine hit both alike, and prints for every layer the
median over the runs of its forward and backward time in each build and
base / this (above 1: this build is faster). For a change that should
leave the speed alone (a refactor), or to see which layers a change
moved. Both builds run with the same thread count and glibc allocator
settings as bench_vs_pytorch.py's.

  scripts/bench/compare_builds.py --base-build ../before/build \\
      --model net.prototxt --threads 2 --repeats 7

--conv times one convolution alone instead of a net (the per-layer
figures of docs/performance.md): NxCxHxW:OUTPUTS then comma-separated
kK or kKHxKW (kernel), pP or pPHxPW (pad, default 0), sS (stride, default
1), gG (group, default 1). CIFAR-10 quick's conv2 at batch 100:

  scripts/bench/compare_builds.py --base-build ../before/build \\
      --conv 100x32x16x16:32,k5,p2 --threads 1
"""
import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import cpu_peak  # noqa: E402  (thread_env)

REPO_ROOT = os.path.dirname(os.path.dirname(HERE))
# "  conv1\tforward: 1.234 ms." as poseidon_train time prints it.
LAYER_RE = re.compile(r"\]\s+(\S+)\s+(forward|backward): ([0-9.eE+-]+) ms\.")
TOTAL_RE = re.compile(r"Average Forward-Backward: ([0-9.eE+-]+) ms\.")


def parse_layers(output):
    """{(layer, 'forward'|'backward'): ms} and the total, from one run."""
    times = {}
    order = []
    for name, direction, ms in LAYER_RE.findall(output):
        if name not in order:
            order.append(name)
        times[(name, direction)] = float(ms)
    totals = TOTAL_RE.findall(output)
    if not totals:
        raise SystemExit("no 'Average Forward-Backward' line in:\n"
                         + "\n".join(output.splitlines()[-20:]))
    return order, times, float(totals[-1])


CONV_RE = re.compile(r"^(\d+)x(\d+)x(\d+)x(\d+):(\d+)((?:,[kpsg][0-9x]+)*)$")


def conv_net(spec):
    """A one-convolution timing net from --conv's NxCxHxW:OUT,k..,p..,s..,g.."""
    match = CONV_RE.match(spec.replace(" ", ""))
    if not match:
        raise ValueError("--conv %r: expected NxCxHxW:OUTPUTS followed by "
                         ",kK[xK] ,pP[xP] ,sS ,gG (e.g. 100x32x16x16:32,k5,p2)"
                         % spec)
    num, channels, height, width, outputs = map(int, match.groups()[:5])
    fields = {"k": None, "p": "0", "s": "1", "g": "1"}
    for item in match.group(6).split(",")[1:]:
        fields[item[0]] = item[1:]
    if fields["k"] is None:
        raise ValueError("--conv %r: no kernel (kK or kKHxKW)" % spec)

    def pair(name, text):
        parts = text.split("x")
        if len(parts) not in (1, 2) or not all(p.isdigit() for p in parts):
            raise ValueError("--conv %r: bad %s %r" % (spec, name, text))
        return (int(parts[0]), int(parts[-1]))

    kernel_h, kernel_w = pair("kernel", fields["k"])
    pad_h, pad_w = pair("pad", fields["p"])
    stride, group = int(fields["s"]), int(fields["g"])
    if min(num, channels, height, width, outputs, kernel_h, kernel_w,
           stride, group) < 1 or channels % group or outputs % group:
        raise ValueError("--conv %r: sizes must be positive and the group "
                         "must divide channels and outputs" % spec)
    return """name: "conv"
force_backward: true
layer { name: "data" type: "Input" top: "data"
  input_param { shape { dim: %d dim: %d dim: %d dim: %d } } }
layer { name: "conv" type: "Convolution" bottom: "data" top: "conv"
  convolution_param { num_output: %d kernel_h: %d kernel_w: %d
    pad_h: %d pad_w: %d stride: %d group: %d
    weight_filler { type: "gaussian" std: 0.01 } } }
""" % (num, channels, height, width, outputs, kernel_h, kernel_w, pad_h,
       pad_w, stride, group)


def run(build, args, env):
    command = [os.path.join(build, "tools", "poseidon_train"), "time",
               "--model=" + args.model, "--iterations=%d" % args.iterations]
    process = subprocess.run(command, env=env, stdout=subprocess.PIPE,
                             stderr=subprocess.STDOUT,
                             universal_newlines=True)
    if process.returncode != 0:
        raise SystemExit("%s failed (exit %d):\n%s" % (
            " ".join(command), process.returncode,
            "\n".join(process.stdout.splitlines()[-20:])))
    return parse_layers(process.stdout)


def medians(runs):
    """Per key, the median over the runs that have it."""
    keys = {k for r in runs for k in r}
    return {k: statistics.median(r[k] for r in runs if k in r) for k in keys}


def ratio(base, now):
    return base / now if base and now else None


def fmt(value, digits=3):
    return "-" if value is None else "%.*f" % (digits, value)


def main(argv=None):
    parser = argparse.ArgumentParser(
        description=__doc__.splitlines()[0],
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog=__doc__.split("\n", 2)[2])
    what = parser.add_mutually_exclusive_group(required=True)
    what.add_argument("--model", help="net prototxt")
    what.add_argument("--conv", metavar="NxCxHxW:OUT,kK,pP,sS,gG",
                      help="one convolution instead of a net (see below)")
    parser.add_argument("--base-build", required=True,
                        help="the build to compare with (holds "
                        "tools/poseidon_train)")
    parser.add_argument("--build", default=os.path.join(REPO_ROOT, "build"),
                        help="this build (default: %(default)s)")
    parser.add_argument("--iterations", type=int, default=10)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--threads", type=int, default=os.cpu_count())
    parser.add_argument("--mmap-threshold", type=int, default=10 ** 10)
    parser.add_argument("--trim-threshold", type=int, default=10 ** 10)
    args = parser.parse_args(argv)
    if args.repeats < 1 or args.iterations < 1 or args.threads < 1:
        parser.error("--repeats, --iterations and --threads must be at "
                     "least 1")
    if args.conv:
        try:
            text = conv_net(args.conv)
        except ValueError as error:
            parser.error(str(error))
        handle = tempfile.NamedTemporaryFile(
            "w", prefix="conv_", suffix=".prototxt", delete=False)
        with handle:
            handle.write(text)
        args.model = handle.name
        try:
            return compare(args)
        finally:
            os.unlink(handle.name)
    return compare(args)


def compare(args):
    env = cpu_peak.thread_env(os.environ, args.threads)
    env["MALLOC_MMAP_THRESHOLD_"] = str(args.mmap_threshold)
    env["MALLOC_TRIM_THRESHOLD_"] = str(args.trim_threshold)
    print("%s: %d iterations, %d threads, %d runs per build, interleaved; "
          "OPENBLAS_CORETYPE=%s" % (
              args.conv or args.model, args.iterations, args.threads, args.repeats,
              os.environ.get("OPENBLAS_CORETYPE", "(unset)")), flush=True)
    runs = {"base": [], "now": []}
    totals = {"base": [], "now": []}
    order = []
    for repeat in range(args.repeats):
        for side, build in (("base", args.base_build), ("now", args.build)):
            layers, times, total = run(build, args, env)
            order = order or layers
            runs[side].append(times)
            totals[side].append(total)
        print("  run %d/%d: base %.2f ms, this %.2f ms" % (
            repeat + 1, args.repeats, totals["base"][-1],
            totals["now"][-1]), flush=True)
    base, now = medians(runs["base"]), medians(runs["now"])
    print("%-24s %-8s %10s %10s %9s" % ("layer", "pass", "base ms",
                                        "this ms", "base/this"))
    for name in order:
        for direction in ("forward", "backward"):
            key = (name, direction)
            print("%-24s %-8s %10s %10s %9s" % (
                name, direction, fmt(base.get(key)), fmt(now.get(key)),
                fmt(ratio(base.get(key), now.get(key)))))
    b, n = statistics.median(totals["base"]), statistics.median(totals["now"])
    print("%-24s %-8s %10.3f %10.3f %9s" % ("total", "fwd+bwd", b, n,
                                            fmt(ratio(b, n))))
    print("(medians of %d runs; base/this > 1: this build is faster)"
          % args.repeats)
    return 0


if __name__ == "__main__":
    sys.exit(main())
