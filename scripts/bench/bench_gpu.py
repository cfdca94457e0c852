#!/usr/bin/env python3
"""One training iteration on the GPU: Poseidon against PyTorch eager.

For AlexNet (batch 256), ResNet-50, VGG-16 and GoogLeNet (batch 64) it
measures images per second of full training iterations (forward, backward
and the SGD update with momentum and weight decay) on the same GPU:

  Poseidon  `poseidon_train train --gpu=0` on scripts/bench/nets/<net>_time
            .prototxt (data from an Input layer, so no data loading is timed)
            with a generated solver; the time per iteration is taken from
            the log's timestamps of the display lines of iterations W and
            W + N (display: 1; max_iter W + N + 1, as the last iteration's
            line is printed differently).
  PyTorch   the same layers (scripts/bench/caffe_net.py builds them from the
            same prototxt), torch.optim.SGD with the same settings, input
            tensors already on the GPU, torch.backends.cudnn.benchmark on (its
            best setting, as Poseidon searches cuDNN's algorithms too),
            timed over the same N iterations after W warm-up ones with the
            GPU synchronised at both ends.

Both sides read the loss back to the host every iteration (Poseidon's solver
does; PyTorch calls loss.item()), compute in FP32, and have TF32 off unless
--tf32 turns it on for both (Poseidon: --allow_tf32; PyTorch:
torch.backends.cuda.matmul.allow_tf32 and torch.backends.cudnn.allow_tf32).
Each side runs --repeats times, alternating, in fresh processes; the figures
are medians. Peak GPU memory: PyTorch's torch.cuda.max_memory_reserved() and
Poseidon's "peak reserved" from its caching allocator (logged at the end of
training), both what the framework held from the driver.

  scripts/bench/bench_gpu.py --poseidon-train build-cuda/tools/poseidon_train
  scripts/bench/bench_gpu.py --nets alexnet --repeats 5 --tf32
"""

import argparse
import datetime
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import caffe_net  # noqa: E402
import timing_nets  # noqa: E402

NETS = {"alexnet": 256, "resnet50": 64, "vgg16": 64, "googlenet": 64}
SHAPE_RE = re.compile(r"(shape\s*\{\s*dim\s*:\s*)(\d+)")
# glog's prefix: I[yyyy]mmdd hh:mm:ss.uuuuuu (the year since glog 0.6).
ITER_RE = re.compile(
    r"^I(\d{8}|\d{4}) (\d\d:\d\d:\d\d\.\d+).*\] Iteration (\d+) \(.*\), loss")
PEAK_RE = re.compile(r"GPU memory: peak ([0-9.]+) MiB in use, ([0-9.]+) MiB reserved")


def net_with_batch(name, batch, out_dir):
    src = timing_nets.path(name)
    with open(src) as f:
        text = f.read()
    # The first dim of every shape (Input data and DummyData labels) is the
    # batch.
    text = SHAPE_RE.sub(lambda m: m.group(1) + str(batch), text)
    path = os.path.join(out_dir, "%s_b%d.prototxt" % (name, batch))
    with open(path, "w") as f:
        f.write(text)
    return path


def log_time(stamp_day, stamp_time):
    day_format = "%Y%m%d" if len(stamp_day) == 8 else "%m%d"
    return datetime.datetime.strptime(stamp_day + " " + stamp_time,
                                      day_format + " %H:%M:%S.%f").timestamp()


def run_poseidon(args, net_path, batch):
    with tempfile.TemporaryDirectory() as tmp:
        solver = os.path.join(tmp, "solver.prototxt")
        with open(solver, "w") as f:
            f.write('net: "%s"\nbase_lr: 0.0001\nlr_policy: "fixed"\n'
                    'momentum: 0.9\nweight_decay: 0.0005\ndisplay: 1\n'
                    'max_iter: %d\nsnapshot_after_train: false\n'
                    'random_seed: 1\n' % (net_path, args.warmup + args.iters + 1))
        cmd = [args.poseidon_train, "train", "--solver=" + solver, "--gpu=0"]
        if args.tf32:
            cmd.append("--allow_tf32")
        proc = subprocess.run(cmd, capture_output=True, text=True)
        log = proc.stdout + proc.stderr
        if proc.returncode != 0:
            raise RuntimeError("poseidon_train failed:\n" + log[-3000:])
    stamps = {}
    for line in log.splitlines():
        m = ITER_RE.match(line)
        if m:
            stamps[int(m.group(3))] = log_time(m.group(1), m.group(2))
    a, b = args.warmup, args.warmup + args.iters
    if a not in stamps or b not in stamps:
        raise RuntimeError("iterations %d and %d not both in the log" % (a, b))
    seconds = (stamps[b] - stamps[a]) / args.iters
    peak = PEAK_RE.search(log)
    return batch / seconds, float(peak.group(2)) if peak else float("nan")


