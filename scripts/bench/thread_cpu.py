#!/usr/bin/env python3
"""Per-thread CPU time and context switches of a running training job.

Starts COMMAND (for instance an `mpirun ... poseidon_train train ...` line),
lets it warm up for --warmup seconds, then reads /proc/<pid>/task/<tid>/stat
and .../status of every process whose command line contains --match (by
default "poseidon_train") at the start and the end of a --window seconds
window, and prints for each thread: CPU seconds used in the window, and
voluntary and involuntary context switches per second. Communication
threads are named "psd push 0", "psd progress", ... (see
docs/distributed.md), so the table shows what the distribution costs beside
the training thread. The job is killed after the window; the "Iteration N
(X iter/s" rates it printed are repeated at the end.

Linux only. Example (two ranks, one core each):

  scripts/bench/thread_cpu.py -- mpirun --allow-run-as-root -np 2 \\
      --bind-to core --map-by core build/tools/poseidon_train train \\
      --solver=solver.prototxt
"""

import argparse
import glob
import os
import re
import signal
import subprocess
import sys
import tempfile
import time


def snapshot(match):
    """{(pid, tid): (thread name, cpu ticks, voluntary, involuntary)}."""
    out = {}
    me = str(os.getpid())
    for task in glob.glob("/proc/[0-9]*/task/[0-9]*"):
        pid, tid = task.split("/")[2], task.split("/")[4]
        if pid == me:
            continue
        try:
            with open("/proc/%s/cmdline" % pid, "rb") as f:
                if match.encode() not in f.read():
                    continue
            with open(task + "/stat") as f:
                stat = f.read()
            name = stat[stat.index("(") + 1:stat.rindex(")")]
            fields = stat[stat.rindex(")") + 2:].split()
            ticks = int(fields[11]) + int(fields[12])  # utime + stime
            switches = {}
            with open(task + "/status") as f:
                for line in f:
                    if "ctxt_switches" in line:
                        key, value = line.split(":")
                        switches[key] = int(value)
            out[(pid, tid)] = (name, ticks,
                               switches.get("voluntary_ctxt_switches", 0),
                               switches.get("nonvoluntary_ctxt_switches", 0))
        except (OSError, ValueError):
            continue  # the thread ended while we looked
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--warmup", type=float, default=4.0)
    ap.add_argument("--window", type=float, default=5.0)
    ap.add_argument("--match", default="poseidon_train",
                    help="count processes whose command line contains this")
    ap.add_argument("command", nargs=argparse.REMAINDER)
    args = ap.parse_args()
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        sys.exit("give the command to run after --")
    if not os.path.isdir("/proc/self/task"):
        sys.exit("needs Linux's /proc")
    tick = os.sysconf("SC_CLK_TCK")
    with tempfile.TemporaryFile(mode="w+") as log:
        # Its own session, so that the whole job (mpirun and its ranks) can
        # be ended at once.
        job = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT,
                               start_new_session=True)
        time.sleep(args.warmup)
        before, start = snapshot(args.match), time.time()
        time.sleep(args.window)
        after, end = snapshot(args.match), time.time()
        try:
            os.killpg(job.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        job.wait()
        log.seek(0)
        rates = re.findall(r"Iteration \d+ \(([0-9.]+) iter/s", log.read())
    seconds = end - start
    print("%-8s %-18s %10s %12s %14s" % ("pid", "thread", "cpu s",
                                          "voluntary/s", "involuntary/s"))
    for key in sorted(after):
        name, ticks, vol, invol = after[key]
        _, ticks0, vol0, invol0 = before.get(key, (name, 0, 0, 0))
        cpu = (ticks - ticks0) / tick
        if cpu == 0 and vol == vol0:
            continue
        print("%-8s %-18s %10.2f %12.0f %14.0f" % (
            key[0], name, cpu, (vol - vol0) / seconds,
            (invol - invol0) / seconds))
    print("window %.2f s; iter/s reported: %s" % (seconds,
                                                   ", ".join(rates) or "none"))


if __name__ == "__main__":
    main()
