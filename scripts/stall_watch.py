#!/usr/bin/env python3
"""Runs one case of scripts/fault_matrix.py again and again, optionally with
CPU hogs beside it, and takes every rank's thread stacks with gdb when the
job's log goes quiet: the harness that caught the freeze of
docs/reliability.md ("An intermittent freeze").

Each run's fault_matrix output, log and, when taken, stacks_<rank>.txt go to
OUT/run_<k>/. Stacks show the moment gdb got to run, which need not be the
moment of the silence: in the freeze this harness chased, the waiting ranks'
pollers held both cores and gdb ran only when the job was ending (the
docs tell how it was found). A run counts as a freeze when its job ended with an error
instead of training on ("ended instead of surviving") or failed. The ranks'
SIGTERM lines name every wait under way (POSEIDON_WAIT_NOTES=all is set).

Needs what fault_matrix.py needs (root, network namespaces, mpirun) and gdb
for the stacks.

Example (as root, from the repository root):
  scripts/stall_watch.py --build build --runs 30 --hogs 2 --out /tmp/watch
"""

import argparse
import os
import re
import shutil
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))


def rank_of(pid):
    try:
        with open("/proc/%s/environ" % pid, "rb") as f:
            env = f.read().decode(errors="replace")
    except OSError:
        return None
    m = re.search(r"OMPI_COMM_WORLD_RANK=(\d+)", env)
    return m.group(1) if m else None


def take_stacks(out, hogs):
    """gdb on every rank at once, the hogs paused meanwhile; symbols only for
    the libraries that matter (gdb reads the rest too slowly under load)."""
    for h in hogs:
        h.send_signal(19)  # SIGSTOP
    gdbs = []
    pids = subprocess.run(["pgrep", "-x", "poseidon_train"],
                          capture_output=True, text=True).stdout.split()
    for pid in pids:
        rank = rank_of(pid)
        if rank is None:
            continue
        f = open(os.path.join(out, "stacks_%s.txt" % rank), "w")
        cmd = ["timeout", "60", "gdb", "-batch", "-iex",
               "set auto-solib-add off", "-p", pid]
        for lib in ("poseidon", "libmpi", "open-pal", "open-rte", "pmix",
                    "mca_", "libc.so"):
            cmd += ["-ex", "sharedlibrary " + lib]
        cmd += ["-ex", "thread apply all bt 16"]
        gdbs.append(subprocess.Popen(cmd, stdout=f, stderr=subprocess.STDOUT))
    for g in gdbs:
        g.wait()
    for h in hogs:
        h.send_signal(18)  # SIGCONT


def main():
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--build", default="build")
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--fault", default="flap")
    ap.add_argument("--hogs", type=int, default=2,
                    help="busy loops beside the job (the freeze needs load)")
    ap.add_argument("--silence", type=float, default=10,
                    help="seconds without a log line before the stacks are "
                    "taken (longer than the fault's own quiet spell)")
    ap.add_argument("--out", required=True)
    ap.add_argument("matrix_args", nargs="*",
                    help="more fault_matrix.py arguments (after --)")
    a = ap.parse_args()
    if shutil.which("gdb") is None:
        print("stall_watch: gdb not found; no stacks will be taken",
              file=sys.stderr)
    env = dict(os.environ, POSEIDON_WAIT_NOTES="all")
    hogs = [subprocess.Popen(["sh", "-c", "while :; do :; done"])
            for _ in range(a.hogs)]
    freezes = 0
    try:
        for k in range(1, a.runs + 1):
            out = os.path.join(a.out, "run_%d" % k)
            os.makedirs(out, exist_ok=True)
            log = os.path.join(out, a.fault + ".log")
            with open(os.path.join(out, "fault_matrix.txt"), "w") as report:
                fm = subprocess.Popen(
                    [sys.executable, os.path.join(HERE, "fault_matrix.py"),
                     "--build", a.build, "--faults", a.fault,
                     "--ranks-per-host", "2", "--comm-timeout", "25",
                     "--abort-grace", "5", "--out", out] + a.matrix_args,
                    stdout=report, stderr=subprocess.STDOUT, env=env)
                size, since, took = -1, time.time(), False
                while fm.poll() is None:
                    time.sleep(1)
                    now = os.path.getsize(log) if os.path.exists(log) else 0
                    if now != size:
                        size, since = now, time.time()
                    elif not took and time.time() - since > a.silence:
                        took = True
                        if shutil.which("gdb"):
                            take_stacks(out, hogs)
            with open(os.path.join(out, "fault_matrix.txt")) as f:
                text = f.read()
            froze = ("ended instead of surviving" in text or
                     "as expected;" in text)
            freezes += froze
            print("run %d: %s%s" % (k, "FROZE" if froze else "ok",
                                     ", stacks taken" if took else ""),
                  flush=True)
    finally:
        for h in hogs:
            h.kill()
    print("%d runs, %d froze" % (a.runs, freezes))
    return 0


if __name__ == "__main__":
    sys.exit(main())