TORCH_CHILD = r"""
import json, sys, time
sys.path.insert(0, sys.argv[1])
import torch, caffe_net
net_path, warmup, iters, tf32 = sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), sys.argv[5] == "1"
torch.backends.cudnn.benchmark = True
torch.backends.cuda.matmul.allow_tf32 = tf32
torch.backends.cudnn.allow_tf32 = tf32
net_def = caffe_net.read_prototxt(net_path)
shapes = caffe_net.input_shapes(net_def)
model = caffe_net.build_torch_net(net_def).cuda().train()
blobs = {}
for name, shape in shapes.items():
    blobs[name] = (torch.zeros(shape, device="cuda") if len(shape) == 1
                   else torch.randn(shape, device="cuda"))
model(blobs)  # materialises LazyLinear
opt = torch.optim.SGD(model.parameters(), lr=0.0001, momentum=0.9, weight_decay=0.0005)
def step():
    opt.zero_grad(set_to_none=False)
    loss = model(blobs)
    loss.backward()
    opt.step()
    return loss.item()
for _ in range(warmup):
    step()
torch.cuda.synchronize()
t0 = time.perf_counter()
for _ in range(iters):
    step()
torch.cuda.synchronize()
seconds = (time.perf_counter() - t0) / iters
batch = next(s[0] for s in shapes.values())
print(json.dumps({"images_per_s": batch / seconds,
                  "peak_reserved_mib": torch.cuda.max_memory_reserved() / 2**20,
                  "peak_allocated_mib": torch.cuda.max_memory_allocated() / 2**20}))
"""


def run_torch(args, net_path):
    proc = subprocess.run(
        [sys.executable, "-c", TORCH_CHILD, HERE, net_path, str(args.warmup),
         str(args.iters), "1" if args.tf32 else "0"],
        capture_output=True, text=True)
    if proc.returncode != 0:
        raise RuntimeError("PyTorch run failed:\n" + proc.stderr[-3000:])
    r = json.loads(proc.stdout.strip().splitlines()[-1])
    return r["images_per_s"], r["peak_reserved_mib"]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--poseidon-train", default="build-cuda/tools/poseidon_train")
    ap.add_argument("--nets", default=",".join(NETS))
    ap.add_argument("--batch", type=int, default=0,
                    help="override every net's batch size")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--warmup", type=int, default=10)
    ap.add_argument("--iters", type=int, default=30)
    ap.add_argument("--tf32", action="store_true")
    ap.add_argument("--skip-torch", action="store_true")
    ap.add_argument("--json", help="also write the results here")
    args = ap.parse_args()

    results = []
    with tempfile.TemporaryDirectory() as tmp:
        for name in args.nets.split(","):
            batch = args.batch or NETS[name]
            path = net_with_batch(name, batch, tmp)
            ours, theirs, ours_mem, theirs_mem = [], [], [], []
            for r in range(args.repeats):
                try:
                    ips, mem = run_poseidon(args, path, batch)
                    ours.append(ips)
                    ours_mem.append(mem)
                except RuntimeError as e:
                    print("%s: Poseidon: %s" % (name, e), file=sys.stderr)
                if not args.skip_torch:
                    try:
                        ips, mem = run_torch(args, path)
                        theirs.append(ips)
                        theirs_mem.append(mem)
                    except RuntimeError as e:
                        print("%s: PyTorch: %s" % (name, e), file=sys.stderr)
                print("  %s repeat %d: Poseidon %s img/s, PyTorch %s img/s" % (
                    name, r + 1, "%.1f" % ours[-1] if ours else "-",
                    "%.1f" % theirs[-1] if theirs else "-"), flush=True)
            row = {"net": name, "batch": batch,
                   "poseidon_images_per_s": statistics.median(ours) if ours else None,
                   "torch_images_per_s": statistics.median(theirs) if theirs else None,
                   "poseidon_peak_mib": max(ours_mem) if ours_mem else None,
                   "torch_peak_mib": max(theirs_mem) if theirs_mem else None,
                   "poseidon_runs": ours, "torch_runs": theirs}
            if ours and theirs:
                row["ratio"] = row["poseidon_images_per_s"] / row["torch_images_per_s"]
            results.append(row)

    print("\nTraining throughput, FP32, TF32 %s on both sides; medians of %d "
          "runs of %d iterations (after %d warm-up)" % (
              "on" if args.tf32 else "off", args.repeats, args.iters, args.warmup))
    print("| net | batch | Poseidon img/s | PyTorch img/s | Poseidon / PyTorch "
          "| peak MiB Poseidon | peak MiB PyTorch |")
    print("|---|---|---|---|---|---|---|")
    fmt = lambda v, f="%.1f": f % v if v is not None else "-"
    for r in results:
        print("| %s | %d | %s | %s | %s | %s | %s |" % (
            r["net"], r["batch"], fmt(r["poseidon_images_per_s"]),
            fmt(r["torch_images_per_s"]), fmt(r.get("ratio"), "%.2f"),
            fmt(r["poseidon_peak_mib"], "%.0f"), fmt(r["torch_peak_mib"], "%.0f")))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1)
    return 0 if all(r["poseidon_images_per_s"] for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
